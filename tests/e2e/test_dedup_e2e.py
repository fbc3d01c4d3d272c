"""Deduplication end to end on the local runtime (docs/dedup.md): repeats of (source, id) sent
alone, inside a batch and by concurrent producers reach a real HTTP subscriber exactly once, and
``duplicate_count`` counts the rest."""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from brokerctl.event_display import EventDisplay
from tests.e2e.conftest import LocalBroker, wait_until

pytestmark = pytest.mark.e2e

CONCURRENT_IDS = 5
COPIES = 4


def _post(broker: LocalBroker, ns: str, event_id: str, client: httpx.Client) -> int:
    headers = {"ce-specversion": "1.0", "ce-id": event_id, "ce-source": "/e2e", "ce-type": "d"}
    return client.post(f"{broker.url}/{ns}/default", content=b"x", headers=headers).status_code


def _duplicates(broker: LocalBroker, ns: str) -> float:
    text = httpx.get(f"{broker.url}/metrics", timeout=10).text
    prefix = f'broker_duplicate_count_total{{broker="default",namespace="{ns}"}} '
    return sum(float(line[len(prefix) :]) for line in text.splitlines() if line.startswith(prefix))


def test_duplicates_are_delivered_once(local_broker: LocalBroker) -> None:
    ns = f"dd-{uuid.uuid4().hex[:8]}"
    broker = {
        "metadata": {"name": "default", "annotations": {"serverless-broker/dedup-window": "PT5M"}}
    }
    assert local_broker.put(ns, "brokers", "default", broker).status_code == 201
    with EventDisplay() as sub, httpx.Client(timeout=30) as client:
        trigger = {
            "metadata": {"name": "t"},
            "spec": {"broker": "default", "subscriber": {"uri": sub.url}},
        }
        assert local_broker.put(ns, "triggers", "t", trigger).status_code == 201
        local_broker.wait_ready(ns, "triggers", "t")

        # One event, then its repeat.
        assert _post(local_broker, ns, "s1", client) == 202
        assert _post(local_broker, ns, "s1", client) == 202
        # A batch repeating one of its own events and the one above.
        batch = [
            {"specversion": "1.0", "id": i, "source": "/e2e", "type": "d"}
            for i in ("b1", "b2", "b1", "s1")
        ]
        r = client.post(
            f"{local_broker.url}/{ns}/default",
            content=json.dumps(batch),
            headers={"content-type": "application/cloudevents-batch+json"},
        )
        assert r.status_code == 202, r.text
        # The same event from several producers at the same instant. A copy that finds the
        # first one's claim still pending is told to retry (503, Retry-After), never 202 before
        # the event is stored; as producers do, each retries until it is answered 202.
        start = threading.Barrier(COPIES)

        def copy(event_id: str) -> list[int]:
            start.wait()
            statuses: list[int] = []
            deadline = time.monotonic() + 30
            with httpx.Client(timeout=30) as own:
                while time.monotonic() < deadline:
                    headers = {"ce-specversion": "1.0", "ce-id": event_id, "ce-source": "/e2e"}
                    r = own.post(
                        f"{local_broker.url}/{ns}/default",
                        content=b"x",
                        headers={**headers, "ce-type": "d"},
                    )
                    statuses.append(r.status_code)
                    if r.status_code != 503:
                        break
                    time.sleep(float(r.headers["retry-after"]))  # what the server asked for
            return statuses

        for n in range(CONCURRENT_IDS):
            with ThreadPoolExecutor(COPIES) as pool:
                for statuses in pool.map(copy, [f"c{n}"] * COPIES):
                    assert statuses[-1] == 202 and set(statuses) <= {202, 503}, statuses

        expected = {"s1", "b1", "b2", *(f"c{n}" for n in range(CONCURRENT_IDS))}
        dropped = 1 + 2 + CONCURRENT_IDS * (COPIES - 1)
        wait_until(lambda: _duplicates(local_broker, ns) == dropped, 20, "duplicate_count")
        # Every copy that was enqueued was enqueued before its 202: one event sent after them
        # all and delivered means the queue has had its chance to deliver any extra copy.
        assert _post(local_broker, ns, "last", client) == 202
        ids = lambda: Counter(g.headers["ce-id"] for g in sub.received)  # noqa: E731
        wait_until(lambda: expected | {"last"} <= set(ids()), 30, "every event delivered")
        assert ids() == Counter(expected | {"last"}), ids()
