"""Delivery (DESIGN.md §2.3): drain a queue, send each event on, act on the answer. One engine for
two roles (``services/delivery_roles.py``): a trigger's subscriber, and its dead-letter sink."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from operator import attrgetter
from typing import Any, NamedTuple, Protocol

from aws_lambda_powertools.utilities.batch import (
    BatchProcessor,
    EventType,
    process_partial_response,
)

from chalicelib import logs
from chalicelib.core import archive, names
from chalicelib.core.clock import utcnow
from chalicelib.core.cloudevents import codec
from chalicelib.core.cloudevents.event import CloudEvent
from chalicelib.core.cloudevents.kafka_binding import encode_binary_record, encode_structured_record
from chalicelib.core.cloudevents.sqs_message import (
    ATTEMPTS_ATTRIBUTE,
    NOT_BEFORE_ATTRIBUTE,
    QueuedEvent,
    attempts_made,
    call_chunks,
    decode_message,
    decode_messages,
    encode_message,
    not_before,
    split_pack,
)
from chalicelib.core.delivery import ordering, policy
from chalicelib.core.delivery.outcomes import Attempt, Outcome
from chalicelib.core.delivery.pacing import Pacer
from chalicelib.core.errors import UnavailableError, ValidationError
from chalicelib.core.resources.delivery_spec import kafka_target
from chalicelib.core.transforms import TransformError
from chalicelib.core.transforms import apply as apply_transform
from chalicelib.ports import (
    Archive,
    HttpResponse,
    HttpSender,
    KafkaPublisher,
    OutgoingMessage,
    PublishResult,
    Queues,
    RateLimiter,
)
from chalicelib.services import tracing
from chalicelib.services.archiver import Archiver
from chalicelib.services.claims import Claims
from chalicelib.services.flow_control import RateGate
from chalicelib.services.ingress import TTL_ATTRIBUTE
from chalicelib.services.metrics import Metrics, status_class
from chalicelib.services.routing import ConfigCache, Route

log = logs.get("delivery")

DEFAULT_ATTEMPT_TIMEOUT = 30.0
# An attempt that failed unexpectedly (an AWS call that failed past its retries, a claim check
# that could not be read) is tried again this much later, not after the queue's visibility timeout
# (six times the function's timeout: six minutes by default).
FAILURE_RETRY_SECONDS = 10
# A message kept for inspection and redrive is hidden for the longest visibility SQS allows.
KEEP_SECONDS = 43_200
# The longest DelaySeconds SQS takes: a retried event of a pack waits longer by a not-before.
MAX_DELAY_SECONDS = 900
# An event of a pack is sent only if its attempt can end this long before the invocation's end
# (its settling and the archive's write come after it); else it goes back to its queue untried,
# alone. A single message is never left so: every event makes progress.
PACK_SETTLE_SECONDS = 5.0
REQUEUE_FAILURE_METRIC = "requeue_failure_count"
# The archive (schema v1) and the metrics record an acknowledged Kafka publish as 202 Accepted: a
# success without a reply.
KAFKA_ACKNOWLEDGED = 202


class RetryLaterError(Exception):
    """Marks a record as a batch item failure (its visibility was already set)."""


class NoDeadLetterSinkError(RetryLaterError):
    """The dead-letter function got an event of a trigger without a sink: it stays in the DLQ."""


class UnreadableKeptError(RetryLaterError):
    """An unreadable message in a DLQ: hidden for KEEP_SECONDS, kept for inspection."""


class HeldBackError(RetryLaterError):
    """A FIFO record not tried because an earlier one of its group stays in the queue."""


@dataclass(frozen=True)
class DeliveryParts:
    """What both roles deliver with."""

    cache: ConfigCache
    queues: Queues
    claims: Claims
    sender: HttpSender
    kafka: KafkaPublisher | None
    metrics: Metrics
    archive: Archive
    archive_batch_seconds: float = 0.0
    archive_carry_seconds: float = 0.0
    max_attempt_timeout: float = 50.0
    clock: Callable[[], datetime] = utcnow
    # max-rate (docs/flow-control.md): the shared buckets (None: the annotation is not enforced),
    # how far ahead a never-tried event may wait for its token inside the invocation, and how far
    # a retried or ordered one (which cannot be copied back to its queue without losing count).
    rate_limiter: RateLimiter | None = None
    rate_horizon: float = 10.0
    rate_hold: float = 20.0
    sleep: Callable[[float], None] = time.sleep


class Destination(NamedTuple):
    """Where one trigger's events go, looked up once per batch."""

    route: Route
    target: str
    kafka: tuple[str, str] | None  # (bootstrap servers, topic) of a kafka:// target
    timeout: float  # seconds per attempt


