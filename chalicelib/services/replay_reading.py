"""A replay's reading pass (docs/replay.md): the archive objects of its range in order, cut into
replay batches (the checkpoint unit), read ahead on a thread of their own while the run sends the
batch before."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from chalicelib import logs
from chalicelib.core import archive_reader as reader
from chalicelib.core.cloudevents import codec
from chalicelib.core.cloudevents.event import CloudEvent
from chalicelib.core.cloudevents.sqs_message import decode_event_blob
from chalicelib.core.errors import NotFoundError, UnavailableError, ValidationError
from chalicelib.core.resources import replay as rp
from chalicelib.ports import BlobListing, Blobs
from chalicelib.services.metrics import Metrics

log = logs.get("replays")

LIST_PAGE = 1000

_Records = tuple[Mapping[str, Any] | None, ...]


@dataclass
class Batch:
    events: list[Mapping[str, Any]]  # the records selected (their events decoded when sent)
    read: int  # selected records read (events_read)
    position: reader.Position  # after the batch
    end: bool  # the range is exhausted


class Cursor:
    """Where the reading stands between batches: the archive objects still to read, and the
    records of the current one from ``offset`` on."""

    __slots__ = ("key", "objects", "offset", "records")

    def __init__(self, objects: Iterator[tuple[str, int, _Records]]) -> None:
        self.objects = objects
        self.key = ""
        self.records: _Records = ()
        self.offset = 0


class ArchiveReader:
    """Reads a replay's range from the archive bucket: objects, batches, and the events whole
    (from the record, or from the payload it refers to)."""

    def __init__(
        self,
        blobs: Blobs,
        listing: BlobListing,
        metrics: Metrics,
        bucket: str,
        prefix: str,
        batch_events: int,
    ) -> None:
        self._blobs = blobs
        self._listing = listing
        self._metrics = metrics
        self._bucket = bucket
        self._prefix = prefix
        self._batch_events = max(1, batch_events)

    def cursor(self, replay: rp.Replay, position: reader.Position) -> Cursor:
        return Cursor(self._objects(replay, position))

    def _objects(
        self, replay: rp.Replay, position: reader.Position
    ) -> Iterator[tuple[str, int, _Records]]:
        """``(key, first offset, records)`` of each archive object from ``position`` to the end
        of the range that has records from that offset on."""
        last = reader.last_hour(replay.end_time)
        after = position.key or reader.first_key_bound(self._prefix, replay.start_time)
        if position.key:
            records = self._object(position.key)
            if position.offset < len(records):
                yield position.key, position.offset, records
        while True:
            keys = self._listing.list_keys(self._bucket, self._prefix, after, LIST_PAGE)
            for key in keys:
                hour = reader.hour_of_key(key)
                if hour is None:
                    log.warning(
                        "replay: skipping s3://%s/%s (not an archive key)", self._bucket, key
                    )
                    continue
                if hour > last:
                    return
                records = self._object(key)
                if records:
                    yield key, 0, records
            if len(keys) < LIST_PAGE:
                return
            after = keys[-1]

    def _object(self, key: str) -> _Records:
        blob = self._blobs.get(self._bucket, key)
        try:
            return reader.object_records(key, blob).records
        except ValueError as exc:
            log.warning("replay: unreadable archive object %s: %s", key, exc)
            self._metrics.count("replay_unreadable_object_count", {})
            return ()

    def next_batch(self, replay: rp.Replay, cursor: Cursor, position: reader.Position) -> Batch:
        """The next batch from ``cursor`` (which stands at ``position``): ``batch_events``
        selected records, or fewer at the range's end. A batch spans archive objects (fewer
        checkpoints), but a long stretch of other brokers' records still ends one at an
        object's end: it is not read twice."""
        events: list[Mapping[str, Any]] = []
        read = 0
        scanned = 0  # records of the batch, selected or not
        limit = self._batch_events
        namespace, broker, start, end = replay.namespace, replay.broker, replay.start, replay.end
        while True:
            key, records, i = cursor.key, cursor.records, cursor.offset
            n = len(records)
            while i < n:
                record = records[i]
                i += 1
                scanned += 1
                if record is None:
                    log.warning("replay: a line of %s is not a JSON record; skipped", key)
                    self._metrics.count("replay_unreadable_record_count", {})
                    continue
                if not reader.selected(record, namespace, broker, start, end):
                    continue
                read += 1
                events.append(record)
                if len(events) >= limit:
                    cursor.offset = i
                    return Batch(events, read, reader.Position(key, i), end=False)
            cursor.offset = n
            if n and scanned >= limit:  # the end of an object is a checkpoint
                return Batch(events, read, reader.Position(key, n), end=False)
            following = next(cursor.objects, None)
            if following is None:
                last = reader.Position(key, n) if scanned else position
                return Batch(events, read, last, end=True)
            cursor.key, cursor.offset, cursor.records = following

    def event(self, record: Mapping[str, Any]) -> CloudEvent | None:
        """The archived event, whole: from the record, or from its ``dataref`` when it was
        archived by reference. None (logged; the caller counts it) when the record or its
        payload cannot be read."""
        try:
            dataref = record.get("dataref")
            if isinstance(dataref, str):
                bucket, key = reader.s3_address(dataref)
                return decode_event_blob(self._blobs.get(bucket, key))
            return codec.from_json(dict(record["event"]), checked=False)
        except (NotFoundError, ValidationError, ValueError) as exc:
            event_id = record["event"].get("id")
            log.warning("replay: event %r cannot be re-read: %s", event_id, exc)
            return None


