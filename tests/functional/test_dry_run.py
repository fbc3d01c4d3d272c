"""``PUT ...?dryRun=All`` (Kubernetes' server-side dry run): the same validation and admission as
a PUT, the resource as it would be stored in the answer, nothing stored or provisioned. What
``brokerctl apply --dry-run`` and ``brokerctl diff`` ask (docs/manifests.md)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from chalice.test import Client

from chalicelib.container import use_container
from tests.functional.harness import CP, Harness


@pytest.fixture
def h() -> Iterator[Harness]:
    h = Harness()
    use_container(h.container)
    yield h
    use_container(None)


def put(client: Client, path: str, body: Any, query: str = "?dryRun=All") -> Any:
    return client.http.put(
        path + query, headers={"content-type": "application/json"}, body=json.dumps(body)
    )


TRIGGER = {
    "metadata": {"name": "orders"},
    "spec": {"broker": "default", "subscriber": {"uri": "http://sub.example/"}},
}


def test_a_dry_run_create_answers_the_resource_and_stores_nothing(h: Harness, client: Client):
    r = put(client, f"{CP}/ns/brokers/default", {"metadata": {"name": "default"}})
    assert r.status_code == 201, r.body
    doc = r.json_body
    assert doc["metadata"]["generation"] == 1 and doc["metadata"]["uid"]
    assert doc["metadata"]["annotations"]["eventing.knative.dev/broker.class"] == (
        "ServerlessBroker"
    )
    assert doc["spec"]["delivery"]["retry"] == 10  # the defaults a real PUT would store
    assert client.http.get(f"{CP}/ns/brokers/default").status_code == 404
    assert h.store.list("broker", None) == []


def test_a_dry_run_update_keeps_the_stored_resource_and_its_queues(h: Harness, client: Client):
    h.broker()
    stored = h.trigger("orders")
    queues_before = h.queues.list("")
    changed = {**TRIGGER, "spec": {**TRIGGER["spec"], "subscriber": {"uri": "http://b.example/"}}}
    r = put(client, f"{CP}/ns/triggers/orders", changed)
    assert r.status_code == 200, r.body
    assert r.json_body["spec"]["subscriber"]["uri"] == "http://b.example/"
    assert r.json_body["metadata"]["generation"] == stored["metadata"]["generation"] + 1
    live = client.http.get(f"{CP}/ns/triggers/orders").json_body
    assert live["spec"]["subscriber"]["uri"] == "http://sub.example/"
    assert live["metadata"]["generation"] == stored["metadata"]["generation"]
    assert h.queues.list("") == queues_before and queues_before


def test_a_dry_run_refuses_what_a_put_refuses(h: Harness, client: Client):
    bad = {"metadata": {"name": "orders"}, "spec": {"filters": [{"exact": {}}]}}
    r = put(client, f"{CP}/ns/triggers/orders", bad)
    assert r.status_code == 400
    fields = {e["field"] for e in r.json_body["errors"]}
    assert "spec.subscriber" in " ".join(fields) and "spec.filters[0].exact" in fields
    h.broker()
    immutable = {
        "metadata": {"name": "default"},
        "spec": {"config": {"kind": "ConfigMap", "name": "c"}},
    }
    r = put(client, f"{CP}/ns/brokers/default", immutable)
    assert r.status_code == 422 and r.json_body["errors"][0]["field"] == "spec.config"


def test_a_dry_run_of_a_replay_checks_its_broker(h: Harness, client: Client):
    body = {"spec": {"from": "2020-01-01T00:00:00Z", "to": "2020-01-02T00:00:00Z"}}
    r = put(client, f"{CP}/ns/brokers/default/replays/nightly", body)
    assert r.status_code == 404 and "does not exist" in r.json_body["detail"]
    h.broker()
    r = put(client, f"{CP}/ns/brokers/default/replays/nightly", body)
    assert r.status_code == 201, r.body
    assert client.http.get(f"{CP}/ns/brokers/default/replays/nightly").status_code == 404


@pytest.mark.parametrize("value", ["all", "true", "", "None"])
def test_dry_run_takes_only_all(h: Harness, client: Client, value: str):
    r = put(client, f"{CP}/ns/brokers/default", {}, query=f"?dryRun={value}")
    assert r.status_code == 400
    assert r.json_body["errors"] == [
        {"field": "dryRun", "message": f'must be "All", got "{value}"'}
    ]
    assert client.http.get(f"{CP}/ns/brokers/default").status_code == 404
