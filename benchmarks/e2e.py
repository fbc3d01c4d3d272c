"""End to end through local mode: events per second and latency from POST to subscriber, and
AWS API calls per accepted and per delivered event.

Speed is measured as ``make run`` runs: ``brokerctl dev`` in a process of its own (with its moto
server in another), the producers and the subscriber here. Then again with 500 idle triggers
present on the same broker (filters that match nothing), whose queues and DLQs are all polled.
AWS calls are counted with botocore's event hooks on a runtime in this process
(``brokerctl.dev.LocalRuntime``, the same wiring), attributed to the ingress when made on the HTTP
server's threads and to delivery when made on the pollers' and workers' threads.
Run: .venv/bin/python benchmarks/e2e.py  (``E2E_IDLE_TRIGGERS`` sets the 500); ``... e2e.py dedup``
measures only the cost of deduplication (docs/dedup.md) and adds its figures to the last result.
"""

from __future__ import annotations

import http.client
import json
import math
import os
import sys
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402

from benchmarks._result import print_table, write_result  # noqa: E402
from brokerctl.dev import (  # noqa: E402
    DevOptions,
    LocalRuntime,
)
from brokerctl.embedded_aws import free_port  # noqa: E402
from brokerctl.event_display import EventDisplay, Received, Reply  # noqa: E402
from brokerctl.event_sources import IDLE_AFTER_EMPTY_POLLS, LONG_POLL_SECONDS  # noqa: E402

EVENTS = 1500
PRODUCERS = 4
IDLE_TRIGGERS = int(os.environ.get("E2E_IDLE_TRIGGERS", "500"))
CP = "/apis/eventing.knative.dev/v1/namespaces/bench"


class CallCounter:
    def __init__(self) -> None:
        self.calls: Counter[tuple[str, str, str]] = Counter()
        self._lock = threading.Lock()

    def hook(self, event_name: str, **kwargs: Any) -> None:
        # event_name: before-call.<service>.<Operation>
        _, service, operation = event_name.split(".", 2)
        name = threading.current_thread().name
        if name.startswith("waitress-"):  # the local HTTP server's handlers
            role = "ingress"
        elif name == "archive":  # the archive's flusher (records gathered across requests)
            role = "archive"
        else:
            role = "delivery"
        with self._lock:
            self.calls[(role, service, operation)] += 1

    def reset(self) -> None:
        with self._lock:
            self.calls.clear()

    def total(self, role: str, service: str | None = None, operation: str | None = None) -> int:
        return sum(
            n
            for (r, s, o), n in self.calls.items()
            if r == role
            and (service is None or s == service)
            and (operation is None or o == operation)
        )


def main() -> None:
    for key in ("AWS_ENDPOINT_URL",):
        os.environ.pop(key, None)
    if sys.argv[1:] == ["dedup"]:
        dedup, dedup_notes = measure_dedup_calls()
        previous = json.loads((ROOT / "benchmarks/results/e2e.json").read_text())
        notes = previous["notes"].split(" | dedup: ")[0] + " | dedup: " + dedup_notes
        extra = {k: v for k, v in previous.items() if k not in ("figures", "notes", "benchmark")}
        extra.pop("machine", None)
        write_result("e2e", {**previous["figures"], **dedup}, notes, **extra)
        return
    speed = measure_make_run()
    figures, notes, calls = measure_calls()
    dedup, dedup_notes = measure_dedup_calls()
    write_result(
        "e2e", {**speed, **figures, **dedup}, f"{notes} | dedup: {dedup_notes}", calls=calls
    )


