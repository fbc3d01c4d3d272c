"""The settle pass of a delivery batch (docs/delivery.md): read each answer (its outcome, and the
reply event it may carry), act on it (ingest the reply, schedule the retry, or give up: the
role's dead letter), and record it in the metrics, the log and the archive."""

from __future__ import annotations

import logging

from chalicelib import logs
from chalicelib.core import archive
from chalicelib.core.cloudevents import codec
from chalicelib.core.cloudevents.event import CloudEvent
from chalicelib.core.cloudevents.sqs_message import ATTEMPTS_ATTRIBUTE, NOT_BEFORE_ATTRIBUTE
from chalicelib.core.delivery import policy
from chalicelib.core.delivery.outcomes import Attempt, Outcome
from chalicelib.core.errors import UnavailableError, ValidationError
from chalicelib.core.transforms import TransformError
from chalicelib.ports import HttpResponse, PublishResult, TargetResult
from chalicelib.services import delivery_aws
from chalicelib.services.delivery_jobs import (
    MAX_DELAY_SECONDS,
    DeliveryParts,
    Job,
    Requeues,
    RetryLaterError,
    Role,
    log_keys,
)
from chalicelib.services.metrics import status_class

log = logs.get("delivery")

# The archive (schema v1) and the metrics record an acknowledged Kafka publish as 202 Accepted: a
# success without a reply.
KAFKA_ACKNOWLEDGED = 202


class Settler:
    def __init__(self, parts: DeliveryParts, role: Role, requeues: Requeues) -> None:
        self._role = role
        self._requeues = requeues
        self._queues = parts.queues
        self._metrics = parts.metrics
        self._clock = parts.clock

    def judge(self, job: Job) -> Attempt:
        """Read the answer (design.md §2.3): its outcome, and the reply event if there is one."""
        if job.decided is not None:
            return job.decided
        sent = job.sent
        if isinstance(sent, TargetResult):  # an AWS target's answer (docs/targets.md)
            return delivery_aws.judge(sent, self._role.reads_replies)
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

    def settle(self, job: Job, archived: list[bytes]) -> None:
        """Act on the answer: ingest a reply, schedule a retry or give up, and record it. Raises
        RetryLaterError (or the role's) when the record stays in its queue."""
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
                self.record(job, outcome, archived)
                return
            self._queues.change_visibility(
                job.queue, job.record["receiptHandle"], policy.visibility_timeout_for(delay)
            )
            self.record(job, outcome, archived)
            raise RetryLaterError(
                f"attempt {job.attempt} answered {answer.status}; retry in {delay}s"
            )
        kept = self._role.give_up(job) if outcome is Outcome.DEAD_LETTER else None
        self.record(job, outcome, archived)
        if kept is not None:
            raise kept

    def record(self, job: Job, outcome: Outcome, archived: list[bytes]) -> None:
        """Count the attempt, log it, and add its archive record to ``archived``."""
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
        line = archive.delivery_record(
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
        archived.append(archive.encode_line(line))  # list.append is atomic under the GIL

    def _send_back(self, job: Job, delay: float, made: int | None = None) -> None:
        """A retried event of a pack goes back to its queue as a message of its own, delayed by
        its backoff and carrying the attempts made (the read pass adds them to the receive
        count, so ``policy.final`` dead-letters it at the trigger's retry count). A backoff past
        SQS's 900 s DelaySeconds is kept by a not-before (the read pass waits it out)."""
        wait = policy.visibility_timeout_for(delay)
        attributes = {ATTEMPTS_ATTRIBUTE: str(job.attempt if made is None else made)}
        if wait > MAX_DELAY_SECONDS:
            due = int(self._clock().timestamp()) + wait
            attributes[NOT_BEFORE_ATTRIBUTE] = str(due)
        delay_s = min(wait, MAX_DELAY_SECONDS)
        body = job.single_body()
        self._requeues.send_single(
            job.queue, job.record, body, delay_s, attributes, job.queued, job
        )

    def _reply_of(self, response: HttpResponse) -> tuple[CloudEvent | None, bool]:
        # 202 is never a reply (data-plane contract); only a 200 can carry one.
        if response.status != 200 or not self._role.reads_replies:
            return None, False
        try:
            return codec.decode_response(response.headers, response.body), False
        except ValidationError:
            return None, True
