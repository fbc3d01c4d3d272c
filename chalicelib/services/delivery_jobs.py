"""What the passes of a delivery batch share (docs/delivery.md): the parts they deliver with, a
job (one event on its way through the passes), the role's questions, the errors that mark a
record as a batch item failure, and sending messages back to a trigger's queues."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from operator import attrgetter
from typing import Any, NamedTuple, Protocol

from chalicelib import logs
from chalicelib.core import names
from chalicelib.core.clock import utcnow
from chalicelib.core.cloudevents.event import CloudEvent
from chalicelib.core.cloudevents.sqs_message import QueuedEvent, call_chunks, encode_message
from chalicelib.core.delivery import ordering
from chalicelib.core.delivery.outcomes import Attempt
from chalicelib.core.errors import UnavailableError
from chalicelib.core.resources.delivery_spec import Access
from chalicelib.ports import (
    Archive,
    AwsTargets,
    HttpResponse,
    HttpSender,
    KafkaPublisher,
    OutgoingMessage,
    PublishResult,
    Queues,
    RateLimiter,
    TargetResult,
)
from chalicelib.services import tracing
from chalicelib.services.claims import Claims
from chalicelib.services.connection_auth import ConnectionAuth
from chalicelib.services.metrics import Metrics
from chalicelib.services.oidc import TokenIssuer
from chalicelib.services.routing import ConfigCache, Route

log = logs.get("delivery")

# Requests in flight per batch when the stage does not say (BROKER_DELIVERY_IN_FLIGHT): a batch
# of ten sent at once (benchmarks/delivery.py).
DEFAULT_IN_FLIGHT = 10
# A message kept for inspection and redrive is hidden for the longest visibility SQS allows.
KEEP_SECONDS = 43_200
# The longest DelaySeconds SQS takes: a retried event of a pack waits longer by a not-before.
MAX_DELAY_SECONDS = 900
REQUEUE_FAILURE_METRIC = "requeue_failure_count"


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
    # Requests of one batch in flight at once (the threads a worker sends on).
    in_flight: int = DEFAULT_IN_FLIGHT
    # ARN subscribers and sinks (docs/targets.md); None: the role delivers to none.
    targets: AwsTargets | None = None
    # Tokens for destinations with an audience (design.md §2.5); None: such a delivery fails.
    tokens: TokenIssuer | None = None
    # Credentials of destinations with a Connection (docs/targets.md); None: such a delivery fails.
    connections: ConnectionAuth | None = None


class Destination(NamedTuple):
    """Where one trigger's events go, looked up once per batch."""

    route: Route
    target: str
    kafka: tuple[str, str] | None  # (bootstrap servers, topic) of a kafka:// target
    timeout: float  # seconds per attempt
    access: Access = Access()  # its authentication and trusted CAs (design.md §2.5)


class Job:
    """One record on its way through the passes of a batch (a plain class: one per event)."""

    event: CloudEvent | None = None
    headers: dict[str, str]
    body: bytes = b""
    sent: HttpResponse | PublishResult | TargetResult | None = None
    answer: Attempt | None = None
    error: Exception | None = None
    # A trigger whose subscriber is an EventTransform (docs/transforms.md): the event it sends
    # (``event`` stays the original: what a dead letter carries), or the attempt's answer decided
    # without sending (the transformed event as the reply; a transform error).
    outgoing: CloudEvent | None = None
    decided: Attempt | None = None
    transform_failed: bool = False  # ``decided`` is the transform's failure (its dead letter's
    # knativeerrordest is the transform, not the sink)
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

    def access(self, route: Route) -> Access:
        """How requests to the target authenticate (an audience's token, a Connection) and the
        CAs its TLS trusts (design.md §2.5)."""
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
    queue = queue_of(record)
    text = record["body"] if body is None else body
    if not names.is_fifo(queue):
        return OutgoingMessage("0", text)
    return OutgoingMessage(
        "0",
        text,
        group_id=ordering.group_of(record.get("attributes") or {}),
        dedup_id=ordering.moved_dedup_id(str(record.get("messageId", ""))),
    )


def queue_of(record: Mapping[str, Any]) -> str:
    """The name of the queue a record was received from."""
    return _queue_name(str(record.get("eventSourceARN", "")))


@lru_cache(maxsize=1024)
def _queue_name(arn: str) -> str:
    return arn.rsplit(":", 1)[-1]


class Requeues:
    """Messages sent back to a trigger's own queues (a retried event of a pack, a wait longer
    than SQS's longest delay, a pack split or rescued); what SQS did not take is counted in
    ``requeue_failure_count`` and logged."""

    def __init__(self, queues: Queues, metrics: Metrics) -> None:
        self._queues = queues
        self._metrics = metrics

    def send_single(
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
        self.count_failure(queued, 1)
        log.warning("could not send an event back to %s: %s", queue, failed, extra=keys)
        raise UnavailableError(f"could not send an event back to {queue}")

    def send_chunks(self, queue: str, messages: list[OutgoingMessage]) -> int:
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

    def count_failure(self, queued: QueuedEvent, n: int) -> None:
        dims = {"namespace": queued.namespace, "broker": queued.broker, "trigger": queued.trigger}
        self._metrics.count(REQUEUE_FAILURE_METRIC, dims, n)
