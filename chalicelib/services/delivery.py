"""Delivery: drain a trigger queue, POST each event to the subscriber, and act on the answer
(DESIGN.md §2.3). Retries use the queue itself: a retryable failure sets the message's visibility
to the backoff delay and reports the message as a batch item failure; ``ApproximateReceiveCount``
counts attempts. After ``retry + 1`` attempts, or at once for a non-retryable answer, the event
goes to the trigger's DLQ with the ``knativeerror*`` extensions."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from functools import lru_cache
from typing import Any, NamedTuple

from aws_lambda_powertools.utilities.batch import (
    BatchProcessor,
    EventType,
    process_partial_response,
)

from chalicelib.core import archive
from chalicelib.core.clock import utcnow
from chalicelib.core.cloudevents import codec
from chalicelib.core.cloudevents.event import CloudEvent
from chalicelib.core.cloudevents.kafka_binding import encode_binary_record, encode_structured_record
from chalicelib.core.cloudevents.sqs_message import QueuedEvent, decode_message
from chalicelib.core.delivery import policy as delivery_policy
from chalicelib.core.delivery.pacing import Pacer
from chalicelib.core.errors import UnavailableError, ValidationError
from chalicelib.core.resources.eventing import kafka_target
from chalicelib.ports import (
    Archive,
    HttpResponse,
    HttpSender,
    KafkaPublisher,
    OutgoingMessage,
    PublishResult,
    Queues,
)
from chalicelib.services import tracing
from chalicelib.services.archiver import Archiver
from chalicelib.services.claims import Claims
from chalicelib.services.ingress import TTL_ATTRIBUTE, Ingress, TtlExceededError
from chalicelib.services.metrics import Metrics, status_class
from chalicelib.services.routing import ConfigCache, Route

log = logging.getLogger("broker.delivery")

_SUCCESS, _REPLY, _RETRY = (
    delivery_policy.Outcome.SUCCESS,
    delivery_policy.Outcome.REPLY,
    delivery_policy.Outcome.RETRY,
)

DEFAULT_ATTEMPT_TIMEOUT = 30.0


class RetryLaterError(Exception):
    """Marks a record as a batch item failure (its visibility was already set)."""


class NoDeadLetterSinkError(RetryLaterError):
    """The dead-letter function got an event of a trigger without a sink: it stays in the DLQ."""


def _queue_of(record: Mapping[str, Any]) -> str:
    return _queue_name(str(record.get("eventSourceARN", "")))


@lru_cache(maxsize=1024)
def _queue_name(arn: str) -> str:
    return arn.rsplit(":", 1)[-1]


# An attempt that failed unexpectedly (an AWS call that failed past its retries, a claim check
# that could not be read) is tried again this much later, not after the queue's visibility timeout
# (six times the function's timeout: six minutes by default).
FAILURE_RETRY_SECONDS = 10


class _Destination(NamedTuple):
    """Where one trigger's events go, looked up once per batch."""

    route: Route
    target: str
    kafka: tuple[str, str] | None  # (bootstrap servers, topic) of a kafka:// target
    timeout: float  # seconds per attempt


class _Job:
    """One record on its way through the passes of a batch (a plain class: one per event)."""

    event: CloudEvent | None = None
    headers: dict[str, str]
    body: bytes = b""
    response: HttpResponse | None = None
    error: Exception | None = None
    outcome: delivery_policy.Outcome | None = None
    reply: CloudEvent | None = None

    def __init__(
        self,
        index: int,
        record: Mapping[str, Any],
        queue: str,
        attempt: int,
        queued: QueuedEvent,
        destination: _Destination,
    ) -> None:
        self.index, self.record, self.queue, self.attempt = index, record, queue, attempt
        self.queued, self.destination = queued, destination


