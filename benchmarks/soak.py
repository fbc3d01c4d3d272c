"""Soak: a steady rate of single-event POSTs through local mode (``python -m brokerctl dev`` as
a subprocess: moto server, real HTTP) for a while, to a subscriber that fails 10 % of the time
(503); every accepted event must reach it (lost = 0), duplicates are counted, latency is from the
POST to the subscriber's first 2xx answer for that event. Loopback only.

Run: .venv/bin/python benchmarks/soak.py [--rate 20] [--seconds 60]
"""

from __future__ import annotations

import argparse
import math
import random
import sys
import threading
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402

from benchmarks._result import print_table, write_result  # noqa: E402
from brokerctl.event_display import EventDisplay, Received, Reply  # noqa: E402
from tests.e2e.conftest import start_local_broker, stop_local_broker, wait_until  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rate", type=float, default=20.0, help="events per second (20)")
    parser.add_argument("--seconds", type=float, default=60.0, help="how long to send (60)")
    parser.add_argument("--failure-rate", type=float, default=0.10, help="subscriber 503s (0.1)")
    args = parser.parse_args()

    rng = random.Random(1)
    lock = threading.Lock()
    delivered: Counter[str] = Counter()
    first_ok: dict[str, float] = {}

    def respond(got: Received, n: int) -> Reply:
        with lock:
            fail = rng.random() < args.failure_rate
            if not fail:
                event_id = got.headers["ce-id"]
                delivered[event_id] += 1
                first_ok.setdefault(event_id, time.perf_counter())
        return Reply(503) if fail else Reply(200)

    broker = start_local_broker()
    sent_at: dict[str, float] = {}
    accepted: set[str] = set()
    try:
        with EventDisplay(responder=respond, keep=False) as sub:
            ns = "soak"
            assert broker.put(
                ns, "brokers", "default", {"metadata": {"name": "default"}}
            ).is_success
            trigger = {"metadata": {"name": "t"}, "spec": {
                "broker": "default", "subscriber": {"uri": sub.url},
                "delivery": {"retry": 10, "backoffPolicy": "linear",
                             "backoffDelay": "PT0.2S"}}}  # fmt: skip
            assert broker.put(ns, "triggers", "t", trigger).is_success
            broker.wait_ready(ns, "triggers", "t")
            ingress = f"{broker.url}/{ns}/default"
            headers = {"ce-specversion": "1.0", "ce-source": "/soak", "ce-type": "soak",
                       "content-type": "application/json"}  # fmt: skip
            total = int(args.rate * args.seconds)
            started = time.perf_counter()
            with httpx.Client(timeout=30) as client:
                for i in range(total):
                    due = started + i / args.rate
                    pause = due - time.perf_counter()
                    if pause > 0:
                        time.sleep(pause)  # pacing the producer, not waiting for an outcome
                    event_id = f"s{i}"
                    sent_at[event_id] = time.perf_counter()
                    r = client.post(
                        ingress, content=b'{"n": 1}', headers={**headers, "ce-id": event_id}
                    )
                    if r.status_code == 202:
                        accepted.add(event_id)
            sending = time.perf_counter() - started
            wait_until(
                lambda: accepted <= set(first_ok), 300, "every accepted event delivered", 0.5
            )
            elapsed = max(first_ok.values()) - started
    finally:
        stop_local_broker(broker)
    latencies = sorted((first_ok[i] - sent_at[i]) * 1000 for i in accepted)
    lost = len(accepted - set(first_ok))
    duplicates = sum(n - 1 for n in delivered.values())
    figures = {
        "events_per_s": len(accepted) / elapsed,
        "p50_ms": _percentile(latencies, 50),
        "p99_ms": _percentile(latencies, 99),
        "duplicates": duplicates,
        "lost": lost,
    }
    print_table(
        [
            ("sent / accepted", f"{total} / {len(accepted)}"),
            ("offered rate, ev/s", f"{args.rate:g} for {sending:.0f} s"),
            ("delivered, ev/s", f"{figures['events_per_s']:.1f}"),
            ("latency p50 / p99 ms", f"{figures['p50_ms']:.0f} / {figures['p99_ms']:.0f}"),
            ("duplicates / lost", f"{duplicates} / {lost}"),
        ],
        ("measure", "value"),
    )
    write_result(
        "soak",
        figures,
        f"{total} single JSON events at {args.rate:g}/s for {args.seconds:g} s through local mode "
        f"(brokerctl dev subprocess, moto server) to a subscriber answering 503 to "
        f"{args.failure_rate:.0%} of requests (retry 10, linear PT0.2S); latency = POST to the "
        "first 2xx; 2 cores shared by producer, runtime and subscriber",
    )
    if lost:
        raise SystemExit(f"{lost} accepted events were lost")


def _percentile(sorted_values: list[float], p: float) -> float:
    k = max(0, math.ceil(p / 100 * len(sorted_values)) - 1)
    return sorted_values[k] if sorted_values else float("nan")


if __name__ == "__main__":
    main()
