"""Delivery throughput: events per second one delivery worker (the ``delivery`` function handling
SQS batches of 10) pushes to a local HTTP subscriber, side by side with the floor: a bare httpx
loop POSTing the same requests to the same subscriber.

The queue side is the in-memory fake (this measures the worker, not SQS); the HTTP side is real.
Run: .venv/bin/python benchmarks/delivery.py
"""

from __future__ import annotations

import base64
import contextlib
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from dataclasses import replace  # noqa: E402

import httpx  # noqa: E402

from benchmarks._result import print_table, write_result  # noqa: E402
from brokerctl.embedded_aws import free_port  # noqa: E402
from chalicelib.adapters.http_sender import HttpxSender  # noqa: E402
from chalicelib.config import Settings  # noqa: E402
from chalicelib.core import codec  # noqa: E402
from chalicelib.core.message import decode_message  # noqa: E402
from tests.functional.harness import Harness  # noqa: E402

EVENTS = 2000
ROUNDS = 3
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
    h.container.sender = HttpxSender(guard=False)  # type: ignore[misc]
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


def measure_ours(url: str) -> float:
    h = _setup(url)
    _fill(h, EVENTS)
    started = time.perf_counter()
    delivered = 0
    while delivered < EVENTS:
        answer = h.deliver_once("bench")
        assert not answer["batchItemFailures"], answer
        delivered += answer["received"]
    return EVENTS / (time.perf_counter() - started)


def measure_floor(url: str) -> float:
    h = _setup(url)
    _fill(h, 1)
    queued = decode_message(h.queues.receive(h.queue_of("bench"), 1, 0, None)[0].body)
    event = h.container.claims.load(queued)
    headers, body = codec.encode_binary(event)
    with httpx.Client() as client:
        started = time.perf_counter()
        for _ in range(EVENTS):
            r = client.post(url, headers=headers, content=body)
            assert r.status_code == 202
        return EVENTS / (time.perf_counter() - started)


def run(delay_ms: float) -> tuple[list[float], list[float]]:
    with subscriber_process(delay_ms) as url:
        ours, floor = [], []
        for _ in range(ROUNDS):
            ours.append(measure_ours(url))
            floor.append(measure_floor(url))
    return ours, floor


def main() -> None:
    ours, floor = run(0.0)
    slow_ours, slow_floor = run(SERVICE_MS)
    best_ours, best_floor = max(ours), max(floor)
    slow_ratio = max(slow_ours) / max(slow_floor)
    print_table(
        [
            ("instant sink", "delivery worker (batch of 10, pool)", f"{best_ours:,.0f}"),
            ("instant sink", "bare httpx loop (floor)", f"{best_floor:,.0f}"),
            (f"{SERVICE_MS:g} ms sink", "delivery worker", f"{max(slow_ours):,.0f}"),
            (f"{SERVICE_MS:g} ms sink", "bare httpx loop (floor)", f"{max(slow_floor):,.0f}"),
        ],
        ("subscriber", "path", f"events/s (best of {ROUNDS})"),
    )
    write_result(
        "delivery",
        {
            "events_per_s": best_ours,
            "ratio_vs_bare_http": best_ours / best_floor,
            f"ratio_vs_bare_http_{SERVICE_MS:g}ms_subscriber": slow_ratio,
        },
        f"{EVENTS} events of 1 KiB, binary mode, to a local asyncio HTTP/1.1 sink in its own "
        f"process answering 202 at once, and one taking {SERVICE_MS:g} ms per request (no CPU); "
        f"best of {ROUNDS} rounds; queue = in-memory fake; floor = one httpx client posting the "
        "same request sequentially. With an instant sink both sides are CPU-bound on 2 cores and "
        "the worker's 10 concurrent requests cost GIL switching; with a subscriber that takes "
        "time, that concurrency is the point.",
        rounds={"ours": ours, "floor": floor, "ours_slow": slow_ours, "floor_slow": slow_floor},
    )


if __name__ == "__main__":
    main()
