"""Writing archive records (design.md §3), for every function that writes them: retried, then
counted in ``archive_failure_count`` and logged with the event ids, never raised."""

from __future__ import annotations

import atexit
import json
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from chalicelib import logs
from chalicelib.core.archive import MAX_RECORD_BYTES, PartlyWrittenError
from chalicelib.core.errors import BrokerError
from chalicelib.ports import Archive, CarrySpool
from chalicelib.services.late_archive import LateArchive, late_key
from chalicelib.services.metrics import Metrics

log = logs.get("archiver")

ATTEMPTS = 3
BACKOFF_SECONDS = (0.05, 0.2)  # before the 2nd and 3rd attempts
_MAX_LOGGED_IDS = 20
# With ``batch_seconds`` > 0 (``BROKER_ARCHIVE_BATCH_SECONDS``; local mode's default is 1 s) records
# are gathered across requests and written by a background thread every window, or as soon as a
# Firehose call's worth is waiting, as Firehose itself buffers before S3. What is buffered is
# written at exit; a process killed outright loses at most one window of archive records (never
# events: they are in their queues). Deployed functions default to 0: written before answering.
FLUSH_RECORDS = 500  # one Firehose call's worth: written at once, not at the end of the window
MAX_BUFFERED = 10_000  # past this (the archive is slow or down) writers flush themselves
# With ``carry_seconds`` > 0 (``BROKER_ARCHIVE_CARRY_SECONDS``, for Lambda, where a thread cannot
# run after the answer: the container is frozen) a warm container carries its records from one
# invocation to the next, with no thread: the first write that finds the oldest carried record
# ``carry_seconds`` old, or FLUSH_RECORDS / CARRY_BYTES waiting, writes them all in one call
# before its own answer. So one request per window pays the Firehose call, not every request.
# Each carried record is also appended to a spool (``SpooledArchive``: a file per archiver under
# BROKER_ARCHIVE_SPOOL_DIR), which the shutdown extension (infra/spool_extension/) writes to
# Firehose when Lambda shuts the container down before another invocation does; what it cannot
# write it counts in ``archive_spool_lost_count`` (docs/cost.md). A carried record written more
# than ``late_archive.LATE_SECONDS`` after its ``at`` (a container that sat idle) goes straight to
# an S3 object of its own hour instead (``SpooledArchive.late``), where replays look for it; each
# is counted in ``archive_late_count``.
CARRY_BYTES = 1024 * 1024
# Archivers holding records for later: the local runtime writes them all before it stops its
# embedded endpoint (at exit would be too late: the endpoint is gone by then).
_holding: weakref.WeakSet[Archiver] = weakref.WeakSet()


@dataclass(frozen=True)
class SpooledArchive:
    """The archive, for carrying archivers that keep a copy of what they carry in a spool of
    their own (``spools(role)``); other writers see only ``put``."""

    sink: Archive
    spools: Callable[[str], CarrySpool]
    late: LateArchive | None = None  # None: late records go through Firehose too (filed late)

    def put(self, records: Sequence[bytes]) -> None:
        self.sink.put(records)


def flush_all() -> None:
    """Write what every archiver holds now (the local runtime calls it as it stops)."""
    for archiver in list(_holding):
        archiver.flush()


def flush_due() -> None:
    """Write what every carrying archiver has held for its ``carry_seconds`` or longer: called
    as each invocation ends (app.py), so a record carried by an archiver that no later record
    reaches (the reply path of a delivery function, an API container serving only the control
    plane) is still written within a carry window of any invocation, not at shutdown."""
    for archiver in list(_holding):
        archiver.flush_if_due()


