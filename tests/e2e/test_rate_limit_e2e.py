"""max-rate end to end on the local runtime (docs/flow-control.md): a trigger limited to 20 events
per second with a backlog far larger, measured at a real HTTP subscriber. Short, to keep the suite
fast: 8 s of measurement after a 2 s warm-up, so the tolerance is +-25 % (one token's timing at
either end of a short window weighs more); benchmarks/rate_limit.py measures 30 s within +-15 %.
None of the backlog fails or is dead-lettered on the way: deliveries over the rate are delayed,
and delayed_delivery_count counts them."""

from __future__ import annotations

import json
import threading
import time
import uuid
from bisect import bisect_left

import httpx
import pytest

from brokerctl.event_display import EventDisplay, Received, Reply
from tests.e2e.conftest import LocalBroker, wait_until

pytestmark = pytest.mark.e2e

RATE = 20.0
WARMUP = 2.0
WINDOW = 8.0
TOLERANCE_PCT = 25.0


def _metric(broker: LocalBroker, name: str, ns: str) -> float:
    text = httpx.get(f"{broker.url}/metrics", timeout=10).text
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith(f"broker_{name}_total{{") and f'namespace="{ns}"' in line
    )


def test_max_rate_holds_across_concurrent_deliveries(local_broker: LocalBroker) -> None:
    ns = f"rl-{uuid.uuid4().hex[:8]}"
    arrivals: list[float] = []
    lock = threading.Lock()

    def record(got: Received, n: int) -> Reply:
        with lock:
            arrivals.append(time.monotonic())
        return Reply(202)

    assert local_broker.put(ns, "brokers", "default", {"metadata": {"name": "default"}}).is_success
    with EventDisplay(responder=record, keep=False) as sub:
        trigger = {
            "metadata": {"name": "t", "annotations": {"serverless-broker/max-rate": "20"}},
            "spec": {"broker": "default", "subscriber": {"uri": sub.url}},
        }
        assert local_broker.put(ns, "triggers", "t", trigger).status_code == 201
        local_broker.wait_ready(ns, "triggers", "t")
        backlog = int(RATE * (WARMUP + WINDOW + 4))
        for first in range(0, backlog, 100):  # the ingress takes batches of up to 100
            batch = [
                {"specversion": "1.0", "id": f"e{i}", "source": "/e2e", "type": "rl"}
                for i in range(first, min(backlog, first + 100))
            ]
            r = httpx.post(
                f"{local_broker.url}/{ns}/default",
                content=json.dumps(batch),
                headers={"content-type": "application/cloudevents-batch+json"},
                timeout=30,
            )
            assert r.status_code == 202, r.text
        wait_until(lambda: arrivals, 30, "the first delivery")
        start = arrivals[0] + WARMUP
        end = start + WINDOW
        wait_until(lambda: time.monotonic() > end + 0.3, WARMUP + WINDOW + 5, "the window")
        with lock:
            seen = sorted(arrivals)
    measured = (bisect_left(seen, end) - bisect_left(seen, start)) / WINDOW
    error_pct = (measured - RATE) / RATE * 100
    assert abs(error_pct) <= TOLERANCE_PCT, f"{measured:.1f}/s for a max-rate of {RATE:g}/s"
    assert len(seen) < backlog  # still limited: the backlog is not drained at full speed
    assert _metric(local_broker, "delayed_delivery_count", ns) > 0
    assert _metric(local_broker, "dead_letter_count", ns) == 0
