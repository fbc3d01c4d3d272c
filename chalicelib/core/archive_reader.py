"""Reading the archive back for a replay (docs/replay.md). Pure: keys, objects' bytes and records.

Firehose writes objects under ``<prefix>YYYY/MM/DD/HH/<stream>-<version>-YYYY-MM-DD-HH-MM-SS-<id>``
(GZIP on AWS). The hour is Firehose's receipt time of the OLDEST record in the object (AWS:
"Firehose uses the approximate arrival timestamp of the oldest record that's contained in the
Amazon S3 object being written"), so one object holds records received up to a buffer interval
(≤ 900 s) after its hour's key: a record received at ``r`` is in an object of the hour of
``r - 900 s`` or later, and of the hour of ``r`` or earlier. A record is received at or after its
``at`` (a carrying container sends within ``LATE_SECONDS``; later ones are written under their own
hour: services/late_archive.py), so a range's records are in the hours from that of
``from - 900 s`` to the hour after ``to``'s. Keys sort by time, so one listing from a start key
walks the range in order.

The order a replay gives: objects in key order (Firehose's delivery order), and within an object
its records sorted by ``at`` (stable: records with the same ``at`` keep their line order). Two
records in different objects can be out of ``at`` order by at most the time between those objects'
writes; ``docs/replay.md`` says so.
"""

from __future__ import annotations

import gzip
import re
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from chalicelib.core.archive import SCHEMA_VERSION
from chalicelib.core.cloudevents.json_format import parse_json

_HOUR = re.compile(r"(?:^|/)(\d{4})/(\d{2})/(\d{2})/(\d{2})/[^/]+$")
FIREHOSE_MAX_BUFFER = timedelta(seconds=900)
MAX_OBJECT_BYTES = 512 * 1024 * 1024  # a decompressed object; Firehose's buffer is ≤ 128 MiB
_GZIP_MAGIC = b"\x1f\x8b"


@dataclass(frozen=True, slots=True)
class Position:
    """Where a replay stands: the next record is at ``offset`` (in replay order) of the object
    ``key``; ``key`` empty: before the first object."""

    key: str = ""
    offset: int = 0


@dataclass(frozen=True, slots=True)
class ObjectRecords:
    """One archive object's lines in replay order: each a parsed record, or None for a line that
    is not a JSON object (counted, never replayed)."""

    key: str
    records: tuple[Mapping[str, Any] | None, ...]


def hour_of_key(key: str) -> datetime | None:
    """The hour partition of an archive key, or None for a key outside the layout."""
    found = _HOUR.search(key)
    if found is None:
        return None
    try:
        year, month, day, hour = (int(g) for g in found.groups())
        return datetime(year, month, day, hour, tzinfo=UTC)
    except ValueError:
        return None


def first_key_bound(prefix: str, start: datetime) -> str:
    """The listing's StartAfter for a range beginning at ``start``: just before the hour of
    ``start`` less Firehose's longest buffer (an object is filed under its oldest record's hour,
    so a record received at ``start`` may be in an object of the hour before)."""
    earliest = start.astimezone(UTC) - FIREHOSE_MAX_BUFFER
    return f"{prefix}{earliest:%Y/%m/%d/%H}/"


def last_hour(end: datetime) -> datetime:
    """The last hour partition that may hold a record with ``at`` before ``end``."""
    latest = end.astimezone(UTC) + FIREHOSE_MAX_BUFFER
    return latest.replace(minute=0, second=0, microsecond=0)


def object_records(key: str, blob: bytes) -> ObjectRecords:
    """The records of one archive object (gzip or not) in replay order."""
    raw = _decompressed(blob)
    lines = [line for line in raw.split(b"\n") if line.strip()]
    parsed: list[tuple[str, int, Mapping[str, Any] | None]] = []
    for i, line in enumerate(lines):
        try:
            record = parse_json(line)
        except ValueError:
            record = None
        if not isinstance(record, Mapping):
            parsed.append(("", i, None))
            continue
        at = record.get("at")
        parsed.append((at if isinstance(at, str) else "", i, record))
    parsed.sort(key=lambda item: (item[0], item[1]))
    return ObjectRecords(key, tuple(record for _, _, record in parsed))


def _decompressed(blob: bytes) -> bytes:
    if not blob.startswith(_GZIP_MAGIC):
        return blob
    try:
        out = zlib.decompressobj(16 + zlib.MAX_WBITS)
        data = out.decompress(blob, MAX_OBJECT_BYTES)
    except zlib.error as exc:
        raise ValueError(f"not a readable gzip object: {exc}") from None
    if out.unconsumed_tail:
        raise ValueError(f"an archive object over {MAX_OBJECT_BYTES} bytes decompressed")
    return data


def compress(blob: bytes) -> bytes:
    """GZIP as Firehose writes it (for tests and the benchmark)."""
    return gzip.compress(blob)


def selected(record: Mapping[str, Any], namespace: str, broker: str, start: str, end: str) -> bool:
    """Whether a record is an event of this broker accepted in ``[start, end)`` (RFC 3339 in
    the archive's own format, so text order is time order). Only ``accepted`` records of schema
    v1 are replayed; other kinds (``rejected``, ``delivery``, ``duplicate``...) are skipped."""
    at = record.get("at")
    event = record.get("event")
    return (
        record.get("kind") == "accepted"
        and record.get("v") == SCHEMA_VERSION
        and record.get("namespace") == namespace
        and record.get("broker") == broker
        and isinstance(at, str)
        and start <= at < end
        and (type(event) is dict or isinstance(event, Mapping))  # dict: without ABC's lookup
    )


def s3_address(url: str) -> tuple[str, str]:
    """``(bucket, key)`` of an ``s3://bucket/key`` address (an archive record's ``dataref``)."""
    if not url.startswith("s3://"):
        raise ValueError(f"not an s3:// address: {url[:80]!r}")
    bucket, _, key = url[5:].partition("/")
    if not bucket or not key:
        raise ValueError(f"not an s3://bucket/key address: {url[:80]!r}")
    return bucket, key
