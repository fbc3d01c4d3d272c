"""Replay on local mode: AWS calls per replayed event, and events per second, by default (one
event a message, ten to a SendMessageBatch call) and with ``spec.packing`` (many events a message).

The replay runs against the local runtime's embedded AWS endpoint (moto in its own process, as
``brokerctl dev`` starts it) with the broker's own wiring (Container, bootstrap). The archive is
written as Firehose writes it: hour-keyed JSON-lines objects of ``accepted`` records of 1 KiB
events. Each replay is one bounded run: list and read the archive objects (S3), load the broker's
triggers and take the lease (DynamoDB), send (SQS), checkpoint every 1,000 events (DynamoDB).

The figure that holds on AWS is the calls: every API call the replaying process makes (botocore's
``before-call`` event on each client it uses) divided by the events enqueued. The bounds (docs/
replay.md): at most 0.11 by default, at most 0.01 with packs; the run fails past them. Events per
second on the emulator are floors, not targets; the archive read alone is timed beside them for
information (``replay_ratio_vs_read``).
Run: .venv/bin/python benchmarks/replay.py (REPLAY_EVENTS=20000 for a longer replay)
"""

from __future__ import annotations

import os
import statistics
import sys
import time
import uuid
from collections import Counter
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks._result import print_table, write_result  # noqa: E402
from brokerctl.embedded_aws import EmbeddedAws, free_port  # noqa: E402
from chalicelib.config import Settings  # noqa: E402
from chalicelib.container import Container  # noqa: E402
from chalicelib.core import archive, archive_reader  # noqa: E402
from chalicelib.core.clock import rfc3339  # noqa: E402
from chalicelib.services.replay_runner import BATCH_EVENTS, SEND_CONCURRENCY  # noqa: E402

EVENTS = int(os.environ.get("REPLAY_EVENTS", "5000"))
PER_OBJECT = 500  # records per archive object (Firehose: whatever its buffer held)
ROUNDS = int(os.environ.get("REPLAY_ROUNDS", "5"))
BOUNDS = {"default": 0.11, "packed": 0.01}  # AWS calls per replayed event, at most


class _Calls:
    """Every API call made by the container's clients, by service and operation."""

    def __init__(self, c: Container) -> None:
        self.counts: Counter[str] = Counter()
        for service in ("s3", "sqs", "dynamodb"):
            c.clients.client(service).meta.events.register(f"before-call.{service}", self._seen)

    def _seen(self, model: Any, **_: Any) -> None:
        self.counts[f"{model.service_model.service_name}.{model.name}"] += 1

    def take(self) -> Counter[str]:
        taken, self.counts = self.counts, Counter()
        return taken


def _archive(c: Container, start: datetime) -> None:
    """``EVENTS`` accepted records of 1 KiB events, under the hour of ``start``."""
    data = "x" * 1024
    for first in range(0, EVENTS, PER_OBJECT):
        lines = []
        for i in range(first, min(EVENTS, first + PER_OBJECT)):
            at = start + timedelta(milliseconds=i)
            event = {
                "specversion": "1.0",
                "id": f"e{i}",
                "source": "/bench",
                "type": "bench",
                "datacontenttype": "text/plain",
                "knativearrivaltime": archive.rfc3339(at),
                "data": data,
            }
            record = archive.accepted_record("bench", "default", event, ["t"], 1100, at)
            lines.append(archive.encode_line(record))
        key = archive.archive_key(
            start, f"bench-archive-1-{start:%Y-%m-%d-%H-%M-%S}-{first:08d}-{uuid.uuid4()}"
        )
        c.blobs.put(c.settings.archive_bucket, key, b"".join(lines))


def _read_floor(c: Container, start: datetime, end: datetime) -> float:
    """Seconds to list, get, parse and select every record, as the runner reads them."""
    bucket = c.settings.archive_bucket
    lo, hi = archive.rfc3339(start), archive.rfc3339(end)
    began = time.perf_counter()
    keys = c.blob_listing.list_keys(
        bucket, "archive/", archive_reader.first_key_bound("archive/", start), 1000
    )
    found = 0
    for key in keys:
        for record in archive_reader.object_records(key, c.blobs.get(bucket, key)).records:
            if record is not None and archive_reader.selected(record, "bench", "default", lo, hi):
                found += 1
    elapsed = time.perf_counter() - began
    assert found == EVENTS, found
    return elapsed


def _replay(
    c: Container, calls: _Calls, start: datetime, end: datetime, packing: bool
) -> tuple[float, Counter[str]]:
    """Seconds for one run of a new replay of the range, and the calls it made."""
    name = f"r{uuid.uuid4().hex[:8]}"
    spec = {"from": rfc3339(start), "to": rfc3339(end), "triggers": ["t"], "packing": packing}
    c.replays.put("bench", "default", name, {"spec": spec})
    runner = c.replay_runner
    calls.take()  # what the PUT made is not the replay's
    began = time.perf_counter()
    assert runner.run("bench", "default", name, 3600.0)
    elapsed = time.perf_counter() - began
    made = calls.take()
    progress = c.replays.get("bench", "default", name)["status"]["progress"]
    assert progress["eventsEnqueued"] == EVENTS, progress
    return elapsed, made


