"""Delivery semantics on the local runtime with a programmable subscriber (design.md §2.3)."""

from __future__ import annotations

import base64
import itertools
import json
import time
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from brokerctl.event_display import EventDisplay, Received, Reply
from tests.e2e.conftest import LocalBroker, wait_until

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def local_broker(any_local_broker: LocalBroker) -> LocalBroker:
    """On the embedded moto and on LocalStack (tests/e2e/conftest.py)."""
    return any_local_broker


@pytest.fixture
def ns(local_broker: LocalBroker) -> Iterator[str]:
    ns = f"d-{uuid.uuid4().hex[:8]}"
    r = local_broker.put(ns, "brokers", "default", {"metadata": {"name": "default"}})
    assert r.status_code == 201, r.text
    yield ns


def make_trigger(
    broker: LocalBroker, ns: str, name: str, uri: str, type_: str, **delivery: Any
) -> None:
    spec: dict[str, Any] = {
        "broker": "default",
        "filter": {"attributes": {"type": type_}},
        "subscriber": {"uri": uri},
    }
    if delivery:
        spec["delivery"] = delivery
    r = broker.put(ns, "triggers", name, {"metadata": {"name": name}, "spec": spec})
    assert r.status_code == 201, r.text
    broker.wait_ready(ns, "triggers", name)


def send(broker: LocalBroker, ns: str, type_: str, data: bytes = b"x", **headers: str) -> None:
    h = {
        "ce-specversion": "1.0",
        "ce-id": headers.pop("id", uuid.uuid4().hex),
        "ce-source": "/e2e",
        "ce-type": type_,
        "content-type": headers.pop("content_type", "application/octet-stream"),
        **headers,
    }
    r = httpx.post(f"{broker.url}/{ns}/default", content=data, headers=h, timeout=30)
    assert r.status_code == 202, r.text


def dead_letters(broker: LocalBroker, ns: str, trigger: str) -> list[dict[str, Any]]:
    r = httpx.get(f"{broker.cp(ns)}/triggers/{trigger}/deadletters?limit=50", timeout=30)
    assert r.status_code == 200, r.text
    return list(r.json()["items"])


@pytest.mark.parametrize(("code", "attempts"), [(500, 3), (429, 3), (404, 3), (400, 1), (422, 1)])
def test_attempts_per_status_code(
    local_broker: LocalBroker, ns: str, code: int, attempts: int
) -> None:
    with EventDisplay(responder=lambda got, n: Reply(code, body=b"nope")) as sub:
        make_trigger(
            local_broker,
            ns,
            "t",
            sub.url,
            "fail",
            retry=2,
            backoffPolicy="linear",
            backoffDelay="PT0S",
        )
        send(local_broker, ns, "fail")
        items = wait_until(lambda: dead_letters(local_broker, ns, "t"), 30, "dead letter")
        assert len(sub.received) == attempts
        event = items[0]["event"]
        assert event["knativeerrorcode"] == code
        assert event["knativeerrordest"] == sub.url
        assert base64.b64decode(event["knativeerrordata"]) == b"nope"


def test_retry_order_and_spacing(local_broker: LocalBroker, ns: str) -> None:
    times: list[float] = []

    def fail_twice(got: Received, n: int) -> Reply:
        times.append(time.monotonic())
        return Reply(503 if n <= 2 else 202)

    with EventDisplay(responder=fail_twice) as sub:
        make_trigger(
            local_broker,
            ns,
            "t",
            sub.url,
            "flaky",
            retry=3,
            backoffPolicy="exponential",
            backoffDelay="PT1S",
        )
        send(local_broker, ns, "flaky", id="flaky-1")
        assert sub.wait_for(lambda got: len(got) >= 3, timeout=30)
        gaps = [b - a for a, b in itertools.pairwise(times)]
        # exponential with d = 1 s: waits of 1 s then 2 s; SQS visibility is whole seconds and
        # the poller long-polls, so allow +1.5 s of slack and no early retry.
        assert 0.9 <= gaps[0] <= 2.5, gaps
        assert 1.9 <= gaps[1] <= 3.5, gaps
        assert [g.headers["ce-id"] for g in sub.received] == ["flaky-1"] * 3
        wait_until(lambda: True, 0.1, "")
        assert dead_letters(local_broker, ns, "t") == []