class Job:
    """One record on its way through the passes of a batch (a plain class: one per event)."""

    event: CloudEvent | None = None
    headers: dict[str, str]
    body: bytes = b""
    sent: HttpResponse | PublishResult | None = None
    answer: Attempt | None = None
    error: Exception | None = None
    # A trigger whose subscriber is an EventTransform (docs/transforms.md): the event it sends
    # (``event`` stays the original: what a dead letter carries), or the attempt's answer decided
    # without sending (the transformed event as the reply; a transform error).
    outgoing: CloudEvent | None = None
    decided: Attempt | None = None
    # The record's index in its batch (``index`` numbers the batch's jobs: a pack gives several),
    # and whether the event came in a pack (docs/replay.md): then its retry, or its copy, is a
    # message of its own carrying its attempts, never the record.
    slot: int
    packed: bool = False
    # An event of a pack: the monotonic time its attempt must end by (None: no limit), and
    # whether it was left untried for want of time.
    until: float | None = None
    deferred: bool = False

    def __init__(
        self,
        index: int,
        record: Mapping[str, Any],
        queue: str,
        attempt: int,
        queued: QueuedEvent,
        destination: Destination,
    ) -> None:
        self.index, self.record, self.queue, self.attempt = index, record, queue, attempt
        self.queued, self.destination = queued, destination
        self.slot = index

    def single_body(self) -> str:
        """This event as a message of its own: the record's body, or the event alone when it
        came in a pack."""
        return encode_message(self.queued) if self.packed else str(self.record["body"])


class Role(Protocol):
    """What differs between delivering a trigger's events and its dead letters."""

    function: str  # the Lambda function, as archive_failure_count's dimension
    request_headers: Mapping[str, str]  # added to every HTTP request
    reads_replies: bool
    rate_limited: bool  # a trigger's max-rate applies (to its subscriber, not its sink)
    applies_transforms: bool  # a route's EventTransform applies (docs/transforms.md)
    # A pack (docs/replay.md) is split into single messages on its queue rather than delivered:
    # the dead-letter function does so with a pack the queue's redrive policy moved to the DLQ.
    unpacks: bool

    def target(self, route: Route) -> str:
        """The URI to deliver to; raises NoDeadLetterSinkError when there is none."""
        ...

    def reply(self, job: Job, reply: CloudEvent) -> None:
        """Ingest a subscriber's reply; raises UnavailableError when it cannot be stored."""
        ...

    def give_up(self, job: Job) -> RetryLaterError | None:
        """Act on a delivery that failed for good; the error to report if the message stays."""
        ...


def log_keys(job: Job) -> dict[str, Any]:
    """The keys of a log line about one delivery (chalicelib/logs.py): where it goes, the event,
    the attempt, and the W3C trace id it travels under (what the subscriber's traces show)."""
    queued, event = job.queued, job.event
    keys: dict[str, Any] = {
        "namespace": queued.namespace,
        "broker": queued.broker,
        "trigger": queued.trigger,
        "attempt": job.attempt,
        "message_id": job.record.get("messageId"),
    }
    if event is not None:
        keys["event_id"] = event.id
    # The event's trace: its distributed-tracing extension, else the traceparent header it is
    # sent with (the incoming trace continued, or a new one when none came in).
    sent: Mapping[str, str] = getattr(job, "headers", None) or {}  # set once the request is built
    extension = event.get("traceparent") if event is not None else None
    traceparent = extension or sent.get("traceparent") or queued.headers.get("traceparent")
    trace_id = tracing.trace_id(str(traceparent)) if traceparent else None
    if trace_id:
        keys["trace_id"] = trace_id
    return keys


def moved_message(record: Mapping[str, Any], body: str | None = None) -> OutgoingMessage:
    """A received record (or ``body`` in its place) as sent on to another queue of its trigger:
    on a FIFO queue, in the record's group, deduplicated by the record's id."""
    queue = _queue_of(record)
    text = record["body"] if body is None else body
    if not names.is_fifo(queue):
        return OutgoingMessage("0", text)
    return OutgoingMessage(
        "0",
        text,
        group_id=ordering.group_of(record.get("attributes") or {}),
        dedup_id=ordering.moved_dedup_id(str(record.get("messageId", ""))),
    )


def _queue_of(record: Mapping[str, Any]) -> str:
    return _queue_name(str(record.get("eventSourceARN", "")))


@lru_cache(maxsize=1024)
def _queue_name(arn: str) -> str:
    return arn.rsplit(":", 1)[-1]


