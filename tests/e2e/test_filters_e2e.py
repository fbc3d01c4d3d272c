"""Filters end to end on the local runtime: a trigger with an EventBridge pattern and a CESQL
data path receives only matching events, and the test call answers in both spellings."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator

import httpx
import pytest

from brokerctl.event_display import EventDisplay
from tests.e2e.conftest import LocalBroker, start_local_broker, stop_local_broker

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def broker() -> Iterator[LocalBroker]:
    b = start_local_broker({})
    yield b
    stop_local_broker(b)


def send(b: LocalBroker, ns: str, id_: str, data: object, content_type: str) -> None:
    body = data if isinstance(data, bytes) else json.dumps(data).encode()
    headers = {
        "ce-specversion": "1.0",
        "ce-id": id_,
        "ce-source": "/e2e",
        "ce-type": "order",
        "content-type": content_type,
    }
    r = httpx.post(f"{b.url}/{ns}/default", content=body, headers=headers, timeout=10)
    assert r.status_code == 202, r.text


def test_pattern_and_data_filters_route_and_explain(broker: LocalBroker) -> None:
    ns = f"f-{uuid.uuid4().hex[:8]}"
    filters = [
        {"eventPattern": {"type": ["order"], "data": {"amount": [{"numeric": [">", 100]}]}}},
        {"cesql": "data.tier = 'gold'"},
    ]
    with EventDisplay() as picky, EventDisplay() as witness:
        default = {"metadata": {"name": "default"}}
        assert broker.put(ns, "brokers", "default", default).status_code == 201
        for name, uri, spec in (("big", picky.url, filters), ("all", witness.url, [])):
            body = {"broker": "default", "subscriber": {"uri": uri}, "filters": spec}
            doc = {"metadata": {"name": name}, "spec": body}
            assert broker.put(ns, "triggers", name, doc).status_code == 201
            broker.wait_ready(ns, "triggers", name)
        json_type = "application/json"
        send(broker, ns, "small", {"amount": 5, "tier": "gold"}, json_type)
        send(broker, ns, "silver", {"amount": 500, "tier": "silver"}, json_type)
        send(broker, ns, "text", {"amount": 500, "tier": "gold"}, "text/plain")
        send(broker, ns, "match", {"amount": 500, "tier": "gold"}, json_type)
        assert witness.wait_for(lambda got: len(got) == 4, 30)
        assert picky.wait_for(lambda got: len(got) >= 1, 30)
        assert [g.headers["ce-id"] for g in picky.received] == ["match"]

        event = {"specversion": "1.0", "id": "1", "source": "/e2e", "type": "order",
                 "data": {"amount": 42, "tier": "gold"}}  # fmt: skip
        for spelling in ("triggers:test", "triggers-test"):
            r = httpx.post(
                f"{broker.cp(ns)}/{spelling}", json={"trigger": "big", "event": event}, timeout=10
            )
            assert r.status_code == 200, r.text
            assert r.json()["matched"] is False
            assert r.json()["reasons"] == [
                'filters[0].eventPattern.data.amount: [{"numeric": [">", 100]}] did not match 42'
            ]
