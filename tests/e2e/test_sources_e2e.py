"""Sources end to end on the local runtime (docs/sources.md): a PingSource with an every-minute
schedule delivers to a trigger's subscriber within 70 s (the next minute boundary, then the
trigger's delivery) with Knative's attributes, its time the scheduled minute."""

from __future__ import annotations

import json
import time
import uuid
from datetime import UTC, datetime

import httpx
import pytest

from brokerctl.event_display import EventDisplay
from tests.e2e.conftest import LocalBroker

pytestmark = pytest.mark.e2e

PS = "/apis/sources.knative.dev/v1/namespaces"


def test_an_every_minute_ping_reaches_a_trigger_with_knatives_attributes(
    local_broker: LocalBroker,
) -> None:
    ns = f"ping-{uuid.uuid4().hex[:8]}"
    assert local_broker.put(ns, "brokers", "default", {"metadata": {"name": "default"}}).is_success
    with EventDisplay() as display:
        trigger = {
            "metadata": {"name": "pings"},
            "spec": {
                "broker": "default",
                "filter": {"attributes": {"type": "dev.knative.sources.ping"}},
                "subscriber": {"uri": display.url},
            },
        }
        assert local_broker.put(ns, "triggers", "pings", trigger).status_code == 201
        local_broker.wait_ready(ns, "triggers", "pings")
        source = {
            "apiVersion": "sources.knative.dev/v1",
            "kind": "PingSource",
            "metadata": {"name": "every-minute"},
            "spec": {
                "schedule": "* * * * *",
                "contentType": "application/json",
                "data": '{"message": "Hello world!"}',
                "sink": {"ref": {"apiVersion": "eventing.knative.dev/v1", "kind": "Broker",
                                 "name": "default"}},
            },
        }  # fmt: skip
        url = f"{local_broker.url}{PS}/{ns}/pingsources/every-minute"
        r = httpx.put(url, json=source, timeout=30)
        assert r.status_code == 201, r.text
        conditions = {c["type"]: c["status"] for c in r.json()["status"]["conditions"]}
        assert conditions["Ready"] == "True", r.json()["status"]
        created = time.monotonic()
        assert display.wait_for(lambda got: len(got) >= 1, timeout=70), "no ping within 70 s"
        took = time.monotonic() - created
    got = display.received[0]
    headers = {k.lower(): v for k, v in got.headers.items()}
    assert headers["ce-type"] == "dev.knative.sources.ping"
    assert headers["ce-source"] == f"/apis/v1/namespaces/{ns}/pingsources/every-minute"
    assert headers["ce-specversion"] == "1.0" and len(headers["ce-id"]) == 36
    assert headers["content-type"] == "application/json"
    assert json.loads(got.body) == {"message": "Hello world!"}
    scheduled = datetime.fromisoformat(headers["ce-time"].replace("Z", "+00:00"))
    assert scheduled.second == 0 and scheduled.microsecond == 0  # on the minute
    assert abs((datetime.now(UTC) - scheduled).total_seconds()) < 30
    print(f"first ping after {took:.1f} s")