def main() -> int:
    os.environ.setdefault("AWS_ACCESS_KEY_ID", "local")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "local")
    load = os.getloadavg()
    aws = EmbeddedAws("127.0.0.1", free_port())
    endpoint = aws.start()
    settings = replace(
        Settings(), endpoint_url=endpoint, cache_ttl_seconds=0.0, replay_settle_seconds=0.0
    )
    c = Container(settings)
    try:
        from brokerctl.bootstrap import bootstrap

        bootstrap(settings, c.clients, say=lambda line: None)
        c.brokers.put("bench", "default", {"metadata": {"name": "default"}})
        trigger = {"spec": {"broker": "default", "subscriber": {"uri": "http://127.0.0.1:9/"}}}
        c.triggers.put("bench", "t", trigger)
        start = datetime.now(UTC).replace(minute=0, second=0, microsecond=0) - timedelta(hours=1)
        end = start + timedelta(minutes=30)
        _archive(c, start)
        calls = _Calls(c)
        _replay(c, calls, start, end, packing=False)  # untimed: clients and connections made
        reads: list[float] = []
        seconds: dict[str, list[float]] = {"default": [], "packed": []}
        per_event: dict[str, list[float]] = {"default": [], "packed": []}
        made: dict[str, Counter[str]] = {}
        for r in range(ROUNDS):
            reads.append(_read_floor(c, start, end))
            for way in ("default", "packed") if r % 2 == 0 else ("packed", "default"):
                elapsed, counted = _replay(c, calls, start, end, packing=way == "packed")
                seconds[way].append(elapsed)
                per_event[way].append(sum(counted.values()) / EVENTS)
                made[way] = counted
        read_eps = EVENTS / statistics.median(reads)
        eps = {way: EVENTS / statistics.median(s) for way, s in seconds.items()}
        most = {way: max(v) for way, v in per_event.items()}  # the worst run: the bound holds
        rows = [("read archive objects alone (floor)", f"{read_eps:,.0f}", "", "")]
        for way, label in (("default", "one event a message"), ("packed", "spec.packing")):
            rows.append(
                (f"replay, {label}", f"{eps[way]:,.0f}", f"{most[way]:.4f}", str(BOUNDS[way]))
            )
        print(f"{EVENTS} events of 1 KiB in {EVENTS // PER_OBJECT} objects; medians of {ROUNDS}")
        print(f"load average before the run: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
        print_table(rows, ("path", "events/s", "AWS calls per event", "at most"))
        for way, counted in made.items():
            print(f"  calls of one {way} replay: {dict(sorted(counted.items()))}")
        write_result(
            "replay",
            {
                "aws_calls_per_replayed_event": most["default"],
                "aws_calls_per_replayed_event_packed": most["packed"],
                "events_per_s": eps["default"],
                "events_per_s_packed": eps["packed"],
                "read_events_per_s": read_eps,
                "replay_ratio_vs_read": eps["default"] / read_eps,
                "replay_ratio_vs_read_packed": eps["packed"] / read_eps,
                "load_average_1m": load[0],
            },
            f"{EVENTS} archived 1 KiB events ({EVENTS // PER_OBJECT} archive objects) replayed to "
            "one trigger's standard SQS queue on local mode (embedded moto in its own process), "
            f"checkpoint (DynamoDB) every {BATCH_EVENTS} events, {SEND_CONCURRENCY} "
            "SendMessageBatch calls in flight. aws_calls_per_replayed_event: every API call of "
            "the replaying process during a run (S3 list and get, DynamoDB reads, lease and "
            "checkpoints, SQS sends) divided by the events enqueued, the worst of "
            f"{ROUNDS} runs; by default one event a message, ten to a call (bound 0.11), "
            "*_packed with spec.packing (bound 0.01). events_per_s: medians of "
            f"{ROUNDS} runs on the emulator, floors, not targets; read_events_per_s reads the "
            "same objects alone (list, get, parse, select) and replay_ratio_vs_read is given for "
            f"information. Load average {load[0]:.2f} when it started, on {os.cpu_count()} "
            "cores",
            calls={way: dict(sorted(counted.items())) for way, counted in made.items()},
        )
        over = [way for way in BOUNDS if most[way] > BOUNDS[way]]
        if over:
            print(f"FAILED: AWS calls per replayed event past the bound: {over}")
            return 1
        return 0
    finally:
        aws.stop()


if __name__ == "__main__":
    sys.exit(main())