def test_replies_reach_other_triggers_and_the_producer(local_broker: LocalBroker, ns: str) -> None:
    def reply(got: Received, n: int) -> Reply:
        if got.headers["ce-type"] == "question":
            return Reply(
                200,
                {
                    "ce-specversion": "1.0",
                    "ce-id": "answer-" + got.headers["ce-id"],
                    "ce-source": "/replier",
                    "ce-type": "answer",
                    "content-type": "text/plain",
                },
                b"42",
            )
        return Reply(202)

    with EventDisplay(responder=reply) as replier, EventDisplay() as listener:
        make_trigger(local_broker, ns, "asks", replier.url, "question")
        make_trigger(local_broker, ns, "answers", listener.url, "answer")
        send(local_broker, ns, "question", id="q1")
        assert listener.wait_for(lambda got: len(got) >= 1, timeout=30)
        got = listener.received[0]
        assert got.headers["ce-id"] == "answer-q1" and got.body == b"42"
        assert "ce-knativebrokerttl" not in got.headers


def test_reply_loop_ends(local_broker: LocalBroker, ns: str) -> None:
    def echo(got: Received, n: int) -> Reply:
        return Reply(
            200,
            {
                "ce-specversion": "1.0",
                "ce-id": f"loop-{n}",
                "ce-source": "/loop",
                "ce-type": "loop",
                "content-type": "text/plain",
            },
            b"again",
        )

    with EventDisplay(responder=echo) as sub:
        make_trigger(local_broker, ns, "loop", sub.url, "loop")
        send(local_broker, ns, "loop", **{"ce-knativebrokerttl": "6"})
        # Stored TTLs 5, 4, 3, 2, 1: five deliveries, then the reply is refused and it stops.
        assert sub.wait_for(lambda got: len(got) >= 5, timeout=30)
        assert not sub.wait_for(lambda got: len(got) > 5, timeout=3)


def test_headers_and_trace_context(local_broker: LocalBroker, ns: str) -> None:
    trace = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
    with EventDisplay() as sub:
        make_trigger(local_broker, ns, "t", sub.url, "traced")
        send(
            local_broker,
            ns,
            "traced",
            traceparent=trace,
            **{"knative-hello": "world", "x-request-id": "req-1", "foo": "bar"},
        )
        assert sub.wait_for(lambda got: len(got) >= 1, timeout=30)
        h = sub.received[0].headers
        assert h["traceparent"].split("-")[1] == "4bf92f3577b34da6a3ce929d0e0e4736"
        assert h["knative-hello"] == "world" and h["x-request-id"] == "req-1"
        assert "foo" not in h and h["prefer"] == "reply" and h["kn-namespace"] == ns


@pytest.mark.parametrize("size", [36 * 1024, 1024 * 1024])
def test_large_events_delivered_byte_identical_exactly_once(
    local_broker: LocalBroker, ns: str, size: int
) -> None:
    data = (bytes(range(256)) * (size // 256 + 1))[:size]
    with EventDisplay() as sub:
        make_trigger(local_broker, ns, "big", sub.url, "big")
        send(local_broker, ns, "big", data, id=f"big-{size}")
        assert sub.wait_for(lambda got: len(got) >= 1, timeout=30)
        assert sub.received[0].body == data
        send(local_broker, ns, "big", b"marker", id="marker")
        assert sub.wait_for(lambda got: len(got) >= 2, timeout=30)
        assert [g.headers["ce-id"] for g in sub.received].count(f"big-{size}") == 1


def test_dead_letter_sink_gets_failed_events(local_broker: LocalBroker, ns: str) -> None:
    with EventDisplay(responder=lambda got, n: Reply(400)) as sub, EventDisplay() as dls:
        make_trigger(
            local_broker, ns, "t", sub.url, "dls", retry=0, deadLetterSink={"uri": dls.url}
        )
        send(local_broker, ns, "dls", b"payload", id="dead-1")
        assert dls.wait_for(lambda got: len(got) >= 1, timeout=30)
        got = dls.received[0]
        assert got.headers["ce-id"] == "dead-1" and got.body == b"payload"
        assert got.headers["ce-knativeerrorcode"] == "400"
        assert "prefer" not in got.headers


def test_metrics_endpoint(local_broker: LocalBroker) -> None:
    text = httpx.get(f"{local_broker.url}/metrics").text
    assert "# TYPE broker_event_count counter" in text
    json.dumps(text)
