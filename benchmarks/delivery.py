"""Delivery throughput: events per second one delivery worker (the ``delivery`` function handling
SQS batches of 10, ``BROKER_DELIVERY_IN_FLIGHT`` requests in flight) pushes to an HTTP
subscriber, side by side with the floor: a bare sequential loop of the same HTTP client (urllib3,
the same call and arguments the worker's sender makes) POSTing the very requests the worker sent,
headers and body byte for byte, to the same subscriber.

Two subscribers, each in its own process: one that takes 5 ms per request (what a subscriber
across a network feels: the headline, the worker ≥ 3× the sequential floor), and one on loopback
that answers at once (a floor for our own cost per event: the worker ≥ 0.6 of the bare loop).

The queue side is the in-memory fake, and the batches are received before the clock starts, as
Lambda's poller receives them outside the function: this measures the worker, not SQS.
Run: .venv/bin/python benchmarks/delivery.py
"""

from __future__ import annotations

import base64
import contextlib
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from dataclasses import replace  # noqa: E402

import httpx  # noqa: E402
import urllib3  # noqa: E402

from benchmarks._result import print_table, write_result  # noqa: E402
from brokerctl.embedded_aws import free_port  # noqa: E402
from chalicelib.adapters.http_sender import Urllib3Sender  # noqa: E402
from chalicelib.config import Settings  # noqa: E402
from chalicelib.ports import HttpResponse  # noqa: E402
from tests.functional.harness import ACCOUNT, REGION, Harness  # noqa: E402

EVENTS = 2000
ROUNDS = 5
SERVICE_MS = 5.0
SLOW_BAR = 3.0  # the 5 ms subscriber: the worker ÷ the sequential floor (issue 32)
INSTANT_BAR = 0.6  # the instant loopback subscriber: the worker ÷ the bare loop


@contextlib.contextmanager
def subscriber_process(delay_ms: float = 0.0) -> Iterator[str]:
    """The subscriber in its own process, as in production (not competing for our GIL)."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, str(ROOT / "benchmarks" / "_sink.py"), str(port), str(delay_ms)],
        cwd=ROOT, stdout=subprocess.DEVNULL,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                httpx.post(url, content=b"")
                break
            except httpx.TransportError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        yield url
    finally:
        proc.terminate()
        proc.wait()


def _setup(url: str) -> Harness:
    # A warm container: the broker configuration is cached, as on Lambda.
    h = Harness(settings=replace(Settings(), cache_ttl_seconds=300.0))
    h.container.sender = Urllib3Sender(guard=False)  # type: ignore[misc]
    h.broker()
    h.trigger("bench", uri=url, filter={"type": "bench"})
    return h


def _fill(h: Harness, n: int) -> None:
    body = b"x" * 1024
    events = [
        {"specversion": "1.0", "id": str(i), "source": "/bench", "type": "bench",
         "datacontenttype": "application/octet-stream",
         "data_base64": base64.b64encode(body).decode()}
        for i in range(n)
    ]  # fmt: skip
    for start in range(0, n, 100):
        chunk = events[start : start + 100]
        r = h.post(
            {"content-type": "application/cloudevents-batch+json"},
            json.dumps(chunk).encode(),
        )
        assert r.status == 202, r.body


def _lambda_events(h: Harness, trigger: str) -> list[dict[str, object]]:
    """Every queued message, received in batches of 10 as Lambda's poller hands them over."""
    queue = h.queue_of(trigger)
    arn = f"arn:aws:sqs:{REGION}:{ACCOUNT}:{queue}"
    events = []
    while received := h.queues.receive(queue, 10, 0, None):
        records = [
            {"messageId": m.message_id, "receiptHandle": m.receipt_handle, "body": m.body,
             "attributes": dict(m.attributes), "messageAttributes": {}, "md5OfBody": "",
             "eventSource": "aws:sqs", "eventSourceARN": arn, "awsRegion": REGION}
            for m in received
        ]  # fmt: skip
        events.append({"Records": records})
    return events


Request = tuple[dict[str, str], bytes, float]


