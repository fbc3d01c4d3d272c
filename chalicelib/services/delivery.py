"""Delivery (design.md §2.3): drain a queue, send each event on, act on the answer. One engine for
two roles (``services/delivery_roles.py``): a trigger's subscriber, and its dead-letter sink.

A batch runs in three passes (docs/delivery.md), each over every record, each a module of its
own: read (``delivery_read.py``), send (``delivery_send.py``, the one place that knows
transports) and settle (``delivery_settle.py``). This module runs them, turns what a record's
jobs came to into the batch's partial-failure answer, and writes the batch's archive records."""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from aws_lambda_powertools.utilities.batch import (
    BatchProcessor,
    EventType,
    process_partial_response,
)

from chalicelib import logs
from chalicelib.core import names
from chalicelib.core.delivery import ordering
from chalicelib.core.delivery.outcomes import Outcome
from chalicelib.services.archiver import Archiver
from chalicelib.services.delivery_jobs import (
    KEEP_SECONDS,
    DeliveryParts,
    Destination,
    HeldBackError,
    Job,
    NoDeadLetterSinkError,
    Requeues,
    RetryLaterError,
    Role,
    log_keys,
    moved_message,
    queue_of,
)
from chalicelib.services.delivery_read import PACK_SETTLE_SECONDS, Destinations, Reader
from chalicelib.services.delivery_send import Sender
from chalicelib.services.delivery_settle import Settler
from chalicelib.services.flow_control import RateGate

__all__ = [
    "FAILURE_RETRY_SECONDS",
    "KEEP_SECONDS",
    "PACK_SETTLE_SECONDS",
    "Delivery",
    "DeliveryParts",
    "Destination",
    "Job",
    "NoDeadLetterSinkError",
    "RetryLaterError",
    "Role",
    "log_keys",
    "moved_message",
]

log = logs.get("delivery")

# An attempt that failed unexpectedly (an AWS call that failed past its retries, a claim check
# that could not be read) is tried again this much later, not after the queue's visibility timeout
# (six times the function's timeout: six minutes by default).
FAILURE_RETRY_SECONDS = 10


class Delivery:
    def __init__(self, parts: DeliveryParts, role: Role) -> None:
        self._queues = parts.queues
        self._metrics = parts.metrics
        self._archiver = Archiver(
            parts.archive,
            parts.metrics,
            role.function,
            batch_seconds=parts.archive_batch_seconds,
            carry_seconds=parts.archive_carry_seconds,
        )
        lanes = max(1, parts.in_flight)
        self._pool = ThreadPoolExecutor(max_workers=lanes, thread_name_prefix="deliver")
        self._processors = threading.local()
        limiter = parts.rate_limiter if role.rate_limited else None
        rate = (
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
        requeues = Requeues(parts.queues, parts.metrics)
        self._sender = Sender(parts, role.request_headers, self._pool, self._load, rate)
        self._reader = Reader(parts, role, self._sender, requeues)
        self._settler = Settler(parts, role, requeues)

    def _load(self, job: Job) -> None:
        self._reader.load(job)

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
        requests; send them (``in_flight`` at once); act on the answers. Each pass keeps its own
        code hot, and only sending (and acting on an answer that needs AWS calls) ever runs on
        more than one thread."""
        if records and names.is_fifo(queue_of(records[0])):
            return self._deliver_in_order(records, archived)
        outcomes: list[Exception | None] = [None] * len(records)
        jobs: list[Job] = []
        destinations: Destinations = {}  # this batch's
        for i, record in enumerate(records):
            try:
                jobs.extend(
                    self._reader.prepare_all(i, record, destinations, len(jobs), until=until)
                )
            except Exception as exc:
                outcomes[i] = self._failure(record, exc)
        if not jobs:
            return outcomes
        done: list[Exception | None] = [None] * len(jobs)  # by job index
        sent = self._send(jobs, done)
        other = []
        for job in sent:
            if job.error is None and not job.deferred:
                try:
                    job.answer = self._settler.judge(job)
                    if job.answer.outcome is Outcome.SUCCESS:  # nothing to do but record it
                        self._settler.record(job, Outcome.SUCCESS, archived)
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

    def _send(self, jobs: list[Job], done: list[Exception | None]) -> list[Job]:
        """The send pass; the jobs that were sent (a rate may delay some: their outcomes are set
        in ``done``)."""
        if not self._sender.paced:
            self._sender.send_all(jobs)
            return jobs
        try:
            return self._sender.send_paced(jobs, done)
        except Exception as exc:  # the bucket could not be read: nothing sent, all retried
            by_record: dict[int, Exception] = {}  # once a record: a pack's events share it
            for job in jobs:
                if job.slot not in by_record:
                    by_record[job.slot] = self._failure(job.record, exc, job)
                done[job.index] = by_record[job.slot]
            return []

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
        destinations: Destinations = {}

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
        destinations: Destinations,
        archived: list[bytes],
    ) -> Exception | None:
        """All the passes over one record; what its failure reports, or None."""
        try:
            job = self._reader.prepare(index, record, destinations)
        except Exception as exc:
            return self._failure(record, exc)
        if job is None:
            return None
        if self._sender.paced and job.destination.route.max_rate is not None:
            try:
                delayed, outcome = self._sender.admit_one(job)
            except Exception as exc:
                return self._failure(record, exc, job)
            if delayed:
                return outcome
        self._sender.transmit(job)
        if job.error is None:
            try:
                job.answer = self._settler.judge(job)
                if job.answer.outcome is Outcome.SUCCESS:
                    self._settler.record(job, Outcome.SUCCESS, archived)
                    return None
            except Exception as exc:
                return self._failure(job.record, exc, job)
        return self._safe_settle(job, archived)

    def _hold_back(self, record: Mapping[str, Any]) -> Exception:
        """Hand a held-back FIFO record back to the queue at once: its group stays blocked by the
        earlier record in flight, and is free as soon as that one is received again (left
        invisible, it would block the group for the whole visibility timeout)."""
        try:
            self._queues.change_visibility(queue_of(record), record["receiptHandle"], 0)
        except Exception as exc:
            message_id = record.get("messageId")
            log.warning(
                "could not hand back %s; its group waits for its visibility timeout: %s",
                message_id,
                exc,
                extra={"message_id": message_id},
            )
        return HeldBackError("an earlier event of its message group is not delivered yet")

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
                queue_of(record), record["receiptHandle"], FAILURE_RETRY_SECONDS
            )
        except Exception as again:
            log.warning("could not reschedule %s: %s", message_id, again, extra=keys)
        return exc

    def _safe_settle(self, job: Job, archived: list[bytes]) -> Exception | None:
        try:
            if job.error is not None:
                raise job.error
            self._settler.settle(job, archived)
            return None
        except Exception as exc:
            return self._failure(job.record, exc, job)