_M = TypeVar("_M")


class ReadAhead(Generic[_M]):
    """The batches of a run, read (``read(after)``: the batch after a position, and its messages)
    on a thread of its own while the run sends and checkpoints the one before: one batch in
    flight, one ready, one being read, at most. It reads on until a batch ends the range, or
    ``more()`` is false after one (the run's budget is spent), or ``stop``; a failure to read is
    handed to the run in that batch's place, so that everything before it is sent and
    checkpointed first."""

    def __init__(
        self,
        read: Callable[[reader.Position], tuple[Batch, _M]],
        position: reader.Position,
        more: Callable[[], bool],
    ) -> None:
        self._read, self._more = read, more
        self._changed = threading.Condition()
        self._ready: tuple[Batch, _M] | BaseException | None = None
        self._stopped = False
        self._done = False
        self._thread = threading.Thread(
            target=self._reading, args=(position,), name="replay-read", daemon=True
        )
        self._thread.start()

    def next(self) -> tuple[Batch, _M]:
        """The next batch, once read; raises what reading it raised."""
        with self._changed:
            while self._ready is None and not self._done:
                self._changed.wait()
            item, self._ready = self._ready, None
            self._changed.notify_all()
        if item is None:  # not reached: the run stops after an end batch or its budget
            raise UnavailableError("replay: no batch was read")
        if isinstance(item, BaseException):
            raise item
        return item

    def merged_end(self, batch: Batch) -> Batch:
        """``batch``, made the range's last when the batch read after it (already) ends the
        range with nothing in it: one checkpoint less, and one round."""
        with self._changed:
            item = self._ready
            # No events: no messages, no payload missing, nothing read.
            if isinstance(item, tuple) and item[0].end and not item[0].events:
                self._ready = None
                self._changed.notify_all()
                return Batch(batch.events, batch.read, item[0].position, end=True)
        return batch

    def stop(self) -> None:
        """Stop reading (a batch being read is finished and dropped) and wait for the thread."""
        with self._changed:
            self._stopped = True
            self._changed.notify_all()
        self._thread.join()

    def _reading(self, position: reader.Position) -> None:
        try:
            while True:
                batch, messages = self._read(position)
                if not self._hand_on((batch, messages)) or batch.end or not self._more():
                    return
                position = batch.position
        except BaseException as exc:  # raised in the run, in place of the batch
            self._hand_on(exc)
        finally:
            with self._changed:
                self._done = True
                self._changed.notify_all()

    def _hand_on(self, item: tuple[Batch, _M] | BaseException) -> bool:
        with self._changed:
            while self._ready is not None and not self._stopped:
                self._changed.wait()
            if self._stopped:
                return False
            self._ready = item
            self._changed.notify_all()
            return True