def measure_make_run() -> dict[str, float]:
    """``brokerctl dev`` as its own process: one trigger, then 500 idle triggers besides it."""
    import subprocess

    port, aws_port = free_port(), free_port()
    env = {**os.environ, "BROKER_PORT": str(port), "BROKER_AWS_PORT": str(aws_port)}
    env.pop("AWS_ENDPOINT_URL", None)
    proc = subprocess.Popen(
        [sys.executable, "-m", "brokerctl", "dev"], cwd=ROOT, env=env,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: _healthy(url), 60)
        received_at: dict[str, float] = {}
        lock = threading.Lock()

        def record(got: Received, n: int) -> Reply:
            with lock:
                received_at.setdefault(got.headers["ce-id"], time.perf_counter())
            return Reply(202)

        with EventDisplay(responder=record, keep=False) as sub:
            setup(url, sub.url, triggers=1)
            rate, p50, p99 = stream(url, received_at, "m")
            print(f"make run, 1 trigger: {rate:,.0f} events/s, p50 {p50:.1f} ms, p99 {p99:.1f} ms")
            began = time.perf_counter()
            add_idle_triggers(url, sub.url, IDLE_TRIGGERS)
            made = time.perf_counter() - began
            print(f"{IDLE_TRIGGERS} idle triggers Ready in {made:.0f} s")
            # Steady state: every new mapping's poller started, found its queue empty twice, and
            # went idle (brokerctl/event_sources.py), as in a broker whose triggers are quiet.
            time.sleep((IDLE_AFTER_EMPTY_POLLS + 1) * LONG_POLL_SECONDS)
            rate_n, p50_n, p99_n = stream(url, received_at, "n")
            print(
                f"make run, {IDLE_TRIGGERS} idle triggers: {rate_n:,.0f} events/s, "
                f"p50 {p50_n:.1f} ms, p99 {p99_n:.1f} ms"
            )
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    return {
        "events_per_s": rate, "p50_ms": p50, "p99_ms": p99,
        f"events_per_s_{IDLE_TRIGGERS}_triggers": rate_n,
        f"p50_ms_{IDLE_TRIGGERS}_triggers": p50_n,
        f"p99_ms_{IDLE_TRIGGERS}_triggers": p99_n,
        "seconds_to_create_idle_triggers": made,
    }  # fmt: skip


