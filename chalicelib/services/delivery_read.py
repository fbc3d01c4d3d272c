"""The read pass of a delivery batch (docs/delivery.md): decode each record (a single event or a
pack), find where its trigger delivers, apply the trigger's EventTransform, and hand the event
to the sender to build its request. What cannot be read is moved to the DLQ and kept there."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from chalicelib import logs
from chalicelib.core import names
from chalicelib.core.cloudevents.event import CloudEvent
from chalicelib.core.cloudevents.sqs_message import (
    ATTEMPTS_ATTRIBUTE,
    NOT_BEFORE_ATTRIBUTE,
    QueuedEvent,
    attempts_made,
    decode_message,
    decode_messages,
    encode_message,
    not_before,
    split_pack,
)
from chalicelib.core.delivery.outcomes import Attempt, Outcome
from chalicelib.core.errors import UnavailableError, ValidationError
from chalicelib.core.resources.delivery_spec import kafka_target
from chalicelib.core.transforms import Limits, TransformError
from chalicelib.core.transforms import apply as apply_transform
from chalicelib.ports import OutgoingMessage
from chalicelib.services.delivery_jobs import (
    KEEP_SECONDS,
    MAX_DELAY_SECONDS,
    DeliveryParts,
    Destination,
    Job,
    NoDeadLetterSinkError,
    Requeues,
    Role,
    UnreadableKeptError,
    log_keys,
    moved_message,
    queue_of,
)
from chalicelib.services.delivery_send import Sender

log = logs.get("delivery")

DEFAULT_ATTEMPT_TIMEOUT = 30.0
# An event of a pack is sent only if its attempt can end this long before the invocation's end
# (its settling and the archive's write come after it); else it goes back to its queue untried,
# alone. A single message is never left so: every event makes progress.
PACK_SETTLE_SECONDS = 5.0

Destinations = dict[tuple[str, str, str], Destination | None]  # a batch's, by trigger


class Reader:
    def __init__(self, parts: DeliveryParts, role: Role, sender: Sender, requeues: Requeues):
        self._parts = parts
        self._role = role
        self._sender = sender
        self._requeues = requeues
        self._queues = parts.queues

    def prepare(
        self, index: int, record: Mapping[str, Any], destinations: Destinations
    ) -> Job | None:
        """Read a single message (FIFO: never a pack) and build the request; None when there is
        nothing to send."""
        jobs = self.prepare_all(index, record, destinations, index, packs=False)
        return jobs[0] if jobs else None

    def prepare_all(
        self,
        slot: int,
        record: Mapping[str, Any],
        destinations: Destinations,
        first: int,
        *,
        packs: bool = True,
        until: float | None = None,
    ) -> list[Job]:
        """Read the message and build the requests: one job, or one per event of a pack (jobs
        numbered from ``first``); none when there is nothing to send. ``destinations``: where
        each trigger of this batch delivers, looked up once a batch.

        The attempt number is the receive count, plus the attempts a message sent back by
        the settle pass says were made before it."""
        queue = queue_of(record)
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
                self.build(job, queued.event)
            jobs.append(job)
        return jobs

    def load(self, job: Job) -> None:
        """Read a claim-checked event from S3 and build its request (on the sending thread)."""
        self.build(job, self._parts.claims.load(job.queued))

    def build(self, job: Job, event: CloudEvent) -> None:
        """The event to send, transformed when the route says so, and its request."""
        job.event = event
        route = job.destination.route
        if route.subscriber_sink is not None and not job.destination.target:
            # deleted while events were queued: retried, then a dead letter that says why
            missing = f'IntegrationSink "{route.subscriber_sink}" does not exist'
            job.decided = Attempt(Outcome.RETRY, None, missing.encode(), 0.0)
            return
        if route.transform_ref is None or not self._role.applies_transforms:
            self._sender.encode(job, event)
            return
        if route.transform is None:  # deleted while events were queued: retried, then a
            # dead letter that says why (it may be created again meanwhile)
            missing = f'EventTransform "{route.transform_ref}" does not exist'
            job.decided = Attempt(Outcome.RETRY, None, missing.encode(), 0.0)
            job.transform_failed = True
            return
        started = time.perf_counter()
        try:
            transformed = self._transform(job, event, route.transform.expression)
            if job.decided is None:
                self._sender.encode(job, transformed)
        except Exception as exc:
            # One event's transform never fails the others of its batch (or of its pack): it is
            # this event's attempt, dead-lettered at once with the reason when it is the
            # expression's deterministic failure (an error, a bound exceeded, an invalid result),
            # else retried per the trigger's policy and then dead-lettered with the reason.
            elapsed = (time.perf_counter() - started) * 1000
            outcome = Outcome.DEAD_LETTER if isinstance(exc, TransformError) else Outcome.RETRY
            reason = str(exc) if isinstance(exc, TransformError) else f"{type(exc).__name__}: {exc}"
            job.decided = Attempt(outcome, None, reason.encode(), elapsed)
            job.outgoing, job.transform_failed = None, True
            log.warning(
                "transform %s failed on event %s: %s",
                route.transform_ref,
                event.id,
                reason,
                extra={**log_keys(job), "transform": route.transform_ref},
            )

    def _transform(self, job: Job, event: CloudEvent, expression: str) -> CloudEvent:
        """The route's EventTransform applied (docs/transforms.md): the event to send on; or,
        decided here, the transformed event as the reply (no sink)."""
        started = time.perf_counter()
        queued = job.queued
        config = self._parts.cache.get(queued.namespace, queued.broker)
        if config is None:
            transformed = apply_transform(expression, event)
        else:  # the result is bounded like an event the broker's ingress accepts
            transformed = apply_transform(
                expression, event, Limits(max_bytes=config.max_event_bytes), legacy=config.legacy
            )
        if not job.destination.target:  # no sink: the transformed event is the reply
            elapsed = (time.perf_counter() - started) * 1000
            job.decided = Attempt(Outcome.REPLY, 200, b"", elapsed, None, transformed)
        job.outgoing = transformed
        return transformed

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
        return Destination(route, target, kafka_target(target), timeout, self._role.access(route))

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
        left = due - int(self._parts.clock().timestamp())
        if not due or left <= 0:
            return False
        attributes = {
            ATTEMPTS_ATTRIBUTE: str(attempts_made(carried)),
            NOT_BEFORE_ATTRIBUTE: str(due),
        }
        delay = min(left, MAX_DELAY_SECONDS)
        self._requeues.send_single(queue, record, str(record["body"]), delay, attributes, queued)
        return True

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
        moves = [moved_message(record, entry.body) for entry in bad]
        failed = self._requeues.send_chunks(target, moves)
        if failed:
            if good:
                self._requeues.count_failure(good[0], failed)
            raise UnavailableError(f"could not move {failed} unreadable event(s) to {target}")
        return good

    def _unpack(self, queue: str, record: Mapping[str, Any], entries: list[QueuedEvent]) -> None:
        """Split a pack into single messages on ``queue`` (each read as any other message there);
        UnavailableError when one is not taken: the pack is received again and split again."""
        messages = [OutgoingMessage(str(i), encode_message(q)) for i, q in enumerate(entries)]
        failed = self._requeues.send_chunks(queue, messages)
        if failed:
            self._requeues.count_failure(entries[0], failed)
            message_id = record.get("messageId")
            log.warning(
                "could not unpack %d event(s) of %s into %s",
                failed,
                message_id,
                queue,
                extra={"message_id": message_id, "queue": queue},
            )
            raise UnavailableError(f"could not unpack {message_id} into {queue}")