def measure_ours(url: str) -> tuple[float, Request]:
    """Events per second through the ``delivery`` handler, and one request it sent."""
    h = _setup(url)
    _fill(h, EVENTS)
    batches = _lambda_events(h, "bench")
    sent: list[Request] = []
    sender = h.container.sender

    class Recording:
        def post(self, u: str, headers: dict[str, str], body: bytes, t: float) -> HttpResponse:
            if not sent:
                sent.append((dict(headers), body, t))
            return sender.post(u, headers, body, t)

    h.container.sender = Recording()  # type: ignore[misc]
    handler = h.container.delivery.handle_sqs_event
    started = time.perf_counter()
    for batch in batches:
        answer = handler(batch, None)
        assert not answer["batchItemFailures"], answer
    elapsed = time.perf_counter() - started
    assert sum(len(b["Records"]) for b in batches) == EVENTS  # type: ignore[arg-type]
    return EVENTS / elapsed, sent[0]


def measure_floor(url: str, request: Request) -> float:
    """The same client, call and arguments as the sender, in a bare sequential loop."""
    headers, body, timeout = request
    pool = urllib3.PoolManager(retries=False)
    total = urllib3.Timeout(total=timeout)
    started = time.perf_counter()
    for _ in range(EVENTS):
        r = pool.urlopen(
            "POST", url, body=body, headers=headers, redirect=False, retries=False, timeout=total
        )
        assert r.status == 202
    elapsed = time.perf_counter() - started
    pool.clear()
    return EVENTS / elapsed


def run(delay_ms: float) -> tuple[list[float], list[float]]:
    with subscriber_process(delay_ms) as url:
        ours, floor = [], []
        for _ in range(ROUNDS):
            rate, request = measure_ours(url)
            ours.append(rate)
            floor.append(measure_floor(url, request))
    return ours, floor


def main() -> None:
    slow_ours, slow_floor = run(SERVICE_MS)
    ours, floor = run(0.0)
    # Each round times the worker and then the floor back to back: the ratio of a round is immune
    # to drift in what else the machine does; the median round is the figure.
    slow_ratio = statistics.median(o / f for o, f in zip(slow_ours, slow_floor, strict=True))
    ratio = statistics.median(o / f for o, f in zip(ours, floor, strict=True))
    slow = f"{SERVICE_MS:g} ms"
    in_flight = Settings().delivery_in_flight
    print_table(
        [
            (slow, f"delivery worker ({in_flight} in flight)", f"{max(slow_ours):,.0f}",
             f"{slow_ratio:.2f}", f">= {SLOW_BAR:g}"),
            (slow, "bare urllib3 loop (sequential floor)", f"{max(slow_floor):,.0f}", "1", ""),
            ("instant", f"delivery worker ({in_flight} in flight)", f"{max(ours):,.0f}",
             f"{ratio:.2f}", f">= {INSTANT_BAR:g}"),
            ("instant", "bare urllib3 loop (floor)", f"{max(floor):,.0f}", "1", ""),
        ],
        ("subscriber", "path", f"events/s (best of {ROUNDS})", "vs floor (median round)", "bar"),
    )  # fmt: skip
    write_result(
        "delivery",
        {
            f"ratio_vs_bare_http_{SERVICE_MS:g}ms_subscriber": slow_ratio,
            f"events_per_s_{SERVICE_MS:g}ms_subscriber": max(slow_ours),
            "events_per_s": max(ours),
            "ratio_vs_bare_http": ratio,
            "floor_events_per_s": max(floor),
            "in_flight": in_flight,
        },
        f"{EVENTS} events of 1 KiB, binary mode, to an asyncio HTTP/1.1 sink in its own process "
        f"taking {SERVICE_MS:g} ms per request (no CPU; the headline, bar >= {SLOW_BAR:g}), and "
        f"one answering 202 at once on loopback (bar >= {INSTANT_BAR:g}); {ROUNDS} rounds, each "
        "timing the worker then the floor; ratio = median of the rounds' ratios. Worker = the "
        f"delivery handler on pre-received SQS batches (in-memory queue), {in_flight} requests "
        "in flight per batch, archive and metrics on. Floor = a bare sequential loop of the "
        "sender's own client call (urllib3 PoolManager.urlopen, same arguments) posting the "
        "exact headers and body the worker sent.",
        rounds={"ours": ours, "floor": floor, "ours_slow": slow_ours, "floor_slow": slow_floor},
    )


if __name__ == "__main__":
    main()
