"""Replays (docs/replay.md): the resource under its broker, and the runner that reads the archive
back into the chosen triggers' queues.

The runner works in bounded runs (one Lambda invocation, or a turn of the local runtime's thread).
A run takes the replay's lease, then repeats: read the next batch (≤ ``batch_events`` selected
events, across archive objects; or up to the end of an object once ``batch_events`` records were
read, selected or not), send it to the queues, checkpoint the position in the
replay's stored state with optimistic versioning. A standard queue's events travel in packs
(``sqs_message``: many events to a message), a FIFO queue's one to a message. A batch's
SendMessageBatch calls (10 messages each) run ``send_concurrency`` at a time: a standard queue's
in any order, a FIFO queue's one after the other (its groups' order), different queues side by
side; the next batch is read and packed meanwhile, and the checkpoint waits for all of them (a
standard queue's calls are made by sender processes when ``send_processes`` > 0, so that their
botocore work runs on another core than the reading: adapters/sqs_send_pool.py). A
crash between a send and its checkpoint re-sends that one batch on the next run; nothing is
skipped. A DELETE removes the replay: the next checkpoint finds it gone and the run stops.
"""

from __future__ import annotations

import re
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from chalicelib import heap, logs
from chalicelib.core import archive_reader as reader
from chalicelib.core import names
from chalicelib.core.archive import rfc3339
from chalicelib.core.clock import utcnow
from chalicelib.core.cloudevents import codec
from chalicelib.core.cloudevents.event import CloudEvent
from chalicelib.core.cloudevents.json_format import MSGSPEC_ENCODE, dumps_ascii, dumps_compact
from chalicelib.core.cloudevents.sqs_message import (
    PACK_MAX_BYTES,
    PACK_MAX_EVENTS,
    decode_event_blob,
    encode_pack,
    encode_pack_listed,
    pack_fields,
    pack_head,
    pack_overhead,
    sqs_text,
    utf8_size,
)
from chalicelib.core.delivery import ordering
from chalicelib.core.errors import (
    BrokerError,
    ConflictError,
    NotFoundError,
    Problem,
    UnavailableError,
    ValidationError,
)
from chalicelib.core.filtering.filters import Filter, MatchAll, build_filter
from chalicelib.core.names import name_problems
from chalicelib.core.resources import replay as rp
from chalicelib.core.resources.broker import Broker
from chalicelib.core.resources.trigger import Trigger
from chalicelib.ports import BlobListing, Blobs
from chalicelib.services.claims import Claims
from chalicelib.services.metrics import Metrics
from chalicelib.services.resources import Hooks, Resources, ResourceService, Stored
from chalicelib.services.routing import BrokerConfig, Route

log = logs.get("replays")

# Writes a pack's worth of archived events in one call (``_Run``); None: event by event.
_encode = MSGSPEC_ENCODE

LIST_PAGE = 1000
# The replay batch, the checkpoint unit: a crash re-sends at most this many events per trigger.
# In packs of about twenty 1 KiB events, 1,000 events are five SendMessageBatch calls.
BATCH_EVENTS = 1000
SEND_CONCURRENCY = 4  # SendMessageBatch calls in flight during a batch
SQS_BATCH = 10  # entries per SendMessageBatch call


class ReplayHooks(Hooks[rp.Replay]):
    """A replay's status from the runner's state, and admission: its broker and named triggers
    exist when it is created."""

    def __init__(
        self,
        replays: Resources[rp.Replay],
        brokers: Resources[Broker],
        triggers: Resources[Trigger],
        clock: Callable[[], datetime] = utcnow,
        notify: Callable[[], None] = lambda: None,
    ) -> None:
        self.replays = replays
        self._brokers = brokers
        self._triggers = triggers
        self._clock = clock
        self._notify = notify  # a runner in this process (local mode) starts at once

    def saved(self, stored: Stored[rp.Replay], existed: bool) -> Stored[rp.Replay]:
        if not existed:
            self._notify()
        return stored

    def initial_state(self, now: datetime) -> dict[str, Any]:
        return {"phase": rp.PENDING}

    def check(self, resource: rp.Replay) -> None:
        if self._brokers.get(resource.namespace, resource.broker) is None:
            raise NotFoundError(f'broker "{resource.namespace}/{resource.broker}" does not exist')
        missing = self._missing(resource)
        if missing:
            raise ValidationError(
                [
                    Problem(
                        f"spec.triggers[{resource.triggers.index(t)}]",
                        f'broker "{resource.broker}" has no trigger "{t}"',
                    )
                    for t in missing
                ]
            )

    def status(self, stored: Stored[rp.Replay]) -> dict[str, Any]:
        replay = stored.resource
        finished = rp.is_finished(stored.state)
        return rp.replay_status(
            replay,
            stored.state,
            broker_exists=finished
            or self._brokers.get(replay.namespace, replay.broker) is not None,
            missing_triggers=() if finished else self._missing(replay),
            now=self._clock(),
            previous=stored.status,
        )

    def _missing(self, replay: rp.Replay) -> tuple[str, ...]:
        if not replay.triggers:
            return ()
        have = {
            s.resource.name
            for s in self._triggers.list(replay.namespace)
            if s.resource.broker == replay.broker
        }
        return tuple(t for t in replay.triggers if t not in have)


