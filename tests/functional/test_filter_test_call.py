"""``POST .../triggers:test`` through Chalice's test client, and a trigger with an eventPattern
receiving only the events that match it (ingress to its queue, on the fakes)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from chalice.test import Client

from chalicelib.container import use_container
from chalicelib.ports import HttpResponse
from tests.functional.harness import CP, Harness


@pytest.fixture
def h() -> Iterator[Harness]:
    h = Harness(HttpResponse(500, {}, b""))
    use_container(h.container)
    yield h
    use_container(None)


def test_call(client: Client, body: Any, ns: str = "ns", spelling: str = "triggers:test") -> Any:
    return client.http.post(
        f"{CP}/{ns}/{spelling}",
        headers={"content-type": "application/json"},
        body=json.dumps(body),
    )


test_call.__test__ = False  # type: ignore[attr-defined]  # a helper, not a test

EVENT = {
    "specversion": "1.0",
    "id": "1",
    "source": "https://shop.example/orders",
    "type": "com.example.order.created",
    "datacontenttype": "application/json",
    "data": {"amount": 42, "customer": {"tier": "gold"}},
}

CASES: list[tuple[str, dict[str, Any], bool, str]] = [
    (
        "legacy",
        {"filter": {"attributes": {"type": "com.example.order.created"}}},
        True,
        "filter.attributes.type: matched",
    ),
    (
        "legacy-miss",
        {"filter": {"attributes": {"type": "x"}}},
        False,
        'filter.attributes.type: expected "x", got "com.example.order.created"',
    ),
    (
        "exact",
        {"filters": [{"exact": {"type": "x"}}]},
        False,
        'filters[0].exact.type: exact "x" did not match "com.example.order.created"',
    ),
    (
        "prefix",
        {"filters": [{"prefix": {"type": "com.example."}}]},
        True,
        'filters[0].prefix.type: prefix "com.example." matched',
    ),
    (
        "suffix-missing",
        {"filters": [{"suffix": {"subject": "x"}}]},
        False,
        'filters[0].suffix.subject: suffix "x" did not match nothing',
    ),
    (
        "all",
        {"filters": [{"all": [{"prefix": {"type": "com."}}, {"exact": {"source": "no"}}]}]},
        False,
        "filters[0].all[1].exact.source",
    ),
    (
        "any",
        {"filters": [{"any": [{"exact": {"type": "no"}}, {"exact": {"type": "nope"}}]}]},
        False,
        "filters[0].any: no filter matched",
    ),
    (
        "not",
        {"filters": [{"not": {"exact": {"type": "no"}}}]},
        True,
        "filters[0].not: the inner filter did not match, so not does",
    ),
    (
        "cesql",
        {"filters": [{"cesql": "type LIKE 'com.%'"}]},
        True,
        "filters[0].cesql: evaluated to true",
    ),
    (
        "cesql-error",
        {"filters": [{"cesql": "INT(nope) > 1"}]},
        False,
        "filters[0].cesql: evaluation error",
    ),
    (
        "pattern",
        {"filters": [{"eventPattern": {"data": {"amount": [{"numeric": [">", 100]}]}}}]},
        False,
        'filters[0].eventPattern.data.amount: [{"numeric": [">", 100]}] did not match 42',
    ),
    (
        "pattern-ok",
        {"filters": [{"eventPattern": {"data": {"customer": {"tier": ["gold"]}}}}]},
        True,
        "filters[0].eventPattern: every field matched (data)",
    ),
    (
        "second-decides",
        {"filters": [{"prefix": {"type": "com."}}, {"exact": {"id": "2"}}]},
        False,
        'filters[1].exact.id: exact "2" did not match "1"',
    ),
    ("none", {"filters": []}, True, "no filter: every event matches"),
]


@pytest.mark.parametrize(("name", "body", "matched", "reason"), CASES, ids=[c[0] for c in CASES])
def test_each_dialect_names_the_deciding_term(
    h: Harness, client: Client, name: str, body: dict[str, Any], matched: bool, reason: str
) -> None:
    r = test_call(client, {**body, "event": EVENT})
    assert r.status_code == 200, r.body
    assert r.json_body["matched"] is matched
    assert any(reason in text for text in r.json_body["reasons"]), r.json_body["reasons"]


def test_the_deployable_spelling_answers_the_same(h: Harness, client: Client) -> None:
    body = {"event": EVENT, "filters": [{"exact": {"type": "x"}}]}
    local, deployable = test_call(client, body), test_call(client, body, spelling="triggers-test")
    assert local.status_code == deployable.status_code == 200
    assert local.json_body == deployable.json_body and local.json_body["matched"] is False


def test_every_problem_is_named_with_400(h: Harness, client: Client) -> None:
    body = {"event": {"id": 1}, "filters": [{"eventPattern": {"a": []}}, {"bogus": {}}], "x": 1}
    r = test_call(client, body)
    assert r.status_code == 400
    fields = {e["field"] for e in r.json_body["errors"]}
    assert {
        "x",
        "event.id",
        "event.type",
        "filters[0].eventPattern.a",
        "filters[1].bogus",
    } <= fields
    r = test_call(client, {"event": EVENT, "filters": [], "trigger": "t"})
    assert r.status_code == 400 and r.json_body["errors"][0]["field"] == "body"
    assert test_call(client, {"filters": []}).json_body["errors"][0]["field"] == "event"


def test_a_trigger_by_name_and_nothing_is_created(h: Harness, client: Client) -> None:
    h.broker()
    h.trigger("big", filters=[{"eventPattern": {"data": {"amount": [{"numeric": [">=", 40]}]}}}])
    before = h.container.triggers.list("ns")
    r = test_call(client, {"event": EVENT, "trigger": "big"})
    assert r.status_code == 200
    assert r.json_body == {
        "matched": True,
        "reasons": ["filters[0].eventPattern: every field matched (data)"],
        "trigger": "big",
    }
    assert test_call(client, {"event": EVENT, "trigger": "nope"}).status_code == 404
    assert h.container.triggers.list("ns") == before


def test_a_pattern_trigger_receives_only_matching_events(h: Harness) -> None:
    h.broker()
    pattern = {"type": ["order"], "data": {"amount": [{"numeric": [">", 100]}]}}
    h.trigger("big", filters=[{"eventPattern": pattern}])
    h.trigger("all")
    json_headers = {
        "ce-specversion": "1.0",
        "ce-source": "/src",
        "ce-type": "order",
        "content-type": "application/json",
    }
    for id_, body in (("small", b'{"amount": 5}'), ("large", b'{"amount": 500}'), ("bad", b"{")):
        assert h.post({**json_headers, "ce-id": id_}, body).status in (200, 202)
    assert h.send(type_="order", id_="text", data=b'{"amount": 500}').status in (200, 202)
    structured = {**json_headers, "content-type": "application/cloudevents+json"}
    doc = {
        "specversion": "1.0",
        "id": "s",
        "source": "/src",
        "type": "order",
        "data": {"amount": 101},
    }
    assert h.post(structured, json.dumps(doc).encode()).status in (200, 202)

    def ids(trigger: str) -> list[str]:
        return sorted(m["event"]["id"] for m in h.messages(h.queue_of(trigger)))

    assert ids("big") == ["large", "s"]
    assert ids("all") == ["bad", "large", "s", "small", "text"]


def test_a_trigger_with_an_invalid_pattern_is_refused_naming_every_problem(
    h: Harness, client: Client
) -> None:
    body = {
        "metadata": {"name": "bad"},
        "spec": {
            "broker": "default",
            "subscriber": {"uri": "http://sub.example/"},
            "filters": [
                {"eventPattern": {"type": [], "data": {"n": [{"numeric": [">", "1"]}]}}},
                {"cesql": "data. = 1"},
            ],
        },
    }
    r = client.http.put(
        f"{CP}/ns/triggers/bad",
        headers={"content-type": "application/json"},
        body=json.dumps(body),
    )
    assert r.status_code == 400
    assert [e["field"] for e in r.json_body["errors"]] == [
        "spec.filters[0].eventPattern.type",
        "spec.filters[0].eventPattern.data.n[0].numeric",
        "spec.filters[1].cesql",
    ]
    assert client.http.get(f"{CP}/ns/triggers/bad").status_code == 404
