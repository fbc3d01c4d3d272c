"""Replay throughput on local mode: events per second from the S3 archive to a trigger's queue,
side by side with the floor, reading the same archive objects alone (list, get, parse, select).

Both run against the local runtime's embedded AWS endpoint (moto in its own process, as
``brokerctl dev`` starts it) with the broker's own wiring (Container, bootstrap). The archive is
written as Firehose writes it: hour-keyed JSON-lines objects of ``accepted`` records. A replay
runs in one bounded run, reading the objects, sending SendMessageBatch calls of 10 to the trigger's
queue and checkpointing in DynamoDB after each batch (``RunnerOptions.batch_events``; the default,
10, is what the docs promise: a crash re-sends at most 10 events). Larger batches are timed too,
for the trade-off between re-sent events on a crash and speed.
Run: .venv/bin/python benchmarks/replay.py
"""

from __future__ import annotations

import os
import statistics
import sys
import time
import uuid
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks._result import print_table, write_result  # noqa: E402
from brokerctl.embedded_aws import EmbeddedAws, free_port  # noqa: E402
from chalicelib.config import Settings  # noqa: E402
from chalicelib.container import Container  # noqa: E402
from chalicelib.core import archive, archive_reader, names  # noqa: E402
from chalicelib.core.clock import rfc3339  # noqa: E402

EVENTS = int(os.environ.get("REPLAY_EVENTS", "5000"))
PER_OBJECT = 500  # records per archive object (Firehose: whatever its buffer held)
ROUNDS = 3
BATCHES = (10, 100)


def _archive(c: Container, start: datetime) -> list[str]:
    """``EVENTS`` accepted records of 1 KiB events, under the hour of ``start``."""
    keys = []
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
        keys.append(key)
    return keys


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


def _send_floor(c: Container, queue: str) -> float:
    """Seconds to send ``EVENTS`` messages of the same size in SendMessageBatch calls of 10 with
    nothing else: what the local SQS endpoint costs by itself."""
    from chalicelib.ports import OutgoingMessage

    body = "x" * 1400  # about the size of a queued 1 KiB event
    began = time.perf_counter()
    for first in range(0, EVENTS, 10):
        batch = [OutgoingMessage(str(i), body) for i in range(min(10, EVENTS - first))]
        assert c.queues.send_batch(queue, batch) == []
    return time.perf_counter() - began


def _replay(c: Container, start: datetime, end: datetime, batch: int) -> float:
    name = f"r{uuid.uuid4().hex[:8]}"
    body = {"spec": {"from": rfc3339(start), "to": rfc3339(end), "triggers": ["t"]}}
    c.replays.put("bench", "default", name, body)
    runner = c.replay_runner
    runner._options = replace(runner._options, batch_events=batch, settle_seconds=0.0)
    began = time.perf_counter()
    assert runner.run("bench", "default", name, 3600.0)
    elapsed = time.perf_counter() - began
    progress = c.replays.get("bench", "default", name)["status"]["progress"]
    assert progress["eventsEnqueued"] == EVENTS, progress
    return elapsed


def main() -> None:
    os.environ.setdefault("AWS_ACCESS_KEY_ID", "local")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "local")
    aws = EmbeddedAws("127.0.0.1", free_port())
    endpoint = aws.start()
    try:
        from brokerctl.bootstrap import bootstrap

        settings = replace(Settings(), endpoint_url=endpoint, cache_ttl_seconds=0.0)
        c = Container(settings)
        bootstrap(settings, c.clients, say=lambda line: None)
        c.brokers.put("bench", "default", {"metadata": {"name": "default"}})
        trigger = {"spec": {"broker": "default", "subscriber": {"uri": "http://127.0.0.1:9/"}}}
        c.triggers.put("bench", "t", trigger)
        start = datetime.now(UTC).replace(minute=0, second=0, microsecond=0) - timedelta(hours=1)
        end = start + timedelta(minutes=30)
        _archive(c, start)
        queue = names.queue_name(settings.queue_prefix, "bench", "default", "t")
        reads, sends, replays = [], [], {b: [] for b in BATCHES}  # type: ignore[var-annotated]
        for _ in range(ROUNDS):
            reads.append(_read_floor(c, start, end))
            sends.append(_send_floor(c, queue))
            for batch in BATCHES:
                replays[batch].append(_replay(c, start, end, batch))
        read_s = statistics.median(reads)
        send_eps = EVENTS / statistics.median(sends)
        replay_s = {b: statistics.median(v) for b, v in replays.items()}
        read_eps = EVENTS / read_s
        eps = {b: EVENTS / s for b, s in replay_s.items()}
        rows = [
            ("read archive objects alone (floor)", f"{read_s * 1000:,.0f}", f"{read_eps:,.0f}"),
            ("SendMessageBatch x10 alone", f"{EVENTS / send_eps * 1000:,.0f}", f"{send_eps:,.0f}"),
        ]
        for b in BATCHES:
            label = f"replay, checkpoint every {b} events"
            rows.append((label, f"{replay_s[b] * 1000:,.0f}", f"{eps[b]:,.0f}"))
        print(f"{EVENTS} events of 1 KiB in {EVENTS // PER_OBJECT} objects, median of {ROUNDS}")
        print_table(rows, ("path", "ms", "events/s"))
        default = BATCHES[0]
        write_result(
            "replay",
            {
                "events_per_s": eps[default],
                "replay_ratio_vs_read": eps[default] / read_eps,
                "events_per_s_batch100": eps[100],
                "replay_ratio_vs_read_batch100": eps[100] / read_eps,
                "read_events_per_s": read_eps,
                "send_alone_events_per_s": send_eps,
                "replay_ratio_vs_send_alone": eps[default] / send_eps,
            },
            f"{EVENTS} archived 1 KiB events replayed to one trigger's SQS queue on local mode "
            f"(embedded moto), checkpoint (DynamoDB) every {default} events; the floor reads the "
            "same objects alone (list, get, parse, select); the local SQS endpoint alone (the same "
            "number of SendMessageBatch calls, nothing else) is timed too, as the bound moto puts "
            "on any replay",
        )
    finally:
        aws.stop()


if __name__ == "__main__":
    main()