def _healthy(url: str) -> bool:
    try:
        return httpx.get(f"{url}/healthz", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def stream(
    url: str, received_at: dict[str, float], prefix: str, warmed: Any = None
) -> tuple[float, float, float]:
    """EVENTS single-event POSTs from PRODUCERS producers, after a warm-up event (then
    ``warmed()``): (events/s, p50 ms, p99 ms), from the first POST to the last arrival."""
    path = urlsplit(url)
    ingress = "/bench/default"
    headers = {"ce-specversion": "1.0", "ce-source": "/bench", "ce-type": "bench",
               "content-type": "application/json"}  # fmt: skip
    body = json.dumps({"payload": "x" * 900}).encode()
    warm = f"{prefix}-warm"
    r = httpx.post(url + ingress, content=body, headers={**headers, "ce-id": warm}, timeout=30)
    assert r.status_code == 202, r.text
    wait_for(lambda: warm in received_at, 60)
    if warmed is not None:
        warmed()
    sent_at: dict[str, float] = {}

    def produce(ids: list[str]) -> None:
        # A plain keep-alive connection per producer: the load generator shares the 2 cores with
        # the broker, and http.client costs a fraction of httpx's CPU per request.
        conn = http.client.HTTPConnection(path.hostname, path.port, timeout=30)
        try:
            for event_id in ids:
                sent_at[event_id] = time.perf_counter()
                conn.request("POST", ingress, body=body, headers={**headers, "ce-id": event_id})
                answer = conn.getresponse()
                text = answer.read()
                assert answer.status == 202, text
        finally:
            conn.close()

    ids = [f"{prefix}{i}" for i in range(EVENTS)]
    started = time.perf_counter()
    with ThreadPoolExecutor(PRODUCERS) as pool:
        list(pool.map(produce, [ids[i::PRODUCERS] for i in range(PRODUCERS)]))
    wait_for(lambda: all(i in received_at for i in ids), 180)
    elapsed = max(received_at[i] for i in ids) - started
    latencies = sorted((received_at[i] - sent_at[i]) * 1000 for i in ids)
    return EVENTS / elapsed, percentile(latencies, 50), percentile(latencies, 99)


def add_idle_triggers(url: str, sub_url: str, count: int) -> None:
    """``count`` triggers on the same broker whose filters match nothing the stream sends."""
    with httpx.Client(base_url=url, timeout=60) as c:
        for i in range(count):
            body = {
                "metadata": {"name": f"idle{i}"},
                "spec": {"broker": "default", "filter": {"attributes": {"type": f"idle.{i}"}},
                         "subscriber": {"uri": f"{sub_url}/idle{i}"}},
            }  # fmt: skip
            assert c.put(f"{CP}/triggers/idle{i}", json=body).status_code in (200, 201)
            if i and i % 100 == 0:
                print(f"  {i} idle triggers created")
        deadline = time.monotonic() + 600
        for i in range(count):
            while True:
                doc = c.get(f"{CP}/triggers/idle{i}").json()
                conds = {x["type"]: x["status"] for x in doc["status"]["conditions"]}
                if conds.get("Ready") == "True":
                    break
                if time.monotonic() > deadline:
                    raise RuntimeError(f"trigger idle{i} not Ready: {doc['status']}")
                time.sleep(0.2)


def measure_calls() -> tuple[dict[str, float], str, dict[str, int]]:
    """The same stream through a runtime in this process, its boto3 clients instrumented."""
    opts = DevOptions(port=free_port(), aws_port=free_port(), reconcile_interval=3600)
    runtime = LocalRuntime(opts, say=lambda line: None)
    assert runtime.start() == 0, "the local runtime did not start"
    counter = CallCounter()
    for service in ("dynamodb", "sqs", "s3", "firehose", "lambda"):
        runtime.container.clients.client(service).meta.events.register(
            f"before-call.{service}", counter.hook
        )
    runtime.sources.sqs_client.meta.events.register("before-call.sqs", counter.hook)
    received_at: dict[str, float] = {}
    lock = threading.Lock()

    def record(got: Received, n: int) -> Reply:
        with lock:
            received_at.setdefault(got.headers["ce-id"], time.perf_counter())
        return Reply(202)

    try:
        with EventDisplay(responder=record, keep=False) as sub:
            figures, notes = run(runtime.url, sub, counter, received_at)
    finally:
        runtime.stop()
    return figures, notes, {f"{r}/{s}/{o}": n for (r, s, o), n in counter.calls.items()}


def setup(url: str, sub_url: str, triggers: int) -> None:
    with httpx.Client(base_url=url, timeout=30) as c:
        r = c.put(f"{CP}/brokers/default", json={"metadata": {"name": "default"}})
        assert r.status_code in (200, 201), f"PUT broker: {r.status_code} {r.text}"
        for i in range(triggers):
            body = {
                "metadata": {"name": f"t{i}"},
                "spec": {"broker": "default", "filter": {"attributes": {"type": "bench"}},
                         "subscriber": {"uri": f"{sub_url}/t{i}"}},
            }  # fmt: skip
            r = c.put(f"{CP}/triggers/t{i}", json=body)
            assert r.status_code in (200, 201), f"PUT trigger: {r.status_code} {r.text}"
        deadline = time.monotonic() + 60
        for i in range(triggers):
            while True:
                doc = c.get(f"{CP}/triggers/t{i}").json()
                ready = {x["type"]: x["status"] for x in doc["status"]["conditions"]}["Ready"]
                if ready == "True":
                    break
                if time.monotonic() > deadline:
                    raise RuntimeError(f"trigger t{i} not Ready: {doc['status']}")
                time.sleep(0.2)


def run(
    url: str, sub: EventDisplay, counter: CallCounter, received_at: dict[str, float]
) -> tuple[dict[str, float], str]:
    setup(url, sub.url, triggers=1)
    ingress = f"{url}/bench/default"
    rate, p50, p99 = stream(url, received_at, "e", warmed=counter.reset)
    ddb_ingress = counter.total("ingress", "dynamodb")
    ingress_calls = counter.total("ingress")
    delivery_calls = counter.total("delivery")
    archive_calls = counter.total("archive")

    # A batch of 10 events, two matching triggers: SendMessageBatch calls per trigger.
    setup(url, sub.url, triggers=2)
    counter.reset()
    batch = [{"specversion": "1.0", "id": f"b{i}", "source": "/bench", "type": "bench",
              "data": {"i": i}} for i in range(10)]  # fmt: skip
    r = httpx.post(ingress, content=json.dumps(batch),
                   headers={"content-type": "application/cloudevents-batch+json"})  # fmt: skip
    assert r.status_code == 202, r.text
    sends = counter.total("ingress", "sqs", "SendMessageBatch")

    figures = {
        "in_process_events_per_s": rate,
        "in_process_p50_ms": p50,
        "in_process_p99_ms": p99,
        "dynamodb_calls_per_warm_event": ddb_ingress / EVENTS,
        "sqs_send_calls_per_trigger_batch10": sends / 2,
    }
    print_table(
        [
            ("events", str(EVENTS)),
            ("events/s (in process)", f"{figures['in_process_events_per_s']:,.0f}"),
            ("latency p50 / p99 ms (in process)",
             f"{figures['in_process_p50_ms']:.1f} / {figures['in_process_p99_ms']:.1f}"),
            ("ingress AWS calls per accepted event", f"{ingress_calls / EVENTS:.2f}"),
            ("delivery AWS calls per delivered event", f"{delivery_calls / EVENTS:.2f}"),
            ("archive AWS calls per event (batched)", f"{archive_calls / EVENTS:.3f}"),
            ("DynamoDB calls per warm ingress event", f"{ddb_ingress / EVENTS:.3f}"),
            ("SendMessageBatch per trigger, batch of 10", f"{sends / 2:g}"),
        ],
        ("measure", "value"),
    )  # fmt: skip
    notes = (
        f"{EVENTS} single-event POSTs of JSON events (~1 KiB) from {PRODUCERS} concurrent "
        "producers to one subscriber, both in the benchmark's process; events_per_s and p50/p99: "
        "through `brokerctl dev` as make run starts it (its own process, moto in another), then "
        f"with {IDLE_TRIGGERS} idle triggers on the same broker; in_process_*: the runtime in the "
        "benchmark's process (producers, subscriber and broker share one interpreter), where AWS "
        "calls are counted; latency = POST sent to subscriber received; 2 cores shared by "
        f"everything; ingress AWS calls/event {ingress_calls / EVENTS:.2f} "
        f"(SQS sends), delivery AWS calls/event {delivery_calls / EVENTS:.2f}, archive (Firehose, "
        f"gathered across requests for 1 s) {archive_calls / EVENTS:.3f}"
    )
    return figures, notes


DEDUP_BATCHES = 50
_DEDUP_WRITES = ("PutItem", "TransactWriteItems", "BatchWriteItem")


def measure_dedup_calls() -> tuple[dict[str, float], str]:
    """AWS calls per accepted event at ingress, for one broker without a dedup window and one
    with (``serverless-broker/dedup-window: PT5M``), each with one trigger: batches of 10 fresh
    events, batches of 10 with 5 repeats, and single-event POSTs. Counted, not timed."""
    # A second runtime in this process (after measure_calls): the first one left its embedded
    # endpoint in AWS_ENDPOINT_URL (which would read as an external one) and in the cached
    # container's clients; that endpoint is gone.
    from chalicelib import container

    os.environ.pop("AWS_ENDPOINT_URL", None)
    container._from_env.cache_clear()
    opts = DevOptions(port=free_port(), aws_port=free_port(), reconcile_interval=3600)
    runtime = LocalRuntime(opts, say=lambda line: None)
    assert runtime.start() == 0, "the local runtime did not start"
    counter = CallCounter()
    for service in ("dynamodb", "sqs", "s3", "firehose"):
        runtime.container.clients.client(service).meta.events.register(
            f"before-call.{service}", counter.hook
        )
    url = runtime.url
    try:
        with EventDisplay(keep=False) as sub, httpx.Client(base_url=url, timeout=30) as c:
            for broker, annotations in (
                ("plain", {}),
                ("dedup", {"serverless-broker/dedup-window": "PT5M"}),
            ):
                meta = {"name": broker, "annotations": annotations}
                assert c.put(f"{CP}/brokers/{broker}", json={"metadata": meta}).status_code == 201
                trigger = {
                    "metadata": {"name": f"{broker}-t"},
                    "spec": {"broker": broker, "subscriber": {"uri": sub.url}},
                }
                assert c.put(f"{CP}/triggers/{broker}-t", json=trigger).status_code == 201
            for broker in ("plain", "dedup"):
                wait_for(lambda b=broker: _ready(c, f"{b}-t"), 60)  # type: ignore[misc]
            runs: dict[tuple[str, str], tuple[int, int, int]] = {}
            for broker in ("plain", "dedup"):
                _post_batches(c, broker, "warm", 1, repeats=0)  # the routes cached
                for shape in ("batch10", "batch10_half_repeats", "single"):
                    counter.reset()
                    if shape == "single":
                        accepted = _post_singles(c, broker, DEDUP_BATCHES * 2)
                    else:
                        repeats = 5 if shape == "batch10_half_repeats" else 0
                        accepted = _post_batches(c, broker, shape, DEDUP_BATCHES, repeats)
                    writes = sum(counter.total("ingress", "dynamodb", op) for op in _DEDUP_WRITES)
                    runs[(broker, shape)] = (counter.total("ingress"), writes, accepted)
    finally:
        runtime.stop()
    figures: dict[str, float] = {}
    rows = []
    for shape in ("batch10", "batch10_half_repeats", "single"):
        plain_calls, _, plain_n = runs[("plain", shape)]
        dedup_calls, writes, dedup_n = runs[("dedup", shape)]
        suffix = "" if shape == "batch10" else f"_{shape}"
        figures[f"dedup_calls_per_event{suffix}"] = writes / dedup_n
        figures[f"ingress_calls_per_event_{shape}_no_dedup"] = plain_calls / plain_n
        figures[f"ingress_calls_per_event_{shape}_dedup"] = dedup_calls / dedup_n
        rows.append((shape, f"{plain_calls / plain_n:.3f}", f"{dedup_calls / dedup_n:.3f}",
                     f"{writes / dedup_n:.3f}"))  # fmt: skip
    print_table(rows, ("requests", "ingress calls/event", "with dedup", "dedup calls/event"))
    notes = (
        f"dedup_calls_per_event: DynamoDB writes (conditional PutItem / TransactWriteItems) per "
        f"accepted event at ingress with a PT5M window, {DEDUP_BATCHES} batches of 10 fresh events "
        "(target <= 0.2: a claim and a confirm per batch); *_half_repeats: batches whose 5 last "
        "events repeat 5 of the previous batch (accepted = events answered 202); single: one "
        "event per POST; "
        "ingress_calls_per_event_*: every AWS call the ingress made, without and with a window"
    )
    return figures, notes


def _ready(c: httpx.Client, trigger: str) -> bool:
    doc = c.get(f"{CP}/triggers/{trigger}").json()
    conds = {x["type"]: x["status"] for x in doc["status"]["conditions"]}
    return conds.get("Ready") == "True"


def _post_batches(c: httpx.Client, broker: str, prefix: str, batches: int, repeats: int) -> int:
    """``batches`` batches of 10; the last ``repeats`` events of each repeat events of the batch
    before. Returns the events answered 202."""
    for b in range(batches):
        ids = [f"{prefix}-{b}-{i}" for i in range(10 - repeats)]
        ids += [f"{prefix}-{max(b - 1, 0)}-{i}" for i in range(repeats)]
        batch = [{"specversion": "1.0", "id": i, "source": "/bench", "type": "bench",
                  "data": {"n": b}} for i in ids]  # fmt: skip
        r = c.post(f"/bench/{broker}", content=json.dumps(batch),
                   headers={"content-type": "application/cloudevents-batch+json"})  # fmt: skip
        assert r.status_code == 202, r.text
    return batches * 10


def _post_singles(c: httpx.Client, broker: str, count: int) -> int:
    headers = {"ce-specversion": "1.0", "ce-source": "/bench", "ce-type": "bench",
               "content-type": "application/json"}  # fmt: skip
    for i in range(count):
        r = c.post(f"/bench/{broker}", content=b"{}", headers={**headers, "ce-id": f"s{i}"})
        assert r.status_code == 202, r.text
    return count


def percentile(sorted_values: list[float], p: float) -> float:
    k = max(0, math.ceil(p / 100 * len(sorted_values)) - 1)
    return sorted_values[k]


def wait_for(check: Any, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise RuntimeError("timed out")
        time.sleep(0.05)


if __name__ == "__main__":
    main()
