"""The replay runner (docs/replay.md): reads the archive back into the chosen triggers' queues.

The runner works in bounded runs (one Lambda invocation, or a turn of the local runtime's thread).
``run_pending`` takes the unfinished replays in a fair order (round-robin across namespaces, the
oldest first within one: ``replay.run_order``) and gives each an equal share of what is left of
its budget. A run takes the replay's lease, then repeats: read the next batch (≤
``batch_events`` selected events, across archive objects: replay_reading.py), make it into
messages (replay_packing.py), send them, checkpoint the position in the replay's stored state
with optimistic versioning. A batch's SendMessageBatch calls (10 messages each) run
``send_concurrency`` at a time: a standard queue's in any order, a FIFO queue's one after the
other (its groups' order), different queues side by side; the next batch is read meanwhile, and
the checkpoint waits for all of them. A crash between a send and its checkpoint re-sends that one
batch on the next run; nothing is skipped. A DELETE removes the replay: the next checkpoint finds
it gone and the run stops.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from chalicelib import logs
from chalicelib.core import archive_reader as reader
from chalicelib.core import names
from chalicelib.core.archive import rfc3339
from chalicelib.core.clock import utcnow
from chalicelib.core.errors import BrokerError, ConflictError, NotFoundError
from chalicelib.core.filtering.filters import Filter, build_filter
from chalicelib.core.resources import replay as rp
from chalicelib.ports import BlobListing, Blobs
from chalicelib.services.claims import Claims
from chalicelib.services.metrics import Metrics
from chalicelib.services.replay_packing import Message, Messages, batch_messages
from chalicelib.services.replay_reading import ArchiveReader, Batch, ReadAhead
from chalicelib.services.resources import Resources, Stored
from chalicelib.services.routing import BrokerConfig, Route

log = logs.get("replays")

# The replay batch, the checkpoint unit: a crash re-sends at most this many events per trigger.
BATCH_EVENTS = 1000
SEND_CONCURRENCY = 4  # SendMessageBatch calls in flight during a batch
SQS_BATCH = 10  # entries per SendMessageBatch call

Send = Callable[[str, list[tuple[str, str | None]]], None]  # (queue, [(body, FIFO group)])


@dataclass(frozen=True)
class RunnerOptions:
    archive_bucket: str
    archive_prefix: str = "archive/"
    # How long after ``spec.to`` the archive holds every record of the range (Firehose's buffer
    # interval plus a margin; the local runtime's 1 s archive batching plus a margin).
    settle_seconds: float = 2.0
    batch_events: int = BATCH_EVENTS
    send_concurrency: int = SEND_CONCURRENCY
    lease_seconds: float = 960.0  # longer than any run: a crashed run's lease expires after it


class _NotSentError(Exception):
    """The run ended before its first batch was to be sent (no lease, or no broker)."""


class _LostLeaseError(Exception):
    """The replay was deleted (cancelled), re-created, or taken by another run."""


_Plan = Future[tuple[list[Route], Filter | None]]


class ReplayRunner:
    def __init__(
        self,
        replays: Resources[rp.Replay],
        load_config: Callable[[str, str], BrokerConfig | None],
        send: Send,
        claims: Claims,
        blobs: Blobs,
        listing: BlobListing,
        metrics: Metrics,
        options: RunnerOptions,
        clock: Callable[[], datetime] = utcnow,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._replays = replays
        self._load = load_config
        self._send = send  # ingress.send_in_batches: ingress's batches and retries
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
        """Run the unfinished replays within ``budget_s``, in ``rp.run_order`` (round-robin
        across namespaces, oldest first within one), each for an equal share of what is left:
        one namespace's many long replays cannot hold the runner from the others'. The ones
        finished now."""
        deadline = self._monotonic() + budget_s
        done: list[str] = []
        unfinished = [s for s in self._replays.list() if not rp.is_finished(s.state)]
        order = rp.run_order([(s.resource, s.state) for s in unfinished])
        self.unfinished = len(order)
        for turn, replay in enumerate(order):
            left = deadline - self._monotonic()
            if left <= 0:
                break
            share = left / (len(order) - turn)
            try:
                if self.run(replay.namespace, replay.broker, replay.short_name, share):
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
        plan: _Plan = Future()
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
            ran_at=rfc3339(now),  # its namespace's turn in rp.run_order
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
        self, replay: rp.Replay, state: Mapping[str, Any], plan: _Plan, deadline: float
    ) -> ReadAhead[Messages]:
        options = self._options
        archive = ArchiveReader(
            self._blobs,
            self._listing,
            self._metrics,
            options.archive_bucket,
            options.archive_prefix,
            options.batch_events,
        )
        position = reader.Position(str(state.get("key", "")), int(state.get("offset", 0)))
        cursor = archive.cursor(replay, position)

        def read(after: reader.Position) -> tuple[Batch, Messages]:
            batch = archive.next_batch(replay, cursor, after)
            routes, extra = plan.result()
            return batch, batch_messages(replay, routes, extra, batch, archive.event, self._claims)

        return ReadAhead(read, position, lambda: self._monotonic() < deadline)

    def _run(
        self,
        stored: Stored[rp.Replay],
        ahead: ReadAhead[Messages],
        plan: _Plan,
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
                listed = ", ".join(f'"{t}"' for t in missing)
                self._finish(stored, rp.FAILED, "TriggerNotFound", f"No trigger(s) {listed}.")
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

    # ---- sending --------------------------------------------------------------------------------

    def _start(self, replay: rp.Replay, messages: Messages) -> Callable[[], tuple[int, int]]:
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
        self, per_queue: dict[str, list[Message]]
    ) -> Callable[[], list[tuple[str, int | None]]]:
        """Send every queue's messages; what waits for the calls and answers (queue, events
        sent) or (queue, None) for a queue that is gone. A standard queue's messages go in
        chunks of 10, ``send_concurrency`` calls in flight (in the background: the caller reads
        on meanwhile); a FIFO queue's in one sequential task (its groups keep their order).
        Every call has ended when the answer comes; the first failure (UnavailableError: no
        checkpoint, the batch is sent again) is raised then, so nothing is checkpointed past a
        failed send."""
        tasks: list[tuple[str, list[Message]]] = []
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

    def _send_one(self, queue: str, messages: list[Message]) -> int | None:
        try:  # UnavailableError: raised, no checkpoint
            self._send(queue, [(body, group) for body, group, _ in messages])
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
