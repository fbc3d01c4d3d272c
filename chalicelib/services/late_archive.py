"""Carried archive records that reach the archive late go where replays look for them.

A warm Lambda container carries its archive records to its next invocation, or to its shutdown
(services/archiver.py, docs/cost.md). Firehose files a record by when it *receives* it (the
``archive/YYYY/MM/DD/HH/`` of the oldest record's receipt in its S3 object), and a replay of
``[from, to)`` reads only the hours from ``from``'s to ``core/archive_reader.last_hour(to)``,
starting ``BROKER_REPLAY_SETTLE_SECONDS`` (360 s) after ``to``. A record carried by a container
that then sat idle for an hour would be filed an hour late, where no replay of its range ever
looks. So a record written more than ``LATE_SECONDS`` after its ``at`` does not go through
Firehose: it is put straight into the archive bucket, in an object of its own hour
(``archive_key(at, "late-<role>-<uuid>.gz")``), gzip JSON lines as Firehose writes them with the
template's ``ArchiveCompression: GZIP`` (the replay reader and the Glue job read gzip by its
magic bytes and by the ``.gz`` name).

The shutdown extension (infra/spool_extension/extension.py) applies the same rule with its own
copy of these few lines (it runs with the standard library only); tests hold the two together.
"""

from __future__ import annotations

import gzip
import re
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from chalicelib.core.archive import archive_key, rfc3339
from chalicelib.core.clock import utcnow
from chalicelib.ports import Blobs

# Firehose delivers a record to S3 at most its buffer interval (300 s, ArchiveBufferSeconds) after
# it receives it, and a replay lists the archive 360 s after its ``to``. A record with ``at`` just
# before ``to``, sent to Firehose ``d`` seconds after its ``at``, is in S3 by ``to + d + 300``:
# found by the replay when d ≤ 60 s. Half of that is the limit; the other 30 s are the margin for
# the Firehose call's own retries, a slow ingress between ``at`` and the write (it stamps ``at``
# when the request arrives), and clock skew between the function and Firehose.
LATE_SECONDS = 30.0
# The records are ours (core/archive.py encode_line): ``at`` is the third member, after ``v`` and
# ``kind``, in the writer's compact JSON. Matching the line's start only keeps an event's own data
# (which could spell ``"at":"...``) out of it; a line of another shape has no ``at`` here.
_AT = re.compile(rb'\{"v":\d{1,4},"kind":"[a-z_]{1,32}","at":"([0-9T:.+\-Z]{10,40})"')
LATE_PREFIX = "late-"
GZIP_LEVEL = 6  # zlib's default: ~5 ms per MiB of JSON lines measured here


def arrival(record: bytes) -> datetime | None:
    """The ``at`` of an archive line (UTC), or None when it has none the writer would give."""
    found = _AT.match(record)
    return None if found is None else _parsed(found.group(1))


def _parsed(text: bytes) -> datetime | None:
    try:
        at = datetime.fromisoformat(text.decode())
    except ValueError:
        return None
    return at.astimezone(UTC) if at.tzinfo is not None else None


def split(
    records: Sequence[bytes], now: datetime, late_seconds: float = LATE_SECONDS
) -> tuple[list[bytes], dict[datetime, list[bytes]]]:
    """``(fresh, late)``: the records Firehose still files in time, in their order, and the late
    ones by the hour of their ``at``. A record without a readable ``at`` is fresh (as before)."""
    cutoff = now - timedelta(seconds=late_seconds)
    # Every carried record passes here: one in the writer's own shape (archive.rfc3339, where
    # text order is time order) is compared as text, and only a late one parsed (~1 µs a record
    # instead of ~3).
    cutoff_text = rfc3339(cutoff).encode()
    fresh: list[bytes] = []
    late: dict[datetime, list[bytes]] = {}
    for record in records:
        found = _AT.match(record)
        text = b"" if found is None else found.group(1)
        if len(text) == len(cutoff_text) and text[-1:] == b"Z" and text >= cutoff_text:
            fresh.append(record)
            continue
        at = _parsed(text) if text else None
        if at is None or at >= cutoff:
            fresh.append(record)
        else:
            late.setdefault(at.replace(minute=0, second=0, microsecond=0), []).append(record)
    return fresh, late


def object_body(records: Sequence[bytes]) -> bytes:
    """One archive object's bytes: the lines, each ending in its newline, gzip (mtime 0: the same
    records give the same bytes)."""
    data = b"".join(r if r.endswith(b"\n") else r + b"\n" for r in records)
    return gzip.compress(data, compresslevel=GZIP_LEVEL, mtime=0)


def late_key(hour: datetime, role: str, unique: str | None = None) -> str:
    """``archive/YYYY/MM/DD/HH/late-<role>-<unique>.gz``: beside Firehose's objects of that hour,
    and never one of theirs (Firehose names its objects after the stream)."""
    return archive_key(hour, f"{LATE_PREFIX}{role}-{unique or uuid.uuid4().hex}.gz")


@dataclass(frozen=True)
class LateArchive:
    """Where a carrying archiver writes its late records: objects in the archive bucket."""

    blobs: Blobs
    bucket: str
    clock: Callable[[], datetime] = utcnow
    late_seconds: float = LATE_SECONDS

    def split(self, records: Sequence[bytes]) -> tuple[list[bytes], dict[datetime, list[bytes]]]:
        return split(records, self.clock(), self.late_seconds)

    def put(self, key: str, records: Sequence[bytes]) -> None:
        """Raises the port's errors (the archiver retries, counts and logs)."""
        self.blobs.put(self.bucket, key, object_body(records))
