"""The foundation's end-to-end path: broker and filtered trigger over HTTP, a binary and a
structured event delivered to a real HTTP subscriber, one that must not match is not."""

from __future__ import annotations

import json
import uuid

import httpx
import pytest

from brokerctl.event_display import EventDisplay
from tests.e2e.conftest import LocalBroker, stop_local_broker, wait_until

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def local_broker(any_local_broker: LocalBroker) -> LocalBroker:
    """On the embedded moto and on LocalStack (tests/e2e/conftest.py)."""
    return any_local_broker


def test_event_reaches_matching_subscriber_only(local_broker: LocalBroker) -> None:
    ns = f"e2e-{uuid.uuid4().hex[:6]}"
    with EventDisplay() as subscriber:
        r = local_broker.put(ns, "brokers", "default", {"metadata": {"name": "default"}})
        assert r.status_code == 201, r.text
        assert r.json()["status"]["address"]["url"] == f"{local_broker.url}/{ns}/default"
        trigger = {
            "metadata": {"name": "orders"},
            "spec": {
                "broker": "default",
                "filter": {"attributes": {"type": "com.example.order"}},
                "subscriber": {"uri": subscriber.url + "/orders"},
            },
        }
        r = local_broker.put(ns, "triggers", "orders", trigger)
        assert r.status_code == 201, r.text
        doc = local_broker.wait_ready(ns, "triggers", "orders")
        assert doc["status"]["subscriberUri"] == subscriber.url + "/orders"
        assert _mapping_states(local_broker) == {_expected_state(local_broker)}
        local_broker.wait_ready(ns, "brokers", "default")

        ingress = f"{local_broker.url}/{ns}/default"
        binary_data = bytes(range(256))
        r = httpx.post(
            ingress,
            content=binary_data,
            headers={
                "ce-specversion": "1.0",
                "ce-id": "bin-1",
                "ce-source": "/shop",
                "ce-type": "com.example.order",
                "ce-subject": "a b%20c",
                "ce-myext": "v1",
                "content-type": "application/octet-stream",
            },
        )
        assert r.status_code == 202, r.text
        structured = {
            "specversion": "1.0",
            "id": "json-1",
            "source": "/shop",
            "type": "com.example.order",
            "datacontenttype": "application/json",
            "data": {"total": 12.5, "items": ["a", "b"]},
        }
        r = httpx.post(
            ingress,
            content=json.dumps(structured),
            headers={"content-type": "application/cloudevents+json; charset=utf-8"},
        )
        assert r.status_code == 202, r.text
        other = {**structured, "id": "nope-1", "type": "com.example.refund"}
        r = httpx.post(
            ingress,
            content=json.dumps(other),
            headers={"content-type": "application/cloudevents+json"},
        )
        assert r.status_code == 202, r.text

        assert subscriber.wait_for(lambda got: len(got) >= 2, timeout=30)
        by_id = {g.headers["ce-id"]: g for g in subscriber.received}
        binary = by_id["bin-1"]
        assert binary.path == "/orders"
        assert binary.body == binary_data
        assert binary.headers["content-type"] == "application/octet-stream"
        assert binary.headers["ce-type"] == "com.example.order"
        assert binary.headers["ce-source"] == "/shop"
        assert binary.headers["ce-myext"] == "v1"
        assert binary.headers["ce-subject"] == "a%20b%20c"  # decoded once, re-encoded per 1.0.2
        assert "ce-knativearrivaltime" in binary.headers
        assert "ce-knativebrokerttl" not in binary.headers
        assert binary.headers["prefer"] == "reply"
        assert binary.headers["kn-namespace"] == ns
        js = by_id["json-1"]
        assert json.loads(js.body) == structured["data"]
        assert js.headers["content-type"] == "application/json"

        # A later event proves the refund was processed (in order) and filtered out, not pending.
        r = httpx.post(
            ingress,
            content=b"late",
            headers={
                "ce-specversion": "1.0",
                "ce-id": "bin-2",
                "ce-source": "/shop",
                "ce-type": "com.example.order",
                "content-type": "text/plain",
            },
        )
        assert r.status_code == 202
        assert subscriber.wait_for(lambda got: len(got) >= 3, timeout=30)
        assert "nope-1" not in {g.headers.get("ce-id") for g in subscriber.received}
        assert len(subscriber.received) == 3
        # `brokerctl dev` prints every delivery (deployed, a successful one is logged at DEBUG).
        shown = f"deliver {ns}/default/orders id=bin-2 attempt=1 -> 202 delivered"
        wait_until(lambda: any(shown in line for line in local_broker.lines), 10, shown)


def _expected_state(broker: LocalBroker) -> str:
    # The embedded moto has no pollers of its own; LocalStack does, and they must not compete
    # with the local runtime's (they would spend receive counts, i.e. delivery attempts).
    return "Disabled" if broker.emulator == "localstack" else "Enabled"


def _mapping_states(broker: LocalBroker) -> set[str]:
    import boto3

    lam = boto3.client("lambda", endpoint_url=broker.aws_url, region_name="us-east-1")
    listed = lam.list_event_source_mappings(FunctionName="serverless-broker-local-delivery")
    # Deleting: mappings other tests on the same endpoint deleted (deletion is asynchronous).
    return {m["State"] for m in listed["EventSourceMappings"]} - {"Deleting"}


def test_healthz_and_errors(local_broker: LocalBroker) -> None:
    assert httpx.get(f"{local_broker.url}/healthz").status_code == 200
    r = httpx.post(
        f"{local_broker.url}/nowhere/nobroker",
        content=b"x",
        headers={"ce-specversion": "1.0", "ce-id": "1", "ce-source": "/s", "ce-type": "t"},
    )
    assert r.status_code == 404
    assert r.headers["content-type"] == "application/problem+json"
    r = httpx.post(
        f"{local_broker.url}/nowhere/nobroker",
        content=b"{}",
        headers={"content-type": "application/cloudevents+json"},
    )
    assert r.status_code == 400
    fields = {e["field"] for e in r.json()["errors"]}
    assert {"id", "source", "type", "specversion"} <= fields
    r = httpx.get(f"{local_broker.url}/nowhere/nobroker")
    assert r.status_code == 405 and r.headers["allow"] == "POST, OPTIONS"


def test_ctrl_c_stops_cleanly() -> None:
    from tests.e2e.conftest import start_local_broker

    broker = start_local_broker()
    stop_local_broker(broker)
    assert broker.process.returncode == 0
    wait_until(lambda: any("stopped" in line for line in broker.lines), 5, "stopped line")
