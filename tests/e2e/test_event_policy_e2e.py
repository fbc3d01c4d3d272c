"""EventPolicy end to end on the local runtime (docs/security.md): two producers with ingress
tokens post without pause to a second runtime (another container, sharing the first one's AWS
endpoint) while a policy admitting the first is changed through the first runtime's API to admit
the second. Every request that began a cache TTL after the change was answered as the new policy
says, every request answered before the change as the old one said, and exactly the events
answered 202 reach the subscriber. ``brokerctl send --token`` posts as an admitted producer."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import pytest

from brokerctl.event_display import EventDisplay
from tests.e2e.conftest import ROOT, LocalBroker, start_local_broker, stop_local_broker, wait_until

pytestmark = pytest.mark.e2e

EP = "/apis/eventing.knative.dev/v1alpha1/namespaces"
TTL_SECONDS = 1.0  # BROKER_CACHE_TTL_SECONDS of the runtimes (tests/e2e/conftest.py)
# A reload of the broker's configuration, once the TTL has passed, takes a few store reads; a
# request racing it is served the configuration it replaces (routing.ConfigCache). A second on a
# loaded machine (the reads take milliseconds).
RELOAD_SECONDS = 1.0


@pytest.fixture(scope="module")
def second_runtime(local_broker: LocalBroker) -> Iterator[LocalBroker]:
    other = start_local_broker(aws_endpoint=local_broker.aws_url)
    yield other
    stop_local_broker(other)


@dataclass(frozen=True)
class Sent:
    producer: str
    event_id: str
    began: float
    ended: float
    status: int


def _policy(broker: LocalBroker, ns: str, identity: str) -> None:
    body = {"metadata": {"name": "producers"}, "spec": {"from": [{"sub": identity}]}}
    r = httpx.put(f"{broker.url}{EP}/{ns}/eventpolicies/producers", json=body, timeout=30)
    assert r.status_code in (200, 201), r.text


def _token(broker: LocalBroker, ns: str) -> tuple[str, str]:
    r = httpx.post(f"{broker.cp(ns)}/brokers/default/tokens", timeout=30)
    assert r.status_code == 201, r.text
    doc = r.json()
    return f"token:{ns}:{doc['id']}", doc["token"]


def test_a_policy_change_under_traffic_admits_exactly_as_it_says(
    local_broker: LocalBroker, second_runtime: LocalBroker
) -> None:
    ns = f"ep-{uuid.uuid4().hex[:8]}"
    assert (
        local_broker.put(ns, "brokers", "default", {"metadata": {"name": "default"}}).status_code
        == 201
    )
    first, first_secret = _token(local_broker, ns)
    second, second_secret = _token(local_broker, ns)
    _policy(local_broker, ns, first)
    sent: list[Sent] = []
    lock = threading.Lock()
    stop = threading.Event()
    with EventDisplay() as sub:
        trigger = {
            "metadata": {"name": "t"},
            "spec": {"broker": "default", "subscriber": {"uri": sub.url}},
        }
        assert local_broker.put(ns, "triggers", "t", trigger).status_code == 201
        local_broker.wait_ready(ns, "triggers", "t")

        def produce(name: str, secret: str) -> None:
            with httpx.Client(timeout=30) as client:
                n = 0
                while not stop.is_set():
                    event_id = f"{name}-{n}"
                    headers = {
                        "ce-specversion": "1.0",
                        "ce-id": event_id,
                        "ce-source": "/e2e",
                        "ce-type": "policy.test",
                        "authorization": f"Bearer {secret}",
                    }
                    began = time.monotonic()
                    r = client.post(
                        f"{second_runtime.url}/{ns}/default", content=b"x", headers=headers
                    )
                    with lock:
                        sent.append(Sent(name, event_id, began, time.monotonic(), r.status_code))
                    n += 1
                    time.sleep(0.02)

        producers = [
            threading.Thread(target=produce, args=("first", first_secret)),
            threading.Thread(target=produce, args=("second", second_secret)),
        ]
        for p in producers:
            p.start()
        try:
            time.sleep(1.0)
            change_began = time.monotonic()
            _policy(local_broker, ns, second)
            change_done = time.monotonic()
            time.sleep(TTL_SECONDS + RELOAD_SECONDS + 1.5)
        finally:
            stop.set()
            for p in producers:
                p.join(timeout=30)

        before = [s for s in sent if s.ended < change_began]
        after = [s for s in sent if s.began > change_done + TTL_SECONDS + RELOAD_SECONDS]
        assert {s.producer for s in before} == {"first", "second"}, "traffic before the change"
        assert {s.producer for s in after} == {"first", "second"}, "traffic after the bound"
        wrong_before = [s for s in before if s.status != (202 if s.producer == "first" else 403)]
        wrong_after = [s for s in after if s.status != (202 if s.producer == "second" else 403)]
        assert not wrong_before and not wrong_after, (wrong_before, wrong_after)
        assert {s.status for s in sent} <= {202, 403}, {s.status for s in sent}

        # Exactly the events answered 202 are delivered: nothing refused slipped through.
        accepted = {s.event_id for s in sent if s.status == 202}
        delivered = lambda: {g.headers["ce-id"] for g in sub.received}  # noqa: E731
        wait_until(lambda: accepted <= delivered(), 30, "every accepted event delivered")
        assert delivered() == accepted

        # The CLI posts as the admitted producer; the other is refused with the decision.
        base = [sys.executable, "-m", "brokerctl", "--url", local_broker.url, "-n", ns, "send"]
        event = ["--type", "policy.test", "--source", "/cli", "--data", "hi"]
        ok = subprocess.run(
            [*base, *event, "--token", second_secret],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert ok.returncode == 0, ok.stderr
        refused = subprocess.run(
            [*base, *event, "--token", first_secret],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert refused.returncode != 0 and "403" in refused.stderr + refused.stdout, refused
