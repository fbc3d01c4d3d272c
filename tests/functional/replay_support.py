"""Replay tests over the fakes: Firehose's delivery of the archive to S3, and a harness whose
replays start as soon as their range ends."""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

from chalicelib.config import Settings
from chalicelib.core.clock import rfc3339, utcnow
from chalicelib.ports import HttpResponse
from tests.functional.harness import Harness

REPLAYS = "/apis/eventing.knative.dev/v1/namespaces/ns/brokers/default/replays"


def harness(*answers: HttpResponse, **settings: Any) -> Harness:
    base = replace(Settings(), cache_ttl_seconds=0.0, replay_settle_seconds=0.0, **settings)
    return Harness(*answers, settings=base)


def flush_archive(h: Harness, at: datetime | None = None, gzip: bool = False) -> str:
    """What Firehose does with its buffer: one S3 object under the hour of ``at``."""
    from chalicelib.core.archive_reader import compress

    at = at or utcnow()
    data = b"".join(h.archive.records)
    h.archive.records.clear()
    key = (
        f"archive/{at:%Y/%m/%d/%H}/serverless-broker-local-archive-1-"
        f"{at:%Y-%m-%d-%H-%M-%S}-{uuid.uuid4()}"
    )
    h.blobs.put(h.settings.archive_bucket, key, compress(data) if gzip else data)
    return key


def put_replay(h: Harness, name: str, start: datetime, end: datetime, **spec: Any) -> Any:
    body = {"spec": {"from": rfc3339(start), "to": rfc3339(end), **spec}}
    doc, _ = h.container.replays.put("ns", "default", name, body)
    return doc


def drain(h: Harness, trigger: str) -> list[dict[str, Any]]:
    """Every event of the trigger's queue as a single message would carry it (decoded SQS
    bodies; a pack's events one by one, in its order), removed from it."""
    return [
        doc
        for body in drain_bodies(h, trigger)
        for doc in (
            [{**body, "event": event} for event in body.pop("pack")] if "pack" in body else [body]
        )
    ]


def drain_bodies(h: Harness, trigger: str) -> list[dict[str, Any]]:
    """Every message of the trigger's queue (decoded SQS bodies), removed from it."""
    queue = h.queue_of(trigger)
    out = []
    while True:
        got = h.queues.receive(queue, 10, 0, 30)
        if not got:
            return out
        for m in got:
            out.append(json.loads(m.body))
            h.queues.delete_message(queue, m.receipt_handle)


def window() -> tuple[datetime, datetime]:
    """(a minute ago, a moment that has just passed): every event sent before the call is in
    the range, since the archive's times are to the millisecond and the end is exclusive."""
    now = datetime.now(UTC)
    end = now + timedelta(milliseconds=2)
    while datetime.now(UTC) <= end:  # a condition on the clock, bounded by the 2 ms above
        time.sleep(0.001)
    return now - timedelta(minutes=1), end