class Delivery:
    def __init__(
        self, parts: DeliveryParts, role: Role, *, pool_size: int = 10, pacer: Pacer | None = None
    ) -> None:
        self._parts = parts
        self._role = role
        self._queues = parts.queues
        self._metrics = parts.metrics
        self._clock = parts.clock
        self._archiver = Archiver(
            parts.archive,
            parts.metrics,
            role.function,
            batch_seconds=parts.archive_batch_seconds,
            carry_seconds=parts.archive_carry_seconds,
        )
        self._pool = ThreadPoolExecutor(max_workers=pool_size, thread_name_prefix="deliver")
        self._pacer = pacer or Pacer(pool_size, time.monotonic)
        self._processors = threading.local()
        limiter = parts.rate_limiter if role.rate_limited else None
        self._rate = (
            None
            if limiter is None
            else RateGate(
                limiter,
                parts.queues,
                parts.metrics,
                horizon=parts.rate_horizon,
                hold=parts.rate_hold,
            )
        )

    # ---- the Lambda entry ---------------------------------------------------------------------

    def handle_sqs_event(self, event: Mapping[str, Any], context: Any) -> dict[str, Any]:
        """Deliver a batch; powertools shapes the partial-failure answer from the records whose
        handler raised."""
        records = list(event.get("Records", []))
        archived: list[bytes] = []  # one archive call per invocation, not one per record
        remaining = getattr(context, "get_remaining_time_in_millis", None)
        until = None if remaining is None else time.monotonic() + remaining() / 1000
        try:
            outcomes = self._deliver_all(records, archived, until)
            results = dict(zip((r["messageId"] for r in records), outcomes, strict=True))
        finally:
            self._flush(archived)

        def record_handler(record: Any) -> None:
            error = results[record.message_id]
            if error is not None:
                raise error

        processor = getattr(self._processors, "sqs", None)
        if processor is None:  # one per thread: it keeps the batch's results while it runs
            processor = self._processors.sqs = BatchProcessor(
                event_type=EventType.SQS, raise_on_entire_batch_failure=False
            )
        # The work is done: powertools only maps outcomes to message ids, so it gets just those
        # (it copies and wraps every record it is given).
        slim = {"Records": [{"messageId": r["messageId"]} for r in records]}
        response = process_partial_response(
            event=slim, record_handler=record_handler, processor=processor, context=context
        )
        n, back = len(records), len(response.get("batchItemFailures") or ())  # one INFO line
        log.info("batch of %d, %d back to the queue", n, back, extra={"messages": n, "back": back})
        return dict(response)

    def _deliver_all(
        self, records: list[Mapping[str, Any]], archived: list[bytes], until: float | None = None
    ) -> list[Exception | None]:
        """A batch in three passes, each over every record: read the messages and build the
        requests; send them (one at a time or several at once, as the pacer says); act on the
        answers. Each pass keeps its own code hot, and only sending (and acting on an answer
        that needs AWS calls) ever runs on more than one thread."""
        if records and names.is_fifo(_queue_of(records[0])):
            return self._deliver_in_order(records, archived)
        outcomes: list[Exception | None] = [None] * len(records)
        jobs: list[Job] = []
        destinations: dict[tuple[str, str, str], Destination | None] = {}  # this batch's
        for i, record in enumerate(records):
            try:
                jobs.extend(self._prepare_all(i, record, destinations, len(jobs), until=until))
            except Exception as exc:
                outcomes[i] = self._failure(record, exc)
        if not jobs:
            return outcomes
        done: list[Exception | None] = [None] * len(jobs)  # by job index
        sent = jobs
        if self._rate is not None:
            sent = self._send_paced(jobs, done)
        else:
            self._send_all(jobs)
        other = []
        for job in sent:
            if job.error is None and not job.deferred:
                try:
                    job.answer = self._judge(job)
                    if job.answer.outcome is Outcome.SUCCESS:  # nothing to do but record it
                        self._record(job, Outcome.SUCCESS, archived)
                        continue
                except Exception as exc:
                    done[job.index] = self._failure(job.record, exc, job)
                    continue
            other.append(job)
        if len(other) > 1:  # retries, dead letters and replies make AWS calls: overlap them
            for job, outcome in zip(
                other, self._pool.map(lambda j: self._safe_settle(j, archived), other), strict=True
            ):
                done[job.index] = outcome
        elif other:
            done[other[0].index] = self._safe_settle(other[0], archived)
        # A record fails when one of its jobs does: a pack is received again whole (its events
        # delivered already are delivered again: at least once, never lost).
        for job in jobs:
            if done[job.index] is not None and outcomes[job.slot] is None:
                outcomes[job.slot] = done[job.index]
        return outcomes

    def _deliver_in_order(
        self, records: list[Mapping[str, Any]], archived: list[bytes]
    ) -> list[Exception | None]:
        """A batch from a FIFO queue (docs/ordering.md): each message group's records one after
        the other, in the batch's order, the groups side by side. A record that stays in the
        queue (a retry waiting out its backoff, an unexpected failure) holds back the rest of its
        group: they are handed back untried and reported failed, Lambda's rule for FIFO queues
        with ReportBatchItemFailures, so no later event of the group is delivered before it."""
        outcomes: list[Exception | None] = [None] * len(records)
        chains: dict[str, list[int]] = {}
        for i, record in enumerate(records):
            group = ordering.group_of(record.get("attributes") or {})
            chains.setdefault(group, []).append(i)
        destinations: dict[tuple[str, str, str], Destination | None] = {}

        def run(chain: list[int]) -> None:
            for position, i in enumerate(chain):
                outcomes[i] = self._deliver_one(i, records[i], destinations, archived)
                if outcomes[i] is not None:
                    for later in chain[position + 1 :]:
                        outcomes[later] = self._hold_back(records[later])
                    return

        if len(chains) == 1:
            run(next(iter(chains.values())))
        else:
            list(self._pool.map(run, chains.values()))
        return outcomes

    def _deliver_one(
        self,
        index: int,
        record: Mapping[str, Any],
        destinations: dict[tuple[str, str, str], Destination | None],
        archived: list[bytes],
    ) -> Exception | None:
        """All the passes over one record; what its failure reports, or None."""
        try:
            job = self._prepare(index, record, destinations)
        except Exception as exc:
            return self._failure(record, exc)
        if job is None:
            return None
        if self._rate is not None and job.destination.route.max_rate is not None:
            try:
                _, timed, delayed = self._rate.admit([job], fifo=True)
            except Exception as exc:
                return self._failure(record, exc, job)
            if delayed:
                return delayed[index]
            self._wait_until(timed[0][0])
        self._transmit(job)
        if job.error is None:
            try:
                job.answer = self._judge(job)
                if job.answer.outcome is Outcome.SUCCESS:
                    self._record(job, Outcome.SUCCESS, archived)
                    return None
            except Exception as exc:
                return self._failure(job.record, exc, job)
        return self._safe_settle(job, archived)

    def _hold_back(self, record: Mapping[str, Any]) -> Exception:
        """Hand a held-back FIFO record back to the queue at once: its group stays blocked by the
        earlier record in flight, and is free as soon as that one is received again (left
        invisible, it would block the group for the whole visibility timeout)."""
        try:
            self._queues.change_visibility(_queue_of(record), record["receiptHandle"], 0)
        except Exception as exc:
            message_id = record.get("messageId")
            log.warning(
                "could not hand back %s; its group waits for its visibility timeout: %s",
                message_id,
                exc,
                extra={"message_id": message_id},
            )
        return HeldBackError("an earlier event of its message group is not delivered yet")

    def _send_all(self, jobs: list[Job]) -> None:
        """Send every job's request, with as many in flight as the subscriber's answer time pays
        for (``core/delivery/pacing.py``): one after the other for a subscriber that answers
        faster than our own work on a request, up to ``pool_size`` at once for a slow one."""
        queue = jobs[0].queue
        start = 0
        if self._pacer.should_probe(queue):
            start = self._serial(queue, jobs, 0, 1)
        if start < len(jobs) and self._pacer.concurrency(queue) == 1:
            start = self._serial(queue, jobs, start, len(jobs))
        if start == len(jobs):
            return
        pending = iter(jobs[start:])  # shared: each lane takes the next job

        def lane() -> None:
            for job in pending:
                self._transmit(job)

        lanes = self._pacer.concurrency(queue, len(jobs) - start)
        helpers = [self._pool.submit(lane) for _ in range(lanes - 1)]
        lane()  # the calling thread is one of the lanes
        for helper in helpers:
            helper.result()

    def _send_paced(self, jobs: list[Job], outcomes: list[Exception | None]) -> list[Job]:
        """``_send_all`` for a batch with rate-limited triggers (docs/flow-control.md): each
        granted job is sent at its token's due time, the delayed ones are settled here (their
        outcomes set), the others are sent as usual. Returns the jobs that were sent."""
        assert self._rate is not None
        try:
            free, timed, delayed = self._rate.admit(jobs)
        except Exception as exc:  # the bucket could not be read: nothing sent, all retried
            by_record: dict[int, Exception] = {}  # once a record: a pack's events share it
            for job in jobs:
                if job.slot not in by_record:
                    by_record[job.slot] = self._failure(job.record, exc, job)
                outcomes[job.index] = by_record[job.slot]
            return []
        for index, outcome in delayed.items():
            outcomes[index] = outcome
        if free:
            self._send_all(free)
        timed.sort(key=lambda pair: pair[0])
        pending = iter(timed)  # shared: each lane takes the next job due

        def lane() -> None:
            for due, job in pending:
                self._wait_until(due)
                self._transmit(job)

        lanes = min(len(timed), self._pacer.concurrency(jobs[0].queue, len(timed)))
        helpers = [self._pool.submit(lane) for _ in range(lanes - 1)]
        lane()
        for helper in helpers:
            helper.result()
        return free + [job for _, job in timed]

    def _wait_until(self, due: float) -> None:
        wait = due - time.monotonic()
        if wait > 0:
            self._parts.sleep(wait)

    def _serial(self, queue: str, jobs: list[Job], start: int, stop: int) -> int:
        """Send ``jobs[start:stop]`` one after the other and show the pacer how long they took;
        stops early after one that took far longer than usual. Returns where it stopped."""
        began, cpu = time.perf_counter(), time.thread_time()
        slow = self._pacer.slow_after(queue)
        i = start
        while i < stop:
            sent = time.perf_counter()
            self._transmit(jobs[i])
            i += 1
            if time.perf_counter() - sent > slow:
                break
        self._pacer.observe(queue, time.perf_counter() - began, time.thread_time() - cpu, i - start)
        return i

    def _flush(self, archived: list[bytes]) -> None:
        # The archive feeds analytics; its outage must not fail deliveries already made. The
        # archiver retries, then counts (archive_failure_count) and logs what it could not write.
        self._archiver.write(archived)
        self._metrics.flush()

    def _failure(
        self, record: Mapping[str, Any], exc: Exception, job: Job | None = None
    ) -> Exception:
        """What a record's failure reports. An unexpected one is logged with its traceback, and
        its message is made visible again in FAILURE_RETRY_SECONDS if SQS can be told so (else
        SQS redelivers it once the queue's visibility timeout runs out)."""
        if isinstance(exc, RetryLaterError):
            return exc
        message_id = record.get("messageId")
        keys = log_keys(job) if job is not None else {"message_id": message_id}
        log.error("delivery of %s failed unexpectedly", message_id, exc_info=exc, extra=keys)
        try:
            self._queues.change_visibility(
                _queue_of(record), record["receiptHandle"], FAILURE_RETRY_SECONDS
            )
        except Exception as again:
            log.warning("could not reschedule %s: %s", message_id, again, extra=keys)
        return exc

    def _safe_settle(self, job: Job, archived: list[bytes]) -> Exception | None:
        try:
            if job.error is not None:
                raise job.error
            self._settle(job, archived)
            return None
        except Exception as exc:
            return self._failure(job.record, exc, job)

    # ---- the passes over one record ------------------------------------------------------------

    def _prepare(
        self,
        index: int,
        record: Mapping[str, Any],
        destinations: dict[tuple[str, str, str], Destination | None],
    ) -> Job | None:
        """Read a single message (FIFO: never a pack) and build the request; None when there is
        nothing to send."""
        jobs = self._prepare_all(index, record, destinations, index, packs=False)
        return jobs[0] if jobs else None

    def _prepare_all(
        self,
        slot: int,
        record: Mapping[str, Any],
        destinations: dict[tuple[str, str, str], Destination | None],
        first: int,
        *,
        packs: bool = True,
        until: float | None = None,
    ) -> list[Job]:
        """Read the message and build the requests: one job, or one per event of a pack (jobs
        numbered from ``first``); none when there is nothing to send. ``destinations``: where
        each trigger of this batch delivers, looked up once a batch.

        The attempt number is the receive count, plus the attempts a message sent back by
        ``_send_back`` says were made before it."""
        queue = _queue_of(record)
        attempt = int(record.get("attributes", {}).get("ApproximateReceiveCount", "1"))
        try:
            if packs:
                entries, packed = decode_messages(record["body"])
            else:
                entries, packed = [decode_message(record["body"])], False
        except ValidationError as exc:
            rescued = self._rescue(queue, record) if packs else None
            if rescued is None:
                self._poison(queue, record, str(exc))
                return []
            entries, packed = rescued, True
            if not entries:
                return []
        if packed and self._role.unpacks:
            self._unpack(queue, record, entries)
            return []
        # A DLQ's messages count their own attempts (a sink's): what a retried event carried on
        # its trigger's queue was about the subscriber.
        # (Nor does a FIFO queue's: nothing is ever copied back to one.)
        fifo_or_dlq = names.is_dlq(queue) or names.is_fifo(queue)
        carried = None if fifo_or_dlq else record.get("messageAttributes")
        if carried:
            attempt += attempts_made(carried)
            if self._wait_longer(queue, record, carried, entries[0]):
                return []
        queued = entries[0]
        key = (queued.namespace, queued.broker, queued.trigger)
        try:
            if key in destinations:
                destination = destinations[key]
            else:
                destination = destinations[key] = self._destination(queued)
        except NoDeadLetterSinkError:
            # No sink (removed while its mapping still exists, or the mapping's removal failed):
            # the event stays in the DLQ for inspection and redrive. Never deleted.
            self._queues.change_visibility(queue, record["receiptHandle"], KEEP_SECONDS)
            raise
        if destination is None:
            return []
        jobs = []
        for n, queued in enumerate(entries):
            job = Job(first + n, record, queue, attempt, queued, destination)
            job.slot, job.packed = slot, packed
            if packed and until is not None:
                job.until = until - PACK_SETTLE_SECONDS - destination.timeout
            if queued.event is not None:  # inline; a claim check is read from S3 when sending
                self._build(job, queued.event)
            jobs.append(job)
        return jobs

    def _wait_longer(
        self,
        queue: str,
        record: Mapping[str, Any],
        carried: Mapping[str, Any],
        queued: QueuedEvent,
    ) -> bool:
        """A message sent back with a backoff longer than SQS's longest delay comes early: it is
        sent back again, for the rest of its wait, with the same attributes (a receive that is
        not an attempt must not count as one), and this copy is done. True when it was."""
        due = not_before(carried)
        left = due - int(self._clock().timestamp())
        if not due or left <= 0:
            return False
        attributes = {
            ATTEMPTS_ATTRIBUTE: str(attempts_made(carried)),
            NOT_BEFORE_ATTRIBUTE: str(due),
        }
        delay = min(left, MAX_DELAY_SECONDS)
        self._send_single(queue, record, str(record["body"]), delay, attributes, queued)
        return True

    def _send_back(self, job: Job, delay: float, made: int | None = None) -> None:
        """A retried event of a pack goes back to its queue as a message of its own, delayed by
        its backoff and carrying the attempts made (``_prepare_all`` adds them to the receive
        count, so ``policy.final`` dead-letters it at the trigger's retry count). A backoff past
        SQS's 900 s DelaySeconds is kept by a not-before (``_wait_longer``)."""
        wait = policy.visibility_timeout_for(delay)
        attributes = {ATTEMPTS_ATTRIBUTE: str(job.attempt if made is None else made)}
        if wait > MAX_DELAY_SECONDS:
            due = int(self._clock().timestamp()) + wait
            attributes[NOT_BEFORE_ATTRIBUTE] = str(due)
        delay_s = min(wait, MAX_DELAY_SECONDS)
        body = job.single_body()
        self._send_single(job.queue, job.record, body, delay_s, attributes, job.queued, job)

    def _send_single(
        self,
        queue: str,
        record: Mapping[str, Any],
        body: str,
        delay: int,
        attributes: Mapping[str, str],
        queued: QueuedEvent,
        job: Job | None = None,
    ) -> None:
        """Send one message to ``queue``; UnavailableError (counted and logged) when SQS did not
        take it: the record it came from fails, and is received again."""
        message = OutgoingMessage("0", body, delay_seconds=delay, message_attributes=attributes)
        try:
            failed: list[str] | Exception = self._queues.send_batch(queue, [message])
        except Exception as exc:
            failed = exc
        if not failed:
            return
        keys = log_keys(job) if job is not None else {"message_id": record.get("messageId")}
        self._count_requeue_failure(queued, 1)
        log.warning("could not send an event back to %s: %s", queue, failed, extra=keys)
        raise UnavailableError(f"could not send an event back to {queue}")

    def _unpack(self, queue: str, record: Mapping[str, Any], entries: list[QueuedEvent]) -> None:
        """Split a pack into single messages on ``queue`` (each read as any other message there);
        UnavailableError when one is not taken: the pack is received again and split again."""
        messages = [OutgoingMessage(str(i), encode_message(q)) for i, q in enumerate(entries)]
        failed = self._send_chunks(queue, messages)
        if failed:
            self._count_requeue_failure(entries[0], failed)
            message_id = record.get("messageId")
            log.warning(
                "could not unpack %d event(s) of %s into %s",
                failed,
                message_id,
                queue,
                extra={"message_id": message_id, "queue": queue},
            )
            raise UnavailableError(f"could not unpack {message_id} into {queue}")

    def _send_chunks(self, queue: str, messages: list[OutgoingMessage]) -> int:
        """Send ``messages`` to ``queue`` in calls of at most 10 entries and 256 KiB; how many
        SQS did not take (a failed call logged, its entries counted)."""
        failed = 0
        for chunk in call_chunks(messages, attrgetter("body")):
            try:
                failed += len(self._queues.send_batch(queue, chunk))
            except Exception as exc:
                log.warning("could not send %d message(s) to %s: %s", len(chunk), queue, exc)
                failed += len(chunk)
        return failed

    def _count_requeue_failure(self, queued: QueuedEvent, n: int) -> None:
        dims = {"namespace": queued.namespace, "broker": queued.broker, "trigger": queued.trigger}
        self._metrics.count(REQUEUE_FAILURE_METRIC, dims, n)

    def _destination(self, queued: QueuedEvent) -> Destination | None:
        """Where the trigger delivers; None when it is gone."""
        cache = self._parts.cache
        config = cache.get(queued.namespace, queued.broker)
        route = config.route(queued.trigger) if config else None
        if route is None:
            # Not in this container's cached config: it may be newer than the cache (a trigger
            # created a moment ago). Read it again once before deciding it is gone.
            cache.invalidate(queued.namespace, queued.broker)
            config = cache.get(queued.namespace, queued.broker)
            route = config.route(queued.trigger) if config else None
        if route is None:
            # Deleted broker or trigger: Knative lets a few events still arrive after a delete;
            # here they are dropped on purpose, and said so.
            ns, broker, trigger = queued.namespace, queued.broker, queued.trigger
            keys = {"namespace": ns, "broker": broker, "trigger": trigger}
            log.warning("dropping event for missing trigger %s/%s/%s", *keys.values(), extra=keys)
            return None
        target = self._role.target(route)
        timeout = route.delivery.timeout.seconds if route.delivery.timeout else None
        timeout = min(timeout or DEFAULT_ATTEMPT_TIMEOUT, self._parts.max_attempt_timeout)
        return Destination(route, target, kafka_target(target), timeout)

    def _build(self, job: Job, event: CloudEvent) -> None:
        job.event = event
        route = job.destination.route
        if route.transform_ref is not None and self._role.applies_transforms:
            if route.transform is None:  # deleted while events were queued: retried, then a
                # dead letter that says why (it may be created again meanwhile)
                missing = f'EventTransform "{route.transform_ref}" does not exist'
                job.decided = Attempt(Outcome.RETRY, None, missing.encode(), 0.0)
                return
            event = self._transform(job, event, route.transform.expression)
            if job.decided is not None:
                return
        if job.destination.kafka is not None:
            return
        if job.destination.route.delivery.format == "json":
            headers, body = codec.encode_structured(
                event.replace_attributes(remove=(TTL_ATTRIBUTE,))
            )
        else:
            headers, body = codec.encode_binary(event, omit=TTL_ATTRIBUTE)
        queued = job.queued
        for name, value in queued.headers.items():
            if name != "traceparent" and name != "tracestate":  # the next hop's come below
                headers[name] = value
        headers.update(tracing.next_hop(queued.headers))
        headers["Kn-Namespace"] = queued.namespace
        headers.update(self._role.request_headers)
        job.headers, job.body = headers, body

    def _transform(self, job: Job, event: CloudEvent, expression: str) -> CloudEvent:
        """The route's EventTransform applied (docs/transforms.md): the event to send on; or,
        decided here, the transformed event as the reply (no sink), or a dead letter with the
        reason (a failed expression, an invalid result: deterministic, so never retried)."""
        started = time.perf_counter()
        queued = job.queued
        config = self._parts.cache.get(queued.namespace, queued.broker)
        try:
            if config is None:
                transformed = apply_transform(expression, event)
            else:  # the result is bounded like an event the broker's ingress accepts
                transformed = apply_transform(
                    expression, event, max_bytes=config.max_event_bytes, legacy=config.legacy
                )
        except TransformError as exc:
            elapsed = (time.perf_counter() - started) * 1000
            job.decided = Attempt(Outcome.DEAD_LETTER, None, str(exc).encode(), elapsed)
            route = job.destination.route
            log.warning(
                "transform %s failed on event %s: %s",
                route.transform_ref,
                event.id,
                exc,
                extra={**log_keys(job), "transform": route.transform_ref},
            )
            return event
        if not job.destination.target:  # no sink: the transformed event is the reply
            elapsed = (time.perf_counter() - started) * 1000
            job.decided = Attempt(Outcome.REPLY, 200, b"", elapsed, None, transformed)
        job.outgoing = transformed
        return transformed

    def _transmit(self, job: Job) -> None:
        """Send one job's request (on any thread); never raises: a failure is kept on the job.
        An event of a pack whose attempt could outlast the invocation is not sent (deferred)."""
        if job.until is not None and time.monotonic() > job.until:
            job.deferred = True
            return
        try:
            if job.event is None:
                self._build(job, self._parts.claims.load(job.queued))
        except Exception as exc:  # e.g. the claim-check object could not be read: retried
            job.error = exc
            return
        assert job.event is not None
        if job.decided is not None:  # a transform's outcome: nothing to send
            return
        to = job.destination
        try:
            if to.kafka is not None:
                outgoing = job.outgoing or job.event
                job.sent = self._publish(to.route, outgoing, *to.kafka, to.timeout)
            else:
                job.sent = self._parts.sender.post(to.target, job.headers, job.body, to.timeout)
        except Exception as exc:
            # Whatever the sender raised (a header it refuses to write, a bug in a client
            # library) is this attempt's outcome, as a transport error with its reason: it is
            # retried with backoff and dead-lettered with knativeerror* like any other, instead
            # of waiting out the visibility timeout and reaching the DLQ without a reason.
            reason = f"{type(exc).__name__}: {exc}"
            job.sent = HttpResponse(None, {}, f"send error: {reason}".encode(), reason)

    def _judge(self, job: Job) -> Attempt:
        """Read the answer (DESIGN.md §2.3): its outcome, and the reply event if there is one."""
        if job.decided is not None:
            return job.decided
        sent = job.sent
        if isinstance(sent, PublishResult):
            outcome = policy.classify_publish(sent.ok)
            if sent.ok:
                return Attempt(outcome, KAFKA_ACKNOWLEDGED, b"", sent.elapsed_ms)
            detail = f"kafka publish error: {sent.error}".encode()
            return Attempt(outcome, None, detail, sent.elapsed_ms)
        assert sent is not None
        reply, reply_invalid = self._reply_of(sent)
        outcome = policy.classify(
            sent.status, has_reply_event=reply is not None, reply_invalid=reply_invalid
        )
        retry_after = sent.headers.get("retry-after")
        return Attempt(outcome, sent.status, sent.body, sent.elapsed_ms, retry_after, reply)

    def _settle(self, job: Job, archived: list[bytes]) -> None:
        """Act on the answer: ingest a reply, schedule a retry or give up, and record it."""
        if job.deferred:  # not an attempt: back to its queue with the attempts made before
            log.debug("event left for lack of time in the invocation", extra=log_keys(job))
            self._send_back(job, 0.0, made=job.attempt - 1)
            return
        answer = job.answer
        assert answer is not None
        outcome = answer.outcome
        if outcome is Outcome.REPLY and answer.reply is not None:
            try:
                self._role.reply(job, answer.reply)
            except UnavailableError:
                outcome = Outcome.RETRY
            except TransformError as exc:  # the transform's spec.reply failed: deterministic
                outcome = Outcome.DEAD_LETTER
                job.answer = answer = answer._replace(
                    outcome=outcome, status=None, detail=str(exc).encode(), reply=None
                )
        spec = job.destination.route.delivery
        outcome = policy.final(outcome, job.attempt, spec)
        if outcome is Outcome.RETRY:
            delay = policy.retry_delay(
                spec, job.attempt, answer.status, answer.retry_after, self._clock()
            )
            if job.packed:  # the event goes back alone; the pack is done with it
                self._send_back(job, delay)
                self._record(job, outcome, archived)
                return
            self._queues.change_visibility(
                job.queue, job.record["receiptHandle"], policy.visibility_timeout_for(delay)
            )
            self._record(job, outcome, archived)
            raise RetryLaterError(
                f"attempt {job.attempt} answered {answer.status}; retry in {delay}s"
            )
        kept = self._role.give_up(job) if outcome is Outcome.DEAD_LETTER else None
        self._record(job, outcome, archived)
        if kept is not None:
            raise kept

    # ---- pieces --------------------------------------------------------------------------------

    def _publish(
        self, route: Route, event: CloudEvent, servers: str, topic: str, timeout: float
    ) -> PublishResult:
        """A ``kafka://`` subscriber (DESIGN.md §10): one record, binary mode (structured with
        ``format: json``), key from ``partitionkey``, acks=all."""
        outgoing = event.replace_attributes(remove=(TTL_ATTRIBUTE,))
        if route.delivery.format == "json":
            record = encode_structured_record(outgoing)
        else:
            record = encode_binary_record(outgoing)
        if self._parts.kafka is None:
            return PublishResult(False, "no Kafka publisher is configured")
        return self._parts.kafka.publish(servers, topic, record, timeout)

    def _reply_of(self, response: HttpResponse) -> tuple[CloudEvent | None, bool]:
        # 202 is never a reply (data-plane contract); only a 200 can carry one.
        if response.status != 200 or not self._role.reads_replies:
            return None, False
        try:
            return codec.decode_response(response.headers, response.body), False
        except ValidationError:
            return None, True

    def _poison(self, queue: str, record: Mapping[str, Any], why: str) -> None:
        """An unreadable message: moved to its trigger's DLQ, where it is kept for inspection
        (``brokerctl dlq list`` shows why), hidden for KEEP_SECONDS at a time, never deleted
        unread (only a purge, or the queue's retention, removes it)."""
        message_id = record.get("messageId")
        keys = {"message_id": message_id, "queue": queue}
        log.error("unreadable message %s in %s: %s", message_id, queue, why, extra=keys)
        if not names.is_dlq(queue):
            dlq = names.dlq_of(queue)
            failed = self._queues.send_batch(dlq, [moved_message(record)])
            if failed:
                raise UnavailableError(f"could not move unreadable message {message_id} to {dlq}")
            return
        self._queues.change_visibility(queue, record["receiptHandle"], KEEP_SECONDS)
        raise UnreadableKeptError(f"unreadable; kept in {queue} for inspection: {why}")

    def _rescue(self, queue: str, record: Mapping[str, Any]) -> list[QueuedEvent] | None:
        """A pack refused for some of its entries (an archived event a stricter decoder, or a
        damaged archive, no longer reads): its readable events, delivered as any pack's; each
        unreadable entry moved alone to the DLQ (on a DLQ: left there alone), where it is kept
        for inspection. None when the pack as a whole is unsound (the poison path). A move that
        fails fails the record: it is received again, and split again."""
        try:
            good, bad = split_pack(str(record["body"]))
        except ValidationError:
            return None
        target = queue if names.is_dlq(queue) else names.dlq_of(queue)
        message_id = record.get("messageId")
        for entry in bad:
            keys = {"message_id": message_id, "queue": queue, "pack_index": entry.index}
            log.error(
                "unreadable event %d of pack %s in %s: %s",
                entry.index,
                message_id,
                queue,
                entry.why,
                extra=keys,
            )
        failed = self._send_chunks(target, [moved_message(record, entry.body) for entry in bad])
        if failed:
            if good:
                self._count_requeue_failure(good[0], failed)
            raise UnavailableError(f"could not move {failed} unreadable event(s) to {target}")
        return good

    def _record(self, job: Job, outcome: Outcome, archived: list[bytes]) -> None:
        route, event, answer = job.destination.route, job.event, job.answer
        assert event is not None and answer is not None
        status = answer.status
        dims = (  # sorted by name
            ("broker", route.broker),
            ("namespace", route.namespace),
            ("response_code_class", status_class(status) if status else "5xx"),
            ("trigger", route.name),
        )
        self._metrics.count_sorted(outcome.metric, dims)
        # Successes at DEBUG: a line a delivery is what CloudWatch Logs would bill most for.
        level = logging.DEBUG if outcome in (Outcome.SUCCESS, Outcome.REPLY) else logging.INFO
        if log.isEnabledFor(level):
            log.log(
                level,
                "deliver %s/%s/%s id=%s attempt=%d -> %s %s (%.1f ms)",
                route.namespace,
                route.broker,
                route.name,
                event.id,
                job.attempt,
                status if status is not None else "error",
                outcome.value,
                answer.elapsed_ms,
                extra={
                    **log_keys(job),
                    "status": status,
                    "outcome": outcome.value,
                    "elapsed_ms": round(answer.elapsed_ms, 1),
                },
            )
        now = self._clock()
        arrival = event.get("knativearrivaltime")
        record = archive.delivery_record(
            route.namespace,
            route.broker,
            route.name,
            event.id,
            event.type,
            event.source,
            str(arrival) if arrival else archive.rfc3339(now),
            job.attempt,
            status,
            outcome.value,
            answer.elapsed_ms,
            now,
        )
        archived.append(archive.encode_line(record))  # list.append is atomic under the GIL