class Delivery:
    def __init__(
        self,
        cache: ConfigCache,
        queues: Queues,
        archive_sink: Archive,
        metrics: Metrics,
        sender: HttpSender,
        ingress: Ingress,
        claims: Claims,
        *,
        kafka: KafkaPublisher | None = None,
        dead_letter_mode: bool = False,
        max_attempt_timeout: float = 50.0,
        pool_size: int = 10,
        pacer: Pacer | None = None,
        clock: Callable[[], datetime] = utcnow,
        archive_batch_seconds: float = 0.0,
    ) -> None:
        self._cache = cache
        self._queues = queues
        self._archiver = Archiver(
            archive_sink,
            metrics,
            "dead_letter" if dead_letter_mode else "delivery",
            batch_seconds=archive_batch_seconds,
        )
        self._metrics = metrics
        self._sender = sender
        self._ingress = ingress
        self._claims = claims
        self._kafka = kafka
        self._dead_letter_mode = dead_letter_mode
        self._max_timeout = max_attempt_timeout
        self._pool = ThreadPoolExecutor(max_workers=pool_size, thread_name_prefix="deliver")
        self._pacer = pacer or Pacer(pool_size, time.monotonic)
        self._processors = threading.local()
        self._clock = clock

    # ---- the Lambda entry ---------------------------------------------------------------------

    def handle_sqs_event(self, event: Mapping[str, Any], context: Any) -> dict[str, Any]:
        """Deliver a batch; powertools shapes the partial-failure answer from the records whose
        handler raised."""
        records = list(event.get("Records", []))
        archived: list[bytes] = []  # one archive call per invocation, not one per record
        try:
            outcomes = self._deliver_all(records, archived)
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
        return dict(response)

    def _deliver_all(
        self, records: list[Mapping[str, Any]], archived: list[bytes]
    ) -> list[Exception | None]:
        """A batch in three passes, each over every record: read the messages and build the
        requests; send them (one at a time or several at once, as the pacer says); act on the
        answers. Each pass keeps its own code hot, and only sending (and acting on an answer
        that needs AWS calls) ever runs on more than one thread."""
        outcomes: list[Exception | None] = [None] * len(records)
        jobs: list[_Job] = []
        destinations: dict[tuple[str, str, str], _Destination | None] = {}  # this batch's
        for i, record in enumerate(records):
            try:
                job = self._prepare(i, record, destinations)
            except Exception as exc:
                outcomes[i] = self._failure(record, exc)
            else:
                if job is not None:
                    jobs.append(job)
        if not jobs:
            return outcomes
        self._send_all(jobs)
        other = []
        for job in jobs:
            if job.error is None:
                try:
                    self._judge(job)
                    if job.outcome is _SUCCESS:  # delivered: nothing to do but record it
                        assert job.event is not None and job.response is not None
                        self._record(
                            job.destination.route, job.event, job.attempt, job.response,
                            "delivered", archived,
                        )  # fmt: skip
                        continue
                except Exception as exc:
                    outcomes[job.index] = self._failure(job.record, exc)
                    continue
            other.append(job)
        if len(other) > 1:  # retries, dead letters and replies make AWS calls: overlap them
            for job, outcome in zip(
                other, self._pool.map(lambda j: self._safe_settle(j, archived), other), strict=True
            ):
                outcomes[job.index] = outcome
        elif other:
            outcomes[other[0].index] = self._safe_settle(other[0], archived)
        return outcomes

    def _send_all(self, jobs: list[_Job]) -> None:
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

    def _serial(self, queue: str, jobs: list[_Job], start: int, stop: int) -> int:
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

    def _failure(self, record: Mapping[str, Any], exc: Exception) -> Exception:
        """What a record's failure reports. An unexpected one is logged with its traceback, and
        its message is made visible again in FAILURE_RETRY_SECONDS if SQS can be told so (else
        SQS redelivers it once the queue's visibility timeout runs out)."""
        if isinstance(exc, RetryLaterError):
            return exc
        log.error("delivery of %s failed unexpectedly", record.get("messageId"), exc_info=exc)
        try:
            self._queues.change_visibility(
                _queue_of(record), record["receiptHandle"], FAILURE_RETRY_SECONDS
            )
        except Exception as again:
            log.warning("could not reschedule %s: %s", record.get("messageId"), again)
        return exc

    def _safe_settle(self, job: _Job, archived: list[bytes]) -> Exception | None:
        try:
            if job.error is not None:
                raise job.error
            self._settle(job, archived)
            return None
        except Exception as exc:
            return self._failure(job.record, exc)

    # ---- the passes over one record ------------------------------------------------------------

    def _prepare(
        self,
        index: int,
        record: Mapping[str, Any],
        destinations: dict[tuple[str, str, str], _Destination | None],
    ) -> _Job | None:
        """Read the message and build the request; None when there is nothing to send.
        ``destinations``: where each trigger of this batch delivers, looked up once a batch."""
        queue = _queue_of(record)
        attempt = int(record.get("attributes", {}).get("ApproximateReceiveCount", "1"))
        try:
            queued = decode_message(record["body"])
        except ValidationError as exc:
            self._poison(queue, record, str(exc))
            return None
        key = (queued.namespace, queued.broker, queued.trigger)
        try:
            if key in destinations:
                destination = destinations[key]
            else:
                destination = destinations[key] = self._destination(queued)
        except NoDeadLetterSinkError:
            # Dead-letter mode without a sink (removed while its mapping still exists, or the
            # mapping's removal failed): the event stays in the DLQ, out of sight for the
            # longest visibility SQS allows, for inspection and redrive. Never deleted.
            self._queues.change_visibility(queue, record["receiptHandle"], 43200)
            raise
        if destination is None:
            return None
        job = _Job(index, record, queue, attempt, queued, destination)
        if queued.event is not None:  # inline; a claim check is read from S3 when sending
            self._build(job, queued.event)
        return job

    def _destination(self, queued: QueuedEvent) -> _Destination | None:
        """Where the trigger delivers; None when it is gone. Raises NoDeadLetterSinkError in
        dead-letter mode when the trigger has no sink."""
        config = self._cache.get(queued.namespace, queued.broker)
        route = config.route(queued.trigger) if config else None
        if route is None:
            # Not in this container's cached config: it may be newer than the cache (a trigger
            # created a moment ago). Read it again once before deciding it is gone.
            self._cache.invalidate(queued.namespace, queued.broker)
            config = self._cache.get(queued.namespace, queued.broker)
            route = config.route(queued.trigger) if config else None
        if route is None:
            # Deleted broker or trigger: Knative lets a few events still arrive after a delete;
            # here they are dropped on purpose, and said so.
            log.warning(
                "dropping event for missing trigger %s/%s/%s",
                queued.namespace,
                queued.broker,
                queued.trigger,
            )
            return None
        target = self._target(route)
        if not target:
            raise NoDeadLetterSinkError("no dead-letter sink is set; the event stays in the DLQ")
        timeout = route.delivery.timeout.seconds if route.delivery.timeout else None
        timeout = min(timeout or DEFAULT_ATTEMPT_TIMEOUT, self._max_timeout)
        return _Destination(route, target, kafka_target(target), timeout)

    def _build(self, job: _Job, event: CloudEvent) -> None:
        job.event = event
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
        if not self._dead_letter_mode:
            headers["Prefer"] = "reply"
        job.headers, job.body = headers, body

    def _transmit(self, job: _Job) -> None:
        """Send one job's request (on any thread); never raises: a failure is kept on the job."""
        try:
            if job.event is None:
                self._build(job, self._claims.load(job.queued))
        except Exception as exc:  # e.g. the claim-check object could not be read: retried
            job.error = exc
            return
        assert job.event is not None
        to = job.destination
        try:
            if to.kafka is not None:
                job.response = self._publish(to.route, job.event, *to.kafka, to.timeout)
            else:
                job.response = self._sender.post(to.target, job.headers, job.body, to.timeout)
        except Exception as exc:
            # Whatever the sender raised (a header it refuses to write, a bug in a client
            # library) is this attempt's outcome, as a transport error with its reason: it is
            # retried with backoff and dead-lettered with knativeerror* like any other, instead
            # of waiting out the visibility timeout and reaching the DLQ without a reason.
            reason = f"{type(exc).__name__}: {exc}"
            job.response = HttpResponse(None, {}, f"send error: {reason}".encode(), reason)

    def _judge(self, job: _Job) -> None:
        """Read the answer (DESIGN.md §2.3): the outcome, and the reply event if there is one."""
        response = job.response
        assert response is not None
        reply_event, reply_invalid = self._reply_of(response)  # none in dead-letter mode
        job.outcome = delivery_policy.classify(
            response.status, has_reply_event=reply_event is not None, reply_invalid=reply_invalid
        )
        job.reply = reply_event

    def _settle(self, job: _Job, archived: list[bytes]) -> None:
        """Act on the answer: ingest a reply, schedule a retry, dead-letter, and record it."""
        response, event, outcome = job.response, job.event, job.outcome
        assert response is not None and event is not None and outcome is not None
        if outcome is _REPLY and job.reply is not None:
            try:
                self._ingest_reply(job.queued, event, job.reply)
            except UnavailableError:
                outcome = _RETRY
        self._finish(
            job.destination.route,
            job.queued,
            event,
            job.record,
            job.queue,
            job.attempt,
            response,
            job.destination.target,
            outcome,
            archived,
        )

    def _finish(
        self,
        route: Route,
        queued: QueuedEvent,
        event: CloudEvent,
        record: Mapping[str, Any],
        queue: str,
        attempt: int,
        response: HttpResponse,
        target: str,
        outcome: delivery_policy.Outcome,
        archived: list[bytes],
    ) -> None:
        if outcome is _SUCCESS or outcome is _REPLY:
            kind = "reply" if outcome is _REPLY else "delivered"
            self._record(route, event, attempt, response, kind, archived)
            return
        spec = route.delivery
        if outcome is _RETRY and not delivery_policy.should_dead_letter(attempt, spec):
            delay = delivery_policy.retry_delay(
                spec, attempt, response.status, response.headers.get("retry-after"), self._clock()
            )
            self._queues.change_visibility(
                queue, record["receiptHandle"], delivery_policy.visibility_timeout_for(delay)
            )
            self._record(route, event, attempt, response, "retry", archived)
            raise RetryLaterError(
                f"attempt {attempt} answered {response.status}; retry in {delay}s"
            )
        if self._dead_letter_mode:
            # The dead-letter sink itself failed for good: keep the event in the DLQ, out of sight
            # for the longest visibility SQS allows, for inspection and redrive.
            self._queues.change_visibility(queue, record["receiptHandle"], 43200)
            self._record(route, event, attempt, response, "dead_lettered", archived)
            raise RetryLaterError("dead-letter sink failed; event kept in the DLQ")
        extensions = delivery_policy.dead_letter_extensions(target, response.status, response.body)
        body = self._claims.message_body(
            queued.namespace,
            queued.broker,
            queued.trigger,
            event.replace_attributes(extensions),
            queued.headers,
        )
        failed = self._queues.send_batch(route.dlq, [OutgoingMessage("0", body)])
        if failed:
            raise UnavailableError(f"could not move the event to {route.dlq}")
        self._record(route, event, attempt, response, "dead_lettered", archived)

    # ---- pieces --------------------------------------------------------------------------------

    def _target(self, route: Route) -> str | None:
        if self._dead_letter_mode:
            return route.delivery.dead_letter_sink_uri
        return route.subscriber_uri

    def _publish(
        self, route: Route, event: CloudEvent, servers: str, topic: str, timeout: float
    ) -> HttpResponse:
        """A ``kafka://`` subscriber (DESIGN.md §10): one record, binary mode (structured with
        ``format: json``), key from ``partitionkey``, acks=all. Acknowledged reads as 202 (no
        reply); any failure as a transport error, so the retry and dead-letter rules apply."""
        outgoing = event.replace_attributes(remove=(TTL_ATTRIBUTE,))
        if route.delivery.format == "json":
            record = encode_structured_record(outgoing)
        else:
            record = encode_binary_record(outgoing)
        if self._kafka is None:
            result = PublishResult(False, "no Kafka publisher is configured")
        else:
            result = self._kafka.publish(servers, topic, record, timeout)
        if result.ok:
            return HttpResponse(202, {}, b"", elapsed_ms=result.elapsed_ms)
        return HttpResponse(
            None, {}, f"kafka publish error: {result.error}".encode(), result.error,
            result.elapsed_ms,
        )  # fmt: skip

    def _reply_of(self, response: HttpResponse) -> tuple[CloudEvent | None, bool]:
        # 202 is never a reply (data-plane contract); only a 200 can carry one.
        if response.status != 200 or self._dead_letter_mode:
            return None, False
        try:
            return codec.decode_response(response.headers, response.body), False
        except ValidationError:
            return None, True

    def _ingest_reply(self, queued: QueuedEvent, original: CloudEvent, reply: CloudEvent) -> None:
        config = self._cache.get(queued.namespace, queued.broker)
        if config is None:
            return
        ttl = original.get(TTL_ATTRIBUTE)
        if ttl is not None:
            reply = reply.replace_attributes({TTL_ATTRIBUTE: ttl})
        try:
            self._ingress.ingest(config, [reply], queued.headers)
        except TtlExceededError:
            log.warning("reply %s dropped: knativebrokerttl exhausted (reply loop)", reply.id)
        except ValidationError as exc:
            log.warning("reply %s dropped: %s", reply.id, exc)
        self._metrics.count(
            "reply_count",
            {"namespace": queued.namespace, "broker": queued.broker, "trigger": queued.trigger},
        )

    def _poison(self, queue: str, record: Mapping[str, Any], why: str) -> None:
        log.error("unreadable message %s in %s: %s", record.get("messageId"), queue, why)
        dlq = queue if queue.endswith("-dlq") else queue + "-dlq"
        if dlq != queue:
            self._queues.send_batch(dlq, [OutgoingMessage("0", record["body"])])

    def _record(
        self,
        route: Route,
        event: CloudEvent,
        attempt: int,
        response: HttpResponse,
        outcome: str,
        archived: list[bytes],
    ) -> None:
        status = response.status
        dims = (  # sorted by name
            ("broker", route.broker),
            ("namespace", route.namespace),
            ("response_code_class", status_class(status) if status else "5xx"),
            ("trigger", route.name),
        )
        metric = "dead_letter_count" if outcome == "dead_lettered" else "delivery_count"
        self._metrics.count_sorted(metric, dims)
        if log.isEnabledFor(logging.INFO):
            log.info(
                "deliver %s/%s/%s id=%s attempt=%d -> %s %s (%.1f ms)",
                route.namespace,
                route.broker,
                route.name,
                event.id,
                attempt,
                status if status is not None else "error",
                outcome,
                response.elapsed_ms,
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
            attempt,
            status,
            outcome,
            response.elapsed_ms,
            now,
        )
        archived.append(archive.encode_line(record))  # list.append is atomic under the GIL
