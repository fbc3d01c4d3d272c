"""Delivery throughput: events per second one delivery worker (the ``delivery`` function handling
SQS batches of 10) pushes to a local HTTP subscriber, side by side with the floor: a bare loop of
the same HTTP client (urllib3, the same call and arguments the worker's sender makes) POSTing the
very requests the worker sent, headers and body byte for byte, to the same subscriber.

The queue side is the in-memory fake, and the batches are received before the clock starts, as
Lambda's poller receives them outside the function: this measures the worker, not SQS. The HTTP
side is real. For reference the same loop on httpx (the client the sender used before) is timed.
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


def measure_httpx(url: str, request: Request) -> float:
    headers, body, _ = request
    with httpx.Client() as client:
        started = time.perf_counter()
        for _ in range(EVENTS):
            assert client.post(url, headers=headers, content=body).status_code == 202
        return EVENTS / (time.perf_counter() - started)


def run(delay_ms: float) -> tuple[list[float], list[float], list[float]]:
    with subscriber_process(delay_ms) as url:
        ours, floor, reference = [], [], []
        for _ in range(ROUNDS):
            rate, request = measure_ours(url)
            ours.append(rate)
            floor.append(measure_floor(url, request))
            reference.append(measure_httpx(url, request))
    return ours, floor, reference


def main() -> None:
    ours, floor, reference = run(0.0)
    slow_ours, slow_floor, _ = run(SERVICE_MS)
    # Each round times the worker and then the floor back to back: the ratio of a round is immune
    # to drift in what else the machine does; the median round is the figure.
    ratio = statistics.median(o / f for o, f in zip(ours, floor, strict=True))
    slow_ratio = statistics.median(o / f for o, f in zip(slow_ours, slow_floor, strict=True))
    slow = f"{SERVICE_MS:g} ms"
    print_table(
        [
            ("instant", "delivery worker (batch of 10)", f"{max(ours):,.0f}", f"{ratio:.2f}"),
            ("instant", "bare urllib3 loop (floor)", f"{max(floor):,.0f}", "1"),
            ("instant", "bare httpx loop (reference)", f"{max(reference):,.0f}", ""),
            (slow, "delivery worker", f"{max(slow_ours):,.0f}", f"{slow_ratio:.2f}"),
            (slow, "bare urllib3 loop (floor)", f"{max(slow_floor):,.0f}", "1"),
        ],
        ("subscriber", "path", f"events/s (best of {ROUNDS})", "vs floor (median round)"),
    )
    write_result(
        "delivery",
        {
            "events_per_s": max(ours),
            "ratio_vs_bare_http": ratio,
            f"ratio_vs_bare_http_{SERVICE_MS:g}ms_subscriber": slow_ratio,
            "floor_events_per_s": max(floor),
            "httpx_loop_events_per_s": max(reference),
        },
        f"{EVENTS} events of 1 KiB, binary mode, to a local asyncio HTTP/1.1 sink in its own "
        f"process answering 202 at once, and one taking {SERVICE_MS:g} ms per request (no CPU); "
        f"{ROUNDS} rounds, each timing the worker then the floor; ratio = median of the rounds' "
        "ratios. Worker = the delivery handler on pre-received SQS batches (in-memory queue), "
        "archive and metrics on. Floor = a bare sequential loop of the sender's own client call "
        "(urllib3 PoolManager.urlopen, same arguments) posting the exact headers and body the "
        "worker sent. Reference = the same requests through a bare httpx loop.",
        rounds={
            "ours": ours,
            "floor": floor,
            "httpx": reference,
            "ours_slow": slow_ours,
            "floor_slow": slow_floor,
        },
    )


if __name__ == "__main__":
    main()