class ReplayService:
    """The generic resource service for replays, addressed under their broker."""

    def __init__(self, service: ResourceService[rp.Replay]) -> None:
        self.service = service

    def list(self, namespace: str, broker: str) -> dict[str, Any]:
        _check_names(broker)
        doc = self.service.list(namespace)
        doc["items"] = [i for i in doc["items"] if i["metadata"].get("broker") == broker]
        return doc

    def get(self, namespace: str, broker: str, name: str) -> dict[str, Any]:
        _check_names(broker, name)
        return self.service.get(namespace, rp.store_name(broker, name))

    def put(self, namespace: str, broker: str, name: str, body: Any) -> tuple[dict[str, Any], bool]:
        return self.service.put(namespace, rp.store_name(broker, name), body)

    def delete(self, namespace: str, broker: str, name: str) -> dict[str, Any]:
        """Cancels: the runner stops at its next checkpoint."""
        _check_names(broker, name)
        doc = self.service.delete(namespace, rp.store_name(broker, name))
        doc["details"]["name"] = name
        return doc


def _check_names(broker: str, name: str | None = None) -> None:
    problems = name_problems(broker, "path.broker", what="broker name")
    if name is not None:
        problems += name_problems(name, "path.name")
    if problems:
        raise ValidationError(problems)


# ---- the runner ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class RunnerOptions:
    archive_bucket: str
    archive_prefix: str = "archive/"
    # How long after ``spec.to`` the archive holds every record of the range (Firehose's buffer
    # interval plus a margin; the local runtime's 1 s archive batching plus a margin).
    settle_seconds: float = 2.0
    batch_events: int = BATCH_EVENTS
    send_concurrency: int = SEND_CONCURRENCY
    # A standard queue's events go in packs (docs/replay.md): many events per SQS message.
    packs: bool = True
    # A standard queue's calls are made by this many sender processes (the runner's
    # ``process_send``), so that their botocore work runs beside the reading; 0: by threads of
    # this process. FIFO queues' calls stay in this process, one after the other.
    send_processes: int = 0
    lease_seconds: float = 960.0  # longer than any run: a crashed run's lease expires after it
    # After the first run in this process, keep the long-lived heap out of full collections
    # (chalicelib/heap.py): a run's batches otherwise trigger 100 ms ones every few thousand
    # events.
    freeze_heap: bool = True


@dataclass
class _Batch:
    events: list[Mapping[str, Any]]  # the records selected (their events decoded when sent)
    read: int  # selected records read (events_read)
    position: reader.Position  # after the batch
    end: bool  # the range is exhausted


class _Cursor:
    """Where the reading stands between batches: the archive objects still to read, and the
    records of the current one from ``offset`` on."""

    __slots__ = ("key", "objects", "offset", "records")

    def __init__(
        self, objects: Iterator[tuple[str, int, tuple[Mapping[str, Any] | None, ...]]]
    ) -> None:
        self.objects = objects
        self.key = ""
        self.records: tuple[Mapping[str, Any] | None, ...] = ()
        self.offset = 0


class _ReadAhead:
    """The batches of a run, read (``read(after)``: the batch after a position, and its messages)
    on a thread of its own while the run sends and checkpoints the one before: one batch in
    flight, one ready, one being read, at most. It reads on until a batch ends the range, or
    ``more()`` is false after one (the run's budget is spent), or ``stop``; a failure to read is
    handed to the run in that batch's place, so that everything before it is sent and
    checkpointed first."""

    def __init__(
        self,
        read: Callable[[reader.Position], tuple[_Batch, _Messages]],
        position: reader.Position,
        more: Callable[[], bool],
    ) -> None:
        self._read, self._more = read, more
        self._changed = threading.Condition()
        self._ready: tuple[_Batch, _Messages] | BaseException | None = None
        self._stopped = False
        self._done = False
        self._thread = threading.Thread(
            target=self._reading, args=(position,), name="replay-read", daemon=True
        )
        self._thread.start()

    def next(self) -> tuple[_Batch, _Messages]:
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

    def merged_end(self, batch: _Batch) -> _Batch:
        """``batch``, made the range's last when the batch read after it (already) ends the
        range with nothing in it: one checkpoint less, and one round."""
        with self._changed:
            item = self._ready
            # No events: no messages, no payload missing, nothing read.
            if isinstance(item, tuple) and item[0].end and not item[0].events:
                self._ready = None
                self._changed.notify_all()
                return _Batch(batch.events, batch.read, item[0].position, end=True)
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

    def _hand_on(self, item: tuple[_Batch, _Messages] | BaseException) -> bool:
        with self._changed:
            while self._ready is not None and not self._stopped:
                self._changed.wait()
            if self._stopped:
                return False
            self._ready = item
            self._changed.notify_all()
            return True


class _NotSentError(Exception):
    """The run ended before its first batch was to be sent (no lease, or no broker)."""


