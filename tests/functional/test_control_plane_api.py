"""The control-plane API through Chalice's test client, on in-memory fakes."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from chalice.test import Client

from chalicelib.container import use_container
from chalicelib.ports import HttpResponse
from tests.functional.harness import CP, Harness, call


@pytest.fixture
def h() -> Iterator[Harness]:
    h = Harness(HttpResponse(500, {}, b""))
    use_container(h.container)
    yield h
    use_container(None)


def conditions(doc: dict[str, Any]) -> dict[str, tuple[str, str | None]]:
    return {c["type"]: (c["status"], c.get("reason")) for c in doc["status"]["conditions"]}


BROKER = {"metadata": {"name": "default"}}


def trigger(name: str = "t1", **spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "spec": {"broker": "default", "subscriber": {"uri": "http://sub.example/"}, **spec},
    }


def test_broker_crud(h: Harness, client: Client) -> None:
    r = call(client, "post", f"{CP}/ns/brokers", BROKER)
    assert r.status_code == 201
    doc = r.json_body
    assert doc["apiVersion"] == "eventing.knative.dev/v1" and doc["kind"] == "Broker"
    assert doc["metadata"]["generation"] == 1 and doc["metadata"]["uid"]
    assert doc["spec"]["delivery"] == {
        "retry": 10,
        "backoffPolicy": "exponential",
        "backoffDelay": "PT0.2S",
    }
    assert doc["status"]["address"]["url"] == "http://127.0.0.1:8080/ns/default"
    assert conditions(doc)["Ready"][0] == "True"  # cache TTL 0 in the harness
    assert call(client, "post", f"{CP}/ns/brokers", BROKER).status_code == 409
    listed = call(client, "get", f"{CP}/ns/brokers").json_body
    assert listed["kind"] == "BrokerList" and [i["metadata"]["name"] for i in listed["items"]] == [
        "default"
    ]
    r = call(
        client, "put", f"{CP}/ns/brokers/default", {**BROKER, "spec": {"delivery": {"retry": 2}}}
    )
    assert r.status_code == 200 and r.json_body["metadata"]["generation"] == 2
    assert call(client, "delete", f"{CP}/ns/brokers/default").status_code == 200
    assert call(client, "get", f"{CP}/ns/brokers/default").status_code == 404


def test_validation_reports_every_problem(h: Harness, client: Client) -> None:
    body = {
        "metadata": {"name": "Bad_Name"},
        "spec": {
            "broker": "default",
            "subscriber": {"uri": "ftp://user@x/"},
            "filter": {"attributes": {"Type": "x"}},
            "delivery": {"retry": -1, "backoffPolicy": "sometimes", "backoffDelay": "soon"},
        },
    }
    r = call(client, "post", f"{CP}/ns/triggers", body)
    assert r.status_code == 400
    assert r.headers["Content-Type"] == "application/problem+json"
    fields = {e["field"] for e in r.json_body["errors"]}
    for expected in (
        "metadata.name",
        "spec.subscriber.uri",
        "spec.delivery.retry",
        "spec.delivery.backoffPolicy",
        "spec.delivery.backoffDelay",
    ):
        assert expected in fields, fields
    assert any(f.startswith("spec.filter.attributes") for f in fields)
    assert call(client, "put", f"{CP}/ns/triggers/t1", b"not json").status_code == 400


def test_immutable_fields_are_422(h: Harness, client: Client) -> None:
    call(client, "put", f"{CP}/ns/brokers/default", BROKER)
    assert call(client, "put", f"{CP}/ns/triggers/t1", trigger()).status_code == 201
    moved = trigger()
    moved["spec"]["broker"] = "other"
    assert call(client, "put", f"{CP}/ns/triggers/t1", moved).status_code == 422
    classed = {
        "metadata": {
            "name": "default",
            "annotations": {"eventing.knative.dev/broker.class": "MTChannelBasedBroker"},
        }
    }
    assert call(client, "put", f"{CP}/ns/brokers/default", classed).status_code in (400, 422)


def test_trigger_before_broker_then_ready(h: Harness, client: Client) -> None:
    r = call(client, "put", f"{CP}/ns/triggers/t1", trigger())
    assert r.status_code == 201
    conds = conditions(r.json_body)
    assert conds["BrokerReady"] == ("False", "BrokerDoesNotExist")
    assert conds["Ready"][0] == "False"
    assert h.queues.list("sb-") == []
    call(client, "put", f"{CP}/ns/brokers/default", BROKER)
    doc = call(client, "get", f"{CP}/ns/triggers/t1").json_body
    assert conditions(doc)["Ready"][0] == "True"
    assert len(h.queues.list("sb-")) == 2  # queue and DLQ
    assert len(h.mappings.list(h.settings.delivery_function)) == 1


def test_deleting_the_broker_removes_queues_and_unreadies_triggers(
    h: Harness, client: Client
) -> None:
    call(client, "put", f"{CP}/ns/brokers/default", BROKER)
    call(client, "put", f"{CP}/ns/triggers/t1", trigger())
    call(client, "delete", f"{CP}/ns/brokers/default")
    assert h.queues.list("sb-") == []
    assert h.mappings.list(h.settings.delivery_function) == []
    doc = call(client, "get", f"{CP}/ns/triggers/t1").json_body
    assert conditions(doc)["BrokerReady"] == ("False", "BrokerDoesNotExist")
    call(client, "put", f"{CP}/ns/brokers/default", BROKER)
    doc = call(client, "get", f"{CP}/ns/triggers/t1").json_body
    assert conditions(doc)["Ready"][0] == "True"


def test_dead_letter_sink_gets_a_dlq_mapping(h: Harness, client: Client) -> None:
    call(client, "put", f"{CP}/ns/brokers/default", BROKER)
    call(
        client,
        "put",
        f"{CP}/ns/triggers/t1",
        trigger(delivery={"deadLetterSink": {"uri": "http://dls.example/"}}),
    )
    assert len(h.mappings.list(h.settings.dead_letter_function)) == 1
    doc = call(client, "get", f"{CP}/ns/triggers/t1").json_body
    assert doc["status"]["deadLetterSinkUri"] == "http://dls.example/"
    call(client, "put", f"{CP}/ns/triggers/t1", trigger())
    assert h.mappings.list(h.settings.dead_letter_function) == []


def test_reconciler_repairs_drift(h: Harness, client: Client) -> None:
    call(client, "put", f"{CP}/ns/brokers/default", BROKER)
    call(client, "put", f"{CP}/ns/triggers/t1", trigger())
    queue = h.queue_of("t1")
    [mapping] = h.mappings.list(h.settings.delivery_function)
    h.mappings.delete(mapping.uuid)
    h.queues.delete(queue)
    done = h.container.control_plane.reconcile_all()
    assert any("create queue" in line for line in done)
    assert h.queues.get(queue) is not None
    assert len(h.mappings.list(h.settings.delivery_function)) == 1
    assert h.container.control_plane.reconcile_all() == []  # nothing left to repair


def test_dead_letter_list_redrive_purge(h: Harness, client: Client) -> None:
    call(client, "put", f"{CP}/ns/brokers/default", BROKER)
    call(client, "put", f"{CP}/ns/triggers/t1", trigger(delivery={"retry": 0}))
    for i in range(3):
        assert h.send(id_=str(i)).status == 202
    h.deliver_once("t1")
    base = f"{CP}/ns/triggers/t1/deadletters"
    listed = call(client, "get", f"{base}?limit=10").json_body
    assert listed["count"] == 3
    assert {i["event"]["knativeerrorcode"] for i in listed["items"]} == {500}
    assert call(client, "get", f"{base}?limit=10").json_body["count"] == 3  # not consumed
    r = call(client, "post", f"{base}/redrive")
    assert r.status_code == 202 and r.json_body["redriven"] == 3
    queued = h.messages(h.queue_of("t1"))
    assert len(queued) == 3 and all("knativeerrorcode" not in m["event"] for m in queued)
    h.deliver_once("t1")
    assert call(client, "delete", base).json_body == {"purged": 3}


def test_unknown_resources_are_404(h: Harness, client: Client) -> None:
    assert call(client, "get", f"{CP}/ns/triggers/missing").status_code == 404
    assert call(client, "delete", f"{CP}/ns/brokers/missing").status_code == 404
    assert call(client, "get", f"{CP}/ns/triggers/missing/deadletters").status_code == 404


def test_resource_version_precondition(h: Harness, client: Client) -> None:
    doc = call(client, "put", f"{CP}/ns/brokers/default", BROKER).json_body
    version = doc["metadata"]["resourceVersion"]
    stale = {"metadata": {"name": "default", "resourceVersion": "0"}}
    r = call(client, "put", f"{CP}/ns/brokers/default", stale)
    assert r.status_code == 409
    fresh = call(client, "get", f"{CP}/ns/brokers/default").json_body["metadata"]
    body = {
        "metadata": {"name": "default", "resourceVersion": fresh["resourceVersion"]},
        "spec": {"delivery": {"retry": 1}},
    }
    r = call(client, "put", f"{CP}/ns/brokers/default", body)
    assert r.status_code == 200, r.json_body
    assert r.json_body["metadata"]["resourceVersion"] != version


@pytest.mark.parametrize(
    "body",
    [
        b"[" * 100_000 + b"]" * 100_000,
        b'{"metadata": {"name": "t"}, "spec": {"x": ' + b"[" * 990 + b"]" * 990 + b"}}",
        b'{"metadata": {"name": "t"}, "spec": {"delivery": {"retry": ' + b"1" * 5000 + b"}}}",
    ],
)
def test_hostile_bodies_are_400_problems(h: Harness, client: Client, body: bytes) -> None:
    # Issue 16 defect 2: each of these was a 500 (RecursionError, ValueError of int()).
    for method, path in (("put", f"{CP}/ns/brokers/b"), ("put", f"{CP}/ns/triggers/t")):
        r = call(client, method, path, body)
        assert r.status_code == 400, r.body
        assert {k.lower(): v for k, v in r.headers.items()}[
            "content-type"
        ] == "application/problem+json"
        assert json.loads(r.body)["errors"][0]["field"] == "body"


def test_a_huge_limit_is_a_400_problem(h: Harness, client: Client) -> None:
    call(client, "put", f"{CP}/ns/brokers/default", BROKER)
    call(client, "put", f"{CP}/ns/triggers/t1", trigger())
    r = call(client, "get", f"{CP}/ns/triggers/t1/deadletters?limit={'1' * 5000}")
    assert r.status_code == 400 and json.loads(r.body)["errors"][0]["field"] == "limit"
