"""At-least-once, counted (issue 16): faults on the local runtime (real moto server, real HTTP,
the real delivery code), ≥ 1,000 events each; every id answered 202 must have been answered 2xx
by the subscriber or sit in the trigger's DLQ with its reason. Duplicates are counted and shown.

``FAULT_MATRIX=1`` runs it; ``FAULT_EVENTS`` (1000) and ``FAULT_DOWN_SECONDS`` (10; the issue's
30 in a bigger profile) size it.
"""

from __future__ import annotations

import json
import os
import random
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from brokerctl.event_display import EventDisplay, Received, Reply
from tests.e2e.conftest import LocalBroker, start_local_broker, stop_local_broker, wait_until

pytestmark = [
    pytest.mark.e2e,
    # Not in the default run yet: ~7 min, and it failed once on a fresh clone where it had passed
    # here (being investigated; see the issue note). FAULT_MATRIX=1 runs it.
    pytest.mark.skipif(
        os.environ.get("FAULT_MATRIX") != "1", reason="the fault matrix runs with FAULT_MATRIX=1"
    ),
]

EVENTS = int(os.environ.get("FAULT_EVENTS", "1000"))
DOWN_SECONDS = float(os.environ.get("FAULT_DOWN_SECONDS", "10"))
RESULTS: dict[str, dict[str, int]] = {}


@pytest.fixture(scope="module")
def broker() -> Iterator[LocalBroker]:
    b = start_local_broker()
    yield b
    stop_local_broker(b)
    print("\nfault matrix (sent, accepted, delivered, dead-lettered, duplicates, lost):")
    for fault, row in RESULTS.items():
        print(f"  {fault:<28} {json.dumps(row)}")


class Ledger:
    """What the subscriber answered 2xx, per event id."""

    def __init__(self) -> None:
        self.delivered: Counter[str] = Counter()
        self._lock = threading.Lock()

    def record(self, event_id: str) -> None:
        with self._lock:
            self.delivered[event_id] += 1


def _setup(broker: LocalBroker, ns: str, uri: str, delivery: dict[str, Any]) -> None:
    assert broker.put(ns, "brokers", "default", {"metadata": {"name": "default"}}).is_success
    trigger = {
        "metadata": {"name": "t"},
        "spec": {"broker": "default", "subscriber": {"uri": uri}, "delivery": delivery},
    }
    assert broker.put(ns, "triggers", "t", trigger).is_success
    broker.wait_ready(ns, "triggers", "t")


def _send(broker: LocalBroker, ns: str, prefix: str) -> set[str]:
    """EVENTS events, mostly in batches of 10, some single; a 5xx is retried as a producer
    would. Returns the ids answered 202."""
    accepted: set[str] = set()
    ingress = f"{broker.url}/{ns}/default"
    ids = [f"{prefix}-{i}" for i in range(EVENTS)]
    with httpx.Client(timeout=30) as client:
        i = 0
        while i < len(ids):
            chunk = ids[i : i + (1 if i % 100 < 5 else 10)]
            batch = [
                {"specversion": "1.0", "id": e, "source": "/faults", "type": "f"} for e in chunk
            ]
            for _ in range(20):
                r = client.post(
                    ingress,
                    content=json.dumps(batch if len(batch) > 1 else batch[0]),
                    headers={"content-type": "application/cloudevents-batch+json"
                             if len(batch) > 1 else "application/cloudevents+json"},
                )  # fmt: skip
                if r.status_code == 202:
                    accepted.update(chunk)
                    break
                assert r.status_code >= 500, r.text  # a 4xx would be our test's bug
                time.sleep(0.2)
            i += len(chunk)
    return accepted


def _dead_letters(broker: LocalBroker, ns: str) -> dict[str, dict[str, Any]]:
    r = httpx.get(f"{broker.cp(ns)}/triggers/t/deadletters?limit=1000", timeout=60)
    assert r.status_code == 200, r.text
    return {item["event"]["id"]: item["event"] for item in r.json()["items"]}


def _account(
    name: str, broker: LocalBroker, ns: str, ledger: Ledger, accepted: set[str]
) -> dict[str, int]:
    def settled() -> bool:
        dead = _dead_letters(broker, ns)
        return accepted <= set(ledger.delivered) | set(dead)

    wait_until(settled, 180, f"{name}: every accepted event delivered or dead-lettered", every=1)
    dead = _dead_letters(broker, ns)
    for event in dead.values():  # each with its reason
        assert {"knativeerrordest", "knativeerrorcode", "knativeerrordata"} <= set(event)
    lost = accepted - set(ledger.delivered) - set(dead)
    row = {
        "sent": EVENTS,
        "accepted": len(accepted),
        "delivered": len(set(ledger.delivered) & accepted),
        "dead_lettered": len(set(dead) - set(ledger.delivered)),
        "duplicates": sum(n - 1 for n in ledger.delivered.values()),
        "lost": len(lost),
    }
    RESULTS[name] = row
    Path(os.environ.get("FAULT_RESULTS", "/tmp/fault_matrix.json")).write_text(
        json.dumps(RESULTS, indent=2)
    )
    assert lost == set(), f"{name}: {len(lost)} accepted events lost"
    return row


def _flaky(ledger: Ledger, seed: int) -> Callable[[Received, int], Reply]:
    rng = random.Random(seed)
    lock = threading.Lock()

    def respond(got: Received, n: int) -> Reply:
        with lock:
            roll = rng.random()
            kind = rng.choice([500, 503, 429, 408, "slow"])
        if roll < 0.30:
            if kind == "slow":
                time.sleep(1.5)  # over the trigger's 1 s timeout: a timeout for the sender
                return Reply(200)
            return Reply(int(kind), {"Retry-After": "1"} if kind == 429 else {})
        ledger.record(got.headers["ce-id"])
        return Reply(200)

    return respond


def test_subscriber_failing_30_percent_at_random(broker: LocalBroker) -> None:
    ledger = Ledger()
    with EventDisplay(responder=_flaky(ledger, 7), keep=False) as sub:
        _setup(broker, "flaky", sub.url, {"retry": 6, "backoffPolicy": "linear",
                                          "backoffDelay": "PT0.1S", "timeout": "PT1S"})  # fmt: skip
        accepted = _send(broker, "flaky", "flaky")
        row = _account("subscriber 30% failures", broker, "flaky", ledger, accepted)
    assert row["accepted"] == EVENTS


def test_subscriber_down_then_back(broker: LocalBroker) -> None:
    ledger = Ledger()

    def ok(got: Received, n: int) -> Reply:
        ledger.record(got.headers["ce-id"])
        return Reply(200)

    first = EventDisplay(responder=ok, keep=False).start()
    port = int(first.url.rsplit(":", 1)[1])
    _setup(broker, "down", first.url, {"retry": 8, "backoffPolicy": "exponential",
                                       "backoffDelay": "PT1S"})  # fmt: skip
    first.stop()  # down: connections refused
    accepted = _send(broker, "down", "down")
    time.sleep(DOWN_SECONDS)  # the outage itself is the fault being tested, not a wait
    with EventDisplay(port=port, responder=ok, keep=False):
        row = _account("subscriber down, then back", broker, "down", ledger, accepted)
    assert row["accepted"] == EVENTS and row["dead_lettered"] == 0