class _LostLeaseError(Exception):
    """The replay was deleted (cancelled), re-created, or taken by another run."""


class ReplayRunner:
    def __init__(
        self,
        replays: Resources[rp.Replay],
        load_config: Callable[[str, str], BrokerConfig | None],
        send: Callable[[str, list[tuple[str, str | None]]], None],
        claims: Claims,
        blobs: Blobs,
        listing: BlobListing,
        metrics: Metrics,
        options: RunnerOptions,
        clock: Callable[[], datetime] = utcnow,
        monotonic: Callable[[], float] = time.monotonic,
        process_send: Callable[[int], _Send] | None = None,
    ) -> None:
        self._replays = replays
        self._load = load_config
        self._send_all = send  # ingress.send_in_batches: ingress's batches and retries
        # The same over n sender processes (the real SQS adapter only: a fake cannot travel to
        # another process); None: none can be made, threads send.
        self._process_send = process_send
        self._claims = claims
        self._blobs = blobs
        self._listing = listing
        self._metrics = metrics
        self._options = options
        self._clock = clock
        self._monotonic = monotonic
        self._owner = str(uuid.uuid4())
        self._work = threading.Event()
        self._pool: ThreadPoolExecutor | None = None  # made at the first concurrent send
        self.unfinished = 0  # after the last run_pending: replays it left unfinished

    def wake(self) -> None:
        """A replay was created: a runner waiting in ``wait_for_work`` runs at once."""
        self._work.set()

    def wait_for_work(self, timeout: float) -> bool:
        woken = self._work.wait(timeout)
        self._work.clear()
        return woken

    def run_pending(self, budget_s: float) -> list[str]:
        """Run every unfinished replay in turn within ``budget_s``; the ones finished now."""
        deadline = self._monotonic() + budget_s
        done: list[str] = []
        unfinished = [s for s in self._replays.list() if not rp.is_finished(s.state)]
        self.unfinished = len(unfinished)
        for stored in unfinished:
            left = deadline - self._monotonic()
            if left <= 0:
                break
            replay = stored.resource
            try:
                if self.run(replay.namespace, replay.broker, replay.short_name, left):
                    done.append(f"{replay.namespace}/{replay.name}")
                    self.unfinished -= 1
            except BrokerError as exc:  # retried by the next run, from its checkpoint
                log.warning("replay %s/%s: %s", replay.namespace, replay.name, exc.detail)
                self._metrics.count("replay_error_count", {"namespace": replay.namespace})
            except Exception:  # a bug must not stop the other replays; retried next run
                log.exception("replay %s/%s failed", replay.namespace, replay.name)
                self._metrics.count("replay_error_count", {"namespace": replay.namespace})
        return done

    def run(self, namespace: str, broker: str, name: str, budget_s: float) -> bool:
        """Advance one replay for at most about ``budget_s`` seconds (plus one batch); True when
        it is finished (succeeded, failed or cancelled)."""
        finished = self._advance(namespace, broker, name, budget_s)
        if self._options.freeze_heap:
            # Once per process, after a run that ended normally: its batches are gone by now
            # (a failed run's exception would hold them, and they would stay frozen).
            heap.settle()
        return finished

    def _advance(self, namespace: str, broker: str, name: str, budget_s: float) -> bool:
        deadline = self._monotonic() + budget_s
        stored = self._replays.get(namespace, rp.store_name(broker, name))
        if stored is None:
            return True  # deleted: cancelled
        if rp.is_finished(stored.state):
            return True
        now = self._clock()
        ready_at = stored.resource.end_time + timedelta(seconds=self._options.settle_seconds)
        if now < ready_at:
            self._note_waiting(stored, ready_at)
            return False
        # The archive is read from the stored position at once, beside taking the lease and
        # loading the triggers; nothing is made into messages or sent before both are done.
        plan: Future[tuple[list[Route], Filter | None]] = Future()
        ahead = self._read_ahead(stored.resource, stored.state, plan, deadline)
        try:
            leased = self._acquire(stored, now)
            if leased is None:
                return False
            return self._run(leased, ahead, plan, deadline)
        except _LostLeaseError:
            log.info("replay %s/%s stopped: cancelled or taken over", namespace, name)
            return True
        finally:
            if not plan.done():
                plan.set_exception(_NotSentError())  # the reading stops at its first batch
            ahead.stop()  # what it read beyond the last checkpoint is read again next run

    # ---- the lease ------------------------------------------------------------------------------

    def _acquire(self, stored: Stored[rp.Replay], now: datetime) -> Stored[rp.Replay] | None:
        state = stored.state
        until = state.get("lease_until")
        if until and state.get("lease_owner") != self._owner and rp.parse_time(str(until)) > now:
            return None  # another run holds it
        new = dict(state)
        new.update(
            phase=rp.RUNNING,
            lease_owner=self._owner,
            lease_until=rfc3339(now + timedelta(seconds=self._options.lease_seconds)),
            message="",
        )
        new.setdefault("started_at", rfc3339(now))
        try:
            return self._replays.put(stored.resource, new, stored.status, stored.version)
        except ConflictError:
            return None

    def _note_waiting(self, stored: Stored[rp.Replay], ready_at: datetime) -> None:
        message = (
            f"Waiting for the archive to hold every record before {stored.resource.end}: "
            f"starts at {rfc3339(ready_at)}."
        )
        if stored.state.get("message") != message:
            self._replays.with_state(stored, {**stored.state, "message": message})

    def _checkpoint(self, stored: Stored[rp.Replay], state: dict[str, Any]) -> Stored[rp.Replay]:
        """Write ``state``; a concurrent write of the status alone (a GET remembering a
        condition's transition) is merged, anything else means the run lost the replay."""
        for _ in range(3):
            try:
                return self._replays.put(stored.resource, state, stored.status, stored.version)
            except ConflictError:
                fresh = self._replays.get(stored.namespace, stored.name)
                if (
                    fresh is None
                    or fresh.resource.uid != stored.resource.uid
                    or fresh.state.get("lease_owner") != self._owner
                    or fresh.state.get("key") != stored.state.get("key")
                    or fresh.state.get("offset") != stored.state.get("offset")
                ):
                    raise _LostLeaseError() from None
                stored = fresh
        raise _LostLeaseError()

    # ---- the work -------------------------------------------------------------------------------

    def _read_ahead(
        self,
        replay: rp.Replay,
        state: Mapping[str, Any],
        plan: Future[tuple[list[Route], Filter | None]],
        deadline: float,
    ) -> _ReadAhead:
        position = reader.Position(str(state.get("key", "")), int(state.get("offset", 0)))
        cursor = _Cursor(self._objects(replay, position))

        def read(after: reader.Position) -> tuple[_Batch, _Messages]:
            batch = self._next_batch(replay, cursor, after)
            routes, extra = plan.result()
            return batch, self._messages(replay, routes, extra, batch)

        return _ReadAhead(read, position, lambda: self._monotonic() < deadline)

    def _run(
        self,
        stored: Stored[rp.Replay],
        ahead: _ReadAhead,
        plan: Future[tuple[list[Route], Filter | None]],
        deadline: float,
    ) -> bool:
        replay = stored.resource
        config = self._load(replay.namespace, replay.broker)
        if config is None:
            self._finish(stored, rp.FAILED, "BrokerDoesNotExist", "The broker was deleted.")
            return True
        routes = [r for r in config.routes if r.ready]
        if replay.triggers:
            by_name = {r.name: r for r in routes}
            missing = [t for t in replay.triggers if t not in by_name]
            if missing:
                names = ", ".join(f'"{t}"' for t in missing)
                self._finish(stored, rp.FAILED, "TriggerNotFound", f"No trigger(s) {names}.")
                return True
            routes = [by_name[t] for t in replay.triggers]
        extra: Filter | None = build_filter(None, replay.filters) if replay.filters else None
        plan.set_result((routes, extra))
        state = dict(stored.state)
        # The batches that follow are read and made into messages on a thread of their own
        # while this one's calls are in flight and it is checkpointed; each is sent only once
        # the one before is checkpointed (a crash re-sends at most one batch).
        while True:
            batch, messages = ahead.next()
            sent, missing_payloads = self._start(replay, messages)()
            if not batch.end:
                batch = ahead.merged_end(batch)  # the range ended just after: one write
            state.update(
                key=batch.position.key,
                offset=batch.position.offset,
                events_read=int(state.get("events_read", 0)) + batch.read,
                events_enqueued=int(state.get("events_enqueued", 0)) + sent,
            )
            if missing_payloads:
                state["events_missing"] = int(state.get("events_missing", 0)) + missing_payloads
            if batch.events:
                state["last_arrival"] = str(batch.events[-1]["at"])
            if batch.end:
                state.update(
                    phase=rp.SUCCEEDED_PHASE,
                    reason="Completed",
                    message="",
                    completed_at=rfc3339(self._clock()),
                    lease_until="",
                )
                self._checkpoint(stored, state)
                return True
            if self._monotonic() >= deadline:
                state["lease_until"] = ""  # the next run may start at once
                self._checkpoint(stored, state)
                return False
            stored = self._checkpoint(stored, state)

    def _finish(self, stored: Stored[rp.Replay], phase: str, reason: str, message: str) -> None:
        state = {
            **stored.state,
            "phase": phase,
            "reason": reason,
            "message": message,
            "completed_at": rfc3339(self._clock()),
            "lease_until": "",
        }
        self._checkpoint(stored, state)

    def _objects(
        self, replay: rp.Replay, position: reader.Position
    ) -> Iterator[tuple[str, int, tuple[Mapping[str, Any] | None, ...]]]:
        """``(key, first offset, records)`` of each archive object from ``position`` to the end
        of the range that has records from that offset on."""
        bucket, prefix = self._options.archive_bucket, self._options.archive_prefix
        last = reader.last_hour(replay.end_time)
        after = position.key or reader.first_key_bound(prefix, replay.start_time)
        if position.key:
            records = self._object(position.key)
            if position.offset < len(records):
                yield position.key, position.offset, records
        while True:
            keys = self._listing.list_keys(bucket, prefix, after, LIST_PAGE)
            for key in keys:
                hour = reader.hour_of_key(key)
                if hour is None:
                    log.warning("replay: skipping s3://%s/%s (not an archive key)", bucket, key)
                    continue
                if hour > last:
                    return
                records = self._object(key)
                if records:
                    yield key, 0, records
            if len(keys) < LIST_PAGE:
                return
            after = keys[-1]

    def _object(self, key: str) -> tuple[Mapping[str, Any] | None, ...]:
        blob = self._blobs.get(self._options.archive_bucket, key)
        try:
            return reader.object_records(key, blob).records
        except ValueError as exc:
            log.warning("replay: unreadable archive object %s: %s", key, exc)
            self._metrics.count("replay_unreadable_object_count", {})
            return ()

    def _next_batch(self, replay: rp.Replay, cursor: _Cursor, position: reader.Position) -> _Batch:
        """The next batch from ``cursor`` (which stands at ``position``): ``batch_events``
        selected records, or fewer at the range's end. A batch spans archive objects (fewer
        checkpoints), but a long stretch of other brokers' records still ends one at an
        object's end: it is not read twice."""
        events: list[Mapping[str, Any]] = []
        read = 0
        scanned = 0  # records of the batch, selected or not
        limit = max(1, self._options.batch_events)
        namespace, broker, start, end = replay.namespace, replay.broker, replay.start, replay.end
        selected = reader.selected
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
                if not selected(record, namespace, broker, start, end):
                    continue
                read += 1
                events.append(record)
                if len(events) >= limit:
                    cursor.offset = i
                    return _Batch(events, read, reader.Position(key, i), end=False)
            cursor.offset = n
            if n and scanned >= limit:  # the end of an object is a checkpoint
                return _Batch(events, read, reader.Position(key, n), end=False)
            following = next(cursor.objects, None)
            if following is None:
                last = reader.Position(key, n) if scanned else position
                return _Batch(events, read, last, end=True)
            cursor.key, cursor.offset, cursor.records = following

    def _event(self, record: Mapping[str, Any]) -> CloudEvent | None:
        """The archived event, whole: from the record, or from its ``dataref`` when it was
        archived by reference. None (counted) when the record or its payload cannot be read."""
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

    def _messages(
        self,
        replay: rp.Replay,
        routes: Sequence[Route],
        extra: Filter | None,
        batch: _Batch,
        grouped: bool = True,
    ) -> _Messages:
        """A batch's messages per queue, and the number of its events whose payload is gone. A
        standard queue's events go in packs, but one too large for a pack (a claim check, or
        close to it) goes alone; a FIFO queue's each alone, in order.

        ``grouped`` (the default; False: event by event, the reference the tests compare with):
        when every event goes to every route in packs, up to a pack's worth of consecutive
        archived events is written in one msgspec call (``_Run``), and the per-event path
        takes any group whose text is not certainly what it would have written. The messages
        are the same either way."""
        per_queue: dict[str, list[_Message]] = {}
        packers: dict[str, _Packer] = {}
        missing = 0
        name = replay.short_name

        def packer(route: Route) -> _Packer:
            found = packers.get(route.queue)
            if found is None:
                fields = pack_fields(replay.namespace, replay.broker, route.name, {})
                found = packers[route.queue] = _Packer(
                    pack_head(replay.namespace, replay.broker, route.name, {}),
                    per_queue.setdefault(route.queue, []),
                    fields,
                )
            return found

        # Every event to every route, in packs: the archived JSON object goes on without being
        # made a CloudEvent (it is what ingress accepted; its required attributes are checked).
        every = (
            self._options.packs
            and extra is None
            and all(type(r.filter) is MatchAll and not names.is_fifo(r.queue) for r in routes)
        )

        def one(record: Mapping[str, Any]) -> None:
            nonlocal missing
            if every and "dataref" not in record:
                raw = _pack_text_undecoded(record, name)
                if raw:
                    for route in routes:
                        packer(route).add(raw)
                    return
            event = self._event(record)
            if event is None:
                missing += 1
                return
            if extra is not None and not extra.matches(event):
                return
            replayed: CloudEvent | None = None
            text: str | None = None  # the event's JSON in a pack; "" when it goes alone
            claimed: dict[int, Any] = {}
            for route in routes:
                if not route.filter.matches(event):
                    continue
                fifo = names.is_fifo(route.queue)
                if not fifo and self._options.packs:
                    if text is None:
                        text = _pack_text(record, event, name)
                    if text:
                        packer(route).add(text)
                        continue
                if replayed is None:
                    replayed = event.replace_attributes({rp.EXTENSION: name})
                body = self._claims.message_body(
                    replay.namespace, replay.broker, route.name, replayed, {}, claimed
                )
                group = ordering.group_for(fifo, event.get(ordering.PARTITION_KEY))
                per_queue.setdefault(route.queue, []).append((body, group, 1))

        # Routes sharing a queue (not made by the API: a trigger has its own) would share a
        # packer, which takes each event's text once per route in turn: event by event.
        distinct = len({r.queue for r in routes}) == len(routes)
        if not (grouped and every and _encode is not None and routes and distinct):
            for record in batch.events:
                one(record)
        else:
            self._grouped(batch.events, routes, name, packer, one)
        for filled in packers.values():
            filled.flush()
        return per_queue, missing

    def _grouped(
        self,
        records: Sequence[Mapping[str, Any]],
        routes: Sequence[Route],
        name: str,
        packer: Callable[[Route], _Packer],
        one: Callable[[Mapping[str, Any]], None],
    ) -> None:
        """``one`` of each record in order, but consecutive archived events with their required
        attributes (non-empty strings) in runs of about a pack's worth, added to every route's
        packer at once (``_Run``)."""
        extension = rp.EXTENSION
        # No text is shorter: each has the required attributes and the extension.
        shortest = _SHORTEST_TEXT + len(name)
        want = PACK_MAX_EVENTS  # the run's length: about what fills a pack
        docs: list[dict[str, Any]] = []  # the run so far: the replayed events before ``end``

        def drain(end: int) -> None:
            nonlocal want, docs
            first = packer(routes[0])  # a run is written as this packer's pack (``_Run``)
            run = _Run.of(docs, shortest, first.head, first.fields)
            if run is None:  # not certainly what the per-event path writes: it decides
                for index in range(end - len(docs), end):
                    one(records[index])
            else:
                for route in routes:
                    packer(route).add_run(run)
                # The next run about fills the first route's pack: few runs are cut.
                want = first.room_for(run.count, run.size)
            docs = []

        for end, record in enumerate(records, 1):
            if "dataref" not in record:
                doc = record["event"]
                s, i, so, ty = (
                    doc.get("specversion"),
                    doc.get("id"),
                    doc.get("source"),
                    doc.get("type"),
                )
                if (
                    type(s) is str
                    and type(i) is str
                    and type(so) is str
                    and type(ty) is str
                    and s
                    and i
                    and so
                    and ty
                    and type(doc) is dict  # parse_json's: one that can take the extension
                ):
                    # In place (the record is the batch's own, read for it): what
                    # ``{**doc, extension: name}`` would be, without a copy. Every other path
                    # adds the same extension with the same value to what it reads.
                    doc[extension] = name
                    docs.append(doc)
                    if len(docs) >= want:
                        drain(end)
                    continue
            if docs:  # the run goes first: the per-queue order stays the records' order
                drain(end - 1)
            one(record)
        if docs:
            drain(len(records))

    def _start(self, replay: rp.Replay, messages: _Messages) -> Callable[[], tuple[int, int]]:
        """Start sending a batch's messages; what waits for the calls and answers (events sent,
        one per event and trigger; events whose payload is gone), raising the first failure."""
        per_queue, missing = messages
        calls = self._send_queues(per_queue)

        def finish() -> tuple[int, int]:
            sent = 0
            dims = {"namespace": replay.namespace, "broker": replay.broker}
            for queue, count in calls():
                if count is None:
                    # The trigger was deleted during the replay: as at ingress, its events are
                    # dropped.
                    log.warning("replay %s: queue %s is gone (trigger deleted)", replay.name, queue)
                    continue
                sent += count
            if missing:
                self._metrics.count("replay_missing_payload_count", dims, missing)
            if sent:
                self._metrics.count("replay_enqueued_count", dims, sent)
            return sent, missing

        return finish

    def _send_queues(
        self, per_queue: dict[str, list[_Message]]
    ) -> Callable[[], list[tuple[str, int | None]]]:
        """Send every queue's messages; what waits for the calls and answers (queue, events
        sent) or (queue, None) for a queue that is gone. A standard queue's messages go in
        chunks of 10, ``send_concurrency`` calls in flight (in the background: the caller reads
        on meanwhile); a FIFO queue's in one sequential task (its groups keep their order).
        Every call has ended when the answer comes; the first failure (UnavailableError: no
        checkpoint, the batch is sent again) is raised then, so nothing is checkpointed past a
        failed send."""
        tasks: list[tuple[str, list[_Message]]] = []
        for queue, bodies in per_queue.items():
            if names.is_fifo(queue):
                tasks.append((queue, bodies))
            else:
                tasks.extend(
                    (queue, bodies[i : i + SQS_BATCH]) for i in range(0, len(bodies), SQS_BATCH)
                )
        if not tasks or self._options.send_concurrency <= 1:
            done = [(queue, self._send_one(queue, bodies)) for queue, bodies in tasks]
            return lambda: done
        if self._pool is None:
            self._pool = ThreadPoolExecutor(
                self._options.send_concurrency, thread_name_prefix="replay-send"
            )
        futures: list[tuple[str, Future[int | None]]] = [
            (queue, self._pool.submit(self._send_one, queue, bodies)) for queue, bodies in tasks
        ]
        return lambda: _collect(futures)

    def _sender(self, queue: str) -> _Send:
        processes = self._options.send_processes
        if processes > 0 and self._process_send is not None and not names.is_fifo(queue):
            return self._process_send(processes)
        return self._send_all

    def _send_one(self, queue: str, messages: list[_Message]) -> int | None:
        try:  # UnavailableError: raised, no checkpoint
            self._sender(queue)(queue, [(body, group) for body, group, _ in messages])
        except NotFoundError:
            return None
        return sum(n for _, _, n in messages)


