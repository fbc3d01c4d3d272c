"""max-rate on local mode (docs/flow-control.md): a trigger limited to RATE events per second, a
backlog far larger than it, and the rate measured at a real HTTP subscriber over 30 s.

``brokerctl dev`` runs as ``make run`` runs it (its own process, its moto server in another); its
pollers keep up to four batches of the queue in flight at once, each an invocation of the
delivery function taking tokens of the one bucket in DynamoDB. The backlog is sent first, in
batched POSTs; the first WARMUP seconds after the first delivery are left out (the bucket starts
full: one second's worth goes at once), then every arrival within the next SECONDS seconds is
counted. ``rate_error_pct`` is (measured - set) / set, in percent; the issue asks for +-15 %.
The busiest single second and the delayed_delivery_count metric are reported besides.
Run: .venv/bin/python benchmarks/rate_limit.py  (RATE_LIMIT_RATE, RATE_LIMIT_SECONDS)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from bisect import bisect_left
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402

from benchmarks._result import write_result  # noqa: E402
from brokerctl.embedded_aws import free_port  # noqa: E402
from brokerctl.event_display import EventDisplay, Received, Reply  # noqa: E402

RATE = float(os.environ.get("RATE_LIMIT_RATE", "20"))
SECONDS = float(os.environ.get("RATE_LIMIT_SECONDS", "30"))
WARMUP = 3.0
NS = "ratebench"
CP = f"/apis/eventing.knative.dev/v1/namespaces/{NS}"


def wait_for(check: object, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():  # type: ignore[operator]
            return
        time.sleep(0.1)
    raise TimeoutError(f"timed out after {timeout}s waiting for {what}")


def _healthy(url: str) -> bool:
    try:
        return httpx.get(f"{url}/healthz", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def _ready(c: httpx.Client, path: str) -> bool:
    doc = c.get(path).json()
    conditions = {x["type"]: x["status"] for x in doc.get("status", {}).get("conditions", [])}
    return conditions.get("Ready") == "True"


def delayed_count(c: httpx.Client) -> float:
    prefix = "broker_delayed_delivery_count_total{"
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in c.get("/metrics").text.splitlines()
        if line.startswith(prefix) and f'namespace="{NS}"' in line
    )


def send_backlog(c: httpx.Client, count: int) -> None:
    for first in range(0, count, 100):
        batch = [
            {"specversion": "1.0", "id": f"e{i}", "source": "/bench", "type": "bench", "data": i}
            for i in range(first, min(count, first + 100))
        ]
        r = c.post(
            f"/{NS}/default",
            content=json.dumps(batch),
            headers={"content-type": "application/cloudevents-batch+json"},
        )
        assert r.status_code == 202, r.text


def measure(url: str, rate: float, seconds: float, warmup: float = WARMUP) -> dict[str, float]:
    """Deliveries per second over ``seconds`` at a subscriber of a trigger limited to ``rate``."""
    arrivals: list[float] = []
    lock = threading.Lock()

    def record(got: Received, n: int) -> Reply:
        with lock:
            arrivals.append(time.monotonic())
        return Reply(202)

    backlog = int(rate * (warmup + seconds + 10)) + 50  # never runs dry within the window
    with (
        EventDisplay(responder=record, keep=False) as sub,
        httpx.Client(base_url=url, timeout=30) as c,
    ):
        assert c.put(f"{CP}/brokers/default", json={"metadata": {"name": "default"}}).is_success
        trigger = {
            "metadata": {"name": "t", "annotations": {"serverless-broker/max-rate": f"{rate:g}"}},
            "spec": {"broker": "default", "subscriber": {"uri": sub.url}},
        }
        assert c.put(f"{CP}/triggers/t", json=trigger).is_success
        wait_for(lambda: _ready(c, f"{CP}/triggers/t"), 60, "trigger Ready")
        sent = time.monotonic()
        send_backlog(c, backlog)
        enqueue_s = time.monotonic() - sent
        wait_for(lambda: bool(arrivals), 60, "the first delivery")
        start = arrivals[0] + warmup
        end = start + seconds
        time.sleep(max(0.0, end - time.monotonic()) + 0.5)
        with lock:
            seen = sorted(arrivals)
        delayed = delayed_count(c)
    window = seen[bisect_left(seen, start) : bisect_left(seen, end)]
    measured = len(window) / seconds
    busiest = max((bisect_left(window, t + 1.0) - i for i, t in enumerate(window)), default=0)
    return {
        "set_rate_per_s": rate,
        "measured_rate_per_s": measured,
        "rate_error_pct": (measured - rate) / rate * 100,
        "busiest_second_events": float(busiest),
        "window_s": seconds,
        "backlog_events": float(backlog),
        "enqueue_s": enqueue_s,
        "delayed_delivery_count": delayed,
    }


def main() -> None:
    port, aws_port = free_port(), free_port()
    env = {**os.environ, "BROKER_PORT": str(port), "BROKER_AWS_PORT": str(aws_port)}
    env.pop("AWS_ENDPOINT_URL", None)
    proc = subprocess.Popen(
        [sys.executable, "-m", "brokerctl", "dev"], cwd=ROOT, env=env,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: _healthy(url), 60, "brokerctl dev")
        figures = measure(url, RATE, SECONDS)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    write_result(
        "rate_limit",
        figures,
        f"max-rate {RATE:g}/s on local mode (brokerctl dev, 4 batches in flight sharing one "
        f"DynamoDB bucket): deliveries at a real HTTP subscriber over {SECONDS:g} s after a "
        f"{WARMUP:g} s warm-up; the issue's bound is +-15 %",
    )
    if abs(figures["rate_error_pct"]) > 15:
        raise SystemExit(f"rate_error_pct {figures['rate_error_pct']:.1f} is outside +-15 %")


if __name__ == "__main__":
    main()