class Archiver:
    def __init__(
        self,
        sink: Archive,
        metrics: Metrics,
        role: str,
        sleep: Callable[[float], None] = time.sleep,
        batch_seconds: float = 0.0,
        carry_seconds: float = 0.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._spool: CarrySpool | None = None
        self._late: LateArchive | None = None
        if isinstance(sink, SpooledArchive):
            if carry_seconds > 0 and batch_seconds <= 0:
                self._spool = sink.spools(role)
                self._late = sink.late
            sink = sink.sink
        self._sink = sink
        self._metrics = metrics
        self._role = role  # the function writing ("ingress", "delivery", ...): the dimension
        self._sleep = sleep
        self._batch_seconds = batch_seconds
        self._buffer: list[bytes] = []
        self._wake = threading.Condition()
        self._flusher: threading.Thread | None = None
        self._carry_seconds = carry_seconds if batch_seconds <= 0 else 0.0
        self._clock = clock
        self._oldest = 0.0  # when the oldest carried record was written
        self._carried_bytes = 0
        self._at_exit = False

    def write(self, records: Sequence[bytes]) -> bool:
        """Archive ``records`` (or buffer them, with ``batch_seconds``); False (counted and
        logged) when they could not be written."""
        if not records:
            return True
        if self._carry_seconds > 0:
            return self._carry(records)
        if self._batch_seconds <= 0:
            return self._write_now(records)
        with self._wake:
            self._buffer.extend(records)
            if self._flusher is None:
                self._flusher = threading.Thread(target=self._run, name="archive", daemon=True)
                self._flusher.start()
                atexit.register(self.flush)
                _holding.add(self)
            if len(self._buffer) >= FLUSH_RECORDS:
                self._wake.notify()
            overflow = len(self._buffer) >= MAX_BUFFERED
        return self.flush() if overflow else True

    def _carry(self, records: Sequence[bytes]) -> bool:
        now = self._clock()
        spool_error: BrokerError | None = None
        with self._wake:
            if self._spool is not None:
                try:
                    self._spool.append(records)
                except BrokerError as exc:  # not kept for the extension: written now instead
                    spool_error = exc
            if not self._buffer:
                self._oldest = now
            self._buffer.extend(records)
            self._carried_bytes += sum(map(len, records))
            due = (
                spool_error is not None
                or now - self._oldest >= self._carry_seconds
                or len(self._buffer) >= FLUSH_RECORDS
                or self._carried_bytes >= CARRY_BYTES
            )
            if not self._at_exit and not due:  # a process that ends cleanly writes them
                self._at_exit = True
                atexit.register(self.flush)
                _holding.add(self)
        if spool_error is not None:
            log.error(
                "archive spool failed, writing the carried records now: %s",
                spool_error,
                extra={"function": self._role},
            )
        return self.flush() if due else True

    def flush_if_due(self) -> bool:
        """Write what is carried once the oldest record is ``carry_seconds`` old."""
        with self._wake:
            due = (
                self._carry_seconds > 0
                and bool(self._buffer)
                and self._clock() - self._oldest >= self._carry_seconds
            )
        return self.flush() if due else True

    def flush(self) -> bool:
        """Write what is buffered now."""
        sealed: str | None = None
        with self._wake:
            records, self._buffer = self._buffer, []
            self._carried_bytes = 0
            if records and self._spool is not None:
                # Rotated before the call: a crash after Firehose took them and before the
                # removal below sends them again at shutdown (duplicates), never loses them.
                sealed = self._seal()
        written = self._write_carried(records) if records else True
        if sealed is not None:  # written, or counted and logged as not written: done with
            self._discard(sealed)
        return written

    def _seal(self) -> str | None:
        assert self._spool is not None
        try:
            return self._spool.seal()
        except BrokerError as exc:  # still in the spool: at worst sent again at shutdown
            log.error("archive spool: cannot rotate: %s", exc, extra={"function": self._role})
            return None

    def _discard(self, sealed: str) -> None:
        assert self._spool is not None
        try:
            self._spool.discard(sealed)
        except BrokerError as exc:  # left for the extension: at worst sent again at shutdown
            log.error("archive spool: cannot remove: %s", exc, extra={"function": self._role})

    def _run(self) -> None:
        while True:
            with self._wake:
                self._wake.wait_for(
                    lambda: len(self._buffer) >= FLUSH_RECORDS, timeout=self._batch_seconds
                )
            self.flush()

    def _write_carried(self, records: Sequence[bytes]) -> bool:
        if self._late is None:
            return self._write_now(records)
        fresh, late = self._late.split(records)
        written = True
        for hour, group in sorted(late.items()):
            written = self._write_late(self._late, late_key(hour, self._role), group) and written
        if fresh:
            written = self._write_now(fresh) and written
        return written

    def _write_late(self, late: LateArchive, key: str, records: Sequence[bytes]) -> bool:
        """One object of one hour's late records; the same key on every attempt, so that an
        attempt S3 took but whose answer was lost is overwritten, not duplicated."""
        error: BrokerError | None = None
        for attempt in range(ATTEMPTS):
            if attempt:
                self._sleep(BACKOFF_SECONDS[min(attempt, len(BACKOFF_SECONDS)) - 1])
            try:
                late.put(key, records)
            except BrokerError as exc:
                error = exc
                continue
            self._metrics.count("archive_late_count", {"function": self._role}, len(records))
            return True
        self._failed(records, error, f"late archive object s3://{late.bucket}/{key}")
        return False

    def _write_now(self, records: Sequence[bytes]) -> bool:
        """Written, or counted and logged. Only what an attempt did not write is tried again; a
        record over Firehose's limit (none is built so: a guard) is never sent nor tried again,
        so that it fails nothing beside it."""
        too_large = [r for r in records if len(r) > MAX_RECORD_BYTES]
        if too_large:
            self._failed(too_large, None, f"archive: records over {MAX_RECORD_BYTES} bytes", 0)
        pending = [r for r in records if len(r) <= MAX_RECORD_BYTES]
        error: BrokerError | None = None
        for attempt in range(ATTEMPTS):
            if not pending:
                break
            if attempt:
                self._sleep(BACKOFF_SECONDS[min(attempt, len(BACKOFF_SECONDS)) - 1])
            try:
                self._sink.put(pending)
                pending = []
            except PartlyWrittenError as exc:
                error, pending = exc, exc.unwritten
            except BrokerError as exc:
                error = exc
        if pending:
            self._failed(pending, error, "archive")
        return not pending and not too_large

    def _failed(
        self,
        records: Sequence[bytes],
        error: BrokerError | None,
        what: str,
        attempts: int = ATTEMPTS,
    ) -> None:
        self._metrics.count("archive_failure_count", {"function": self._role}, len(records))
        event_ids = _event_ids(records)
        log.error(
            "%s failed after %d attempts, %d records not archived (event ids %s): %s",
            what,
            attempts,
            len(records),
            event_ids,
            error,
            extra={"function": self._role, "event_ids": event_ids},
        )


def _event_ids(records: Sequence[bytes]) -> list[str]:
    ids: list[str] = []
    for line in records[:_MAX_LOGGED_IDS]:
        try:
            record = json.loads(line)
        except ValueError:
            continue
        event = record.get("event") if isinstance(record, dict) else None
        event_id = event.get("id") if isinstance(event, dict) else record.get("event_id")
        if isinstance(event_id, str):
            ids.append(event_id)
    return ids