def _collect(futures: list[tuple[str, Future[int | None]]]) -> list[tuple[str, int | None]]:
    """Every call's answer, per queue; the first failure raised once all have ended."""
    counts: dict[str, int | None] = {}
    error: BaseException | None = None
    for queue, future in futures:
        try:
            count = future.result()
        except BaseException as exc:  # raised below, after every call has ended
            error = error or exc
            continue
        if count is None or counts.get(queue, 0) is None:
            counts[queue] = None
        else:
            counts[queue] = int(counts.get(queue) or 0) + count
    if error is not None:
        raise error
    return list(counts.items())


_Send = Callable[[str, list[tuple[str, str | None]]], None]  # (queue, [(body, FIFO group)])
_Message = tuple[str, str | None, int]  # (body, FIFO group, events in it)
_Messages = tuple[dict[str, list[_Message]], int]  # (per queue, events whose payload is gone)


class _Packer:
    """Fills packs of one trigger's events up to their bounds, appending each full one to
    ``out`` as a message."""

    def __init__(
        self, head: str, out: list[_Message], fields: dict[str, Any] | None = None
    ) -> None:
        self.head = head
        self.fields = fields  # ``head``'s fields (sqs_message.pack_fields), when known
        self._room = PACK_MAX_BYTES - pack_overhead(head)
        self._out = out
        # Events' texts, runs of them joined by commas, or a run whole (its ``text``).
        self._texts: list[str | _Run] = []
        self._count = 0  # events in ``_texts``
        self._size = 0

    def add(self, text: str) -> None:
        n = utf8_size(text) + 1  # and its comma
        if self._count and (self._count == PACK_MAX_EVENTS or self._size + n > self._room):
            self.flush()
        self._texts.append(text)
        self._count += 1
        self._size += n

    def room_for(self, count: int, size: int) -> int:
        """About how many more texts like these (``count`` of them, ``size`` in all) the
        current pack takes; when it is full, a whole pack's worth."""
        fits = min(PACK_MAX_EVENTS - self._count, (self._room - self._size) * count // size)
        if fits < 1:
            fits = min(PACK_MAX_EVENTS, self._room * count // size)
        return max(1, fits)

    def add_run(self, run: _Run) -> None:
        """``add`` of each of the run's texts, in order, with the same packs as a result."""
        count, size, room = run.count, run.size, self._room
        if self._count + count <= PACK_MAX_EVENTS and self._size + size <= room:
            self._texts.append(run)  # no pack fills before its last text
            self._count += count
            self._size += size
            return
        if (
            count <= PACK_MAX_EVENTS
            and size <= room
            and (self._count == PACK_MAX_EVENTS or self._size + run.first() + 1 > room)
        ):
            self.flush()  # the pack fills before its first text, and the run fits the next
            self._texts.append(run)
            self._count, self._size = count, size
            return
        # Packs fill inside the run: ``add``'s rule, text by text, cutting the run there.
        text = run.text
        start = at = 0  # where the part of the run in the current pack starts; the next text
        for length in run.lengths():
            n = length + 1
            if self._count and (self._count == PACK_MAX_EVENTS or self._size + n > room):
                if at > start:
                    self._texts.append(text[start : at - 1])  # without the comma
                self.flush()
                start = at
            self._count += 1
            self._size += n
            at += n
        if at > start:
            self._texts.append(text[start:])

    def flush(self) -> None:
        texts = self._texts
        if texts:
            first = texts[0]
            if len(texts) == 1 and type(first) is _Run:  # the most common pack: one run
                # Written as this pack by msgspec (ASCII: nothing for encode_pack to escape),
                # or, for another trigger's head, from its list.
                text = first.pack_of(self.head)
            else:
                # A run's texts are joined as encode_pack joins its events: the same pack.
                joined = [t if type(t) is str else t.text for t in texts]  # type: ignore[union-attr]
                text = encode_pack(self.head, joined)
            self._out.append((text, None, self._count))
            self._texts, self._count, self._size = [], 0, 0


class _Run:
    """Consecutive replayed events' JSON texts, written by one msgspec call: ``text`` is what
    ``","".join`` of their ``_pack_text_undecoded`` would be, and ``listed`` the JSON list of
    them. Only made (``of``) when that is certain: msgspec wrote every text (it refuses a lone
    surrogate), each is ASCII (so its length is its size) without ``null`` (msgspec writes an
    infinite float as null, which ``dumps_ascii`` leaves to ``dumps_compact`` to refuse), and
    each fits a pack. Given a pack's head and its fields, msgspec writes the whole pack at once
    (``pack_of`` that head is then that text, not a copy of it); otherwise the list alone."""

    __slots__ = ("_docs", "_head", "_hi", "_lengths", "_lo", "_source", "count", "size")

    def __init__(self, source: str, lo: int, hi: int, head: str | None, docs: list[Any]) -> None:
        # ``source[lo:hi]`` is the texts; ``source[lo - 1 : hi + 1]`` their list; with ``head``,
        # ``source`` is ``head + texts + "]}"``: the pack.
        self._source, self._lo, self._hi, self._head = source, lo, hi, head
        self.count = len(docs)
        self.size = hi - lo + 1  # the texts' sizes and a comma each, as ``_Packer`` counts
        self._docs = docs
        self._lengths: list[int] | None = None

    @property
    def text(self) -> str:
        return self._source[self._lo : self._hi]

    @property
    def listed(self) -> str:
        return self._source[self._lo - 1 : self._hi + 1]

    def pack_of(self, head: str) -> str:
        """The pack of these events alone after ``head``: ``encode_pack(head, [text])``."""
        if head == self._head:
            return self._source
        return encode_pack_listed(head, self.listed)

    @classmethod
    def of(
        cls,
        docs: list[dict[str, Any]],
        shortest: int,
        head: str | None = None,
        fields: dict[str, Any] | None = None,
    ) -> _Run | None:
        """The run of ``docs`` (none of whose texts is shorter than ``shortest``), or None;
        written as the pack of ``head`` when its ``fields`` are given."""
        assert _encode is not None
        out: bytes | None = None
        lo = 1
        try:
            if head is not None and fields is not None:
                out = _encode({**fields, "pack": docs})
                lo = len(head)
                # msgspec wrote the head's fields as pack_head did (it does, for the ASCII names
                # of these): else the list alone.
                if not (out.endswith(b"]}") and out[:lo] == head.encode()):
                    out, lo = None, 1
            if out is None:
                out, head = _encode(docs), None
        except (TypeError, ValueError, OverflowError):  # as dumps_ascii: the per-event path
            return None
        # As dumps_ascii checks each text: the "[", "," and "]" around them add no "null".
        if not out.isascii() or _NULL.search(out, lo) is not None:
            return None
        source = out.decode("ascii")
        run = cls(source, lo, len(source) - (2 if head is not None else 1), head, docs)
        # The longest text is at most the run less the others at their shortest; measured only
        # when that bound is past a pack's.
        longest = run.size - 1 - (run.count - 1) * (shortest + 1)
        if longest > _PACKABLE_BYTES and max(run.lengths()) > _PACKABLE_BYTES:
            return None  # one goes alone: the per-event path sends it
        return run

    def first(self) -> int:
        """The length of the first text."""
        if self._lengths is not None:
            return self._lengths[0]
        assert _encode is not None
        return len(_encode(self._docs[0]))

    def lengths(self) -> list[int]:
        """Each text's length (msgspec writes a list's items as it writes each alone)."""
        if self._lengths is None:
            assert _encode is not None
            self._lengths = [len(_encode(doc)) for doc in self._docs]
            if sum(self._lengths) + self.count - 1 != self.size - 1:
                raise AssertionError("msgspec wrote a list's items unlike each alone")
        return self._lengths


# ``bytes.__contains__`` scans for b"null" at half the speed of a compiled pattern.
_NULL = re.compile(b"null")


def _pack_text_undecoded(record: Mapping[str, Any], name: str) -> str:
    """``_pack_text`` of an event archived whole, without decoding it: "" when it is too large
    for a pack or lacks a required attribute (then it is decoded, and counted as missing)."""
    doc = record["event"]
    for attribute in _REQUIRED:
        value = doc.get(attribute)
        if type(value) is not str or not value:
            return ""
    replayed = {**doc, rp.EXTENSION: name}
    text = dumps_ascii(replayed)  # most events: ASCII, their length their size
    if text is not None:
        return text if len(text) <= _PACKABLE_BYTES else ""
    text = sqs_text(dumps_compact(replayed))  # measured as it is sent
    return text if utf8_size(text) <= _PACKABLE_BYTES else ""


_REQUIRED = ("specversion", "id", "source", "type")


# An event's text in a pack is at most this long (a pack of one, with the longest names); a
# longer one goes alone.
_PACKABLE_BYTES = PACK_MAX_BYTES - 1024
# The shortest text of an event with its required attributes, less its replay's name.
_SHORTEST_TEXT = len(
    dumps_compact({"specversion": "_", "id": "_", "source": "_", "type": "_", rp.EXTENSION: ""})
)


def _pack_text(record: Mapping[str, Any], event: CloudEvent, name: str) -> str:
    """The replayed event's JSON text for a pack ("" when it is too large for one): the archived
    JSON carried through (it is ``codec.to_json`` of the event ingress accepted) with the
    extension added, not the event decoded and encoded again; an event archived by reference
    is encoded from its payload."""
    by_reference = isinstance(record.get("dataref"), str)
    doc = codec.to_json(event) if by_reference else dict(record["event"])
    doc[rp.EXTENSION] = name
    text = sqs_text(dumps_compact(doc))  # measured as it is sent
    return (
        text if len(text) <= _PACKABLE_BYTES // 4 or len(text.encode()) <= _PACKABLE_BYTES else ""
    )
