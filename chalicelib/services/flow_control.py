"""A trigger's max-rate at delivery (docs/flow-control.md): which jobs of a batch may be sent, and
when, on tokens of the trigger's shared bucket (``ports.RateLimiter``); the others are delayed,
never failed, and never charged an attempt.

A job is an attempt only once it is sent. SQS counts receives (``ApproximateReceiveCount``, our
attempt number, and the redrive policy's count), so a delay must not cost a receive:

* a granted job waits for its token inside the invocation (its due time, one ``1 / rate`` after
  the previous one);
* a job not granted within the horizon that was never tried (received once) goes back to its
  queue as a new message with ``DelaySeconds`` until about its token, and the received one is
  acknowledged: the copy is received afresh, as attempt 1 again, and what the queue counts is
  only attempts;
* a retried job (received before) or one of an ordered (FIFO) trigger cannot be copied without
  losing its attempt count or its place in its group, so it may wait longer inside the
  invocation (``hold`` seconds); only past that is it handed back with a visibility timeout,
  which costs one receive (counted; the redrive margin of rate-limited triggers covers it).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from chalicelib import logs
from chalicelib.core.cloudevents.sqs_message import ATTEMPTS_ATTRIBUTE
from chalicelib.core.delivery import policy
from chalicelib.ports import OutgoingMessage, Queues, RateLimiter
from chalicelib.services.claims import SQS_MAX_BYTES
from chalicelib.services.metrics import Metrics

if TYPE_CHECKING:
    from chalicelib.services.delivery import Job

log = logs.get("delivery")

DELAYED_METRIC = "delayed_delivery_count"
SQS_MAX_DELAY_SECONDS = 900
# A wait shorter than this is not a delay worth counting (clock granularity, a token due now).
COUNTED_WAIT = 0.001


class RateLimitedError(Exception):
    """A job handed back to its queue until its token is due (not a failed attempt)."""


def bucket_key(namespace: str, broker: str, trigger: str) -> str:
    return f"{namespace}/{broker}/{trigger}"


class RateGate:
    def __init__(
        self,
        limiter: RateLimiter,
        queues: Queues,
        metrics: Metrics,
        *,
        horizon: float,
        hold: float,
        wall: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._limiter = limiter
        self._queues = queues
        self._metrics = metrics
        self._horizon = horizon
        self._hold = max(hold, horizon)
        self._wall = wall
        self._monotonic = monotonic

    def admit(
        self, jobs: list[Job], *, fifo: bool = False
    ) -> tuple[list[Job], list[tuple[float, Job]], dict[int, Exception | None]]:
        """Split a batch's jobs: those of triggers without a rate (sent at once), those granted a
        token with the ``monotonic`` time each may be sent at, and the outcomes of the delayed
        ones by job index (None: a copy waits in the queue and this one is acknowledged; an
        error: handed back with a visibility timeout). Raises UnavailableError when a bucket
        cannot be read: the caller's unexpected-failure path retries the records."""
        free: list[Job] = []
        limited: dict[tuple[str, str, str], list[Job]] = {}
        for job in jobs:
            route = job.destination.route
            if route.max_rate is None:
                free.append(job)
            else:
                limited.setdefault((route.namespace, route.broker, route.name), []).append(job)
        timed: list[tuple[float, Job]] = []
        delayed: dict[int, Exception | None] = {}
        for key, group in limited.items():
            rate = group[0].destination.route.max_rate
            assert rate is not None
            # A retried single (its receive count is its attempt number) may wait longer in the
            # invocation (``hold``); past it, on a standard queue, it is copied back like any
            # other, carrying the attempts made (ATTEMPTS_ATTRIBUTE), so a delay is never an
            # attempt. Only a FIFO queue's are handed back (a copy would leave its group).
            held = [j for j in group if fifo or (j.attempt > 1 and not j.packed)]
            fresh = [j for j in group if not (fifo or (j.attempt > 1 and not j.packed))]
            for part, horizon in ((held, self._hold), (fresh, self._horizon)):
                if not part:
                    continue
                start = self._monotonic()
                grant = self._limiter.acquire(
                    bucket_key(*key), rate, len(part), self._wall(), horizon
                )
                for i, job in enumerate(part[: grant.granted]):
                    timed.append((start + grant.due(i), job))
                later = part[grant.granted :]
                waited = sum(1 for i in range(grant.granted) if grant.due(i) > COUNTED_WAIT)
                self._count(key, waited + len(later))
                if not later:
                    continue
                # When the first job left out can be granted within the horizon again.
                back = grant.wait
                if grant.granted:
                    back = max(0.0, grant.due(grant.granted) - horizon)
                if fifo:
                    delayed.update(self._hand_back(later, back, grant.interval))
                else:
                    delayed.update(self._requeue(later, back, grant.interval))
        return free, timed, delayed

    def _count(self, key: tuple[str, str, str], n: int) -> None:
        if n:
            namespace, broker, trigger = key
            dims = (("broker", broker), ("namespace", namespace), ("trigger", trigger))
            self._metrics.count_sorted(DELAYED_METRIC, dims, float(n))

    def _requeue(
        self, later: list[Job], back: float, interval: float
    ) -> dict[int, Exception | None]:
        """Copies of never-tried jobs, each delayed until about its token (SQS's maximum delay
        at most: a copy due later is delayed again when it comes back); sent in calls of at most
        10 entries and 256 KiB. A job whose copy SQS refused is handed back instead (it costs a
        receive: logged, and counted with the delays)."""
        queue = later[0].queue
        out: dict[int, Exception | None] = {}
        lost: list[Job] = []
        chunk: list[tuple[int, Job, OutgoingMessage]] = []
        size = 0
        for i, job in enumerate(later):
            delay = min(SQS_MAX_DELAY_SECONDS, math.ceil(back + i * interval))
            body = job.single_body()
            n = len(body.encode())
            if chunk and (len(chunk) == 10 or size + n > SQS_MAX_BYTES):
                lost += self._send_copies(queue, chunk, out)
                chunk, size = [], 0
            made = {ATTEMPTS_ATTRIBUTE: str(job.attempt - 1)} if job.attempt > 1 else None
            copy = OutgoingMessage(str(i), body, max(1, delay), message_attributes=made)
            chunk.append((i, job, copy))
            size += n
        if chunk:
            lost += self._send_copies(queue, chunk, out)
        if lost:
            log.warning(
                "could not requeue %d rate-delayed message(s) of %s; handing them back",
                len(lost),
                queue,
                extra={"queue": queue},
            )
            out.update(self._hand_back(lost, back, interval))
        return out

    def _send_copies(
        self,
        queue: str,
        chunk: list[tuple[int, Job, OutgoingMessage]],
        out: dict[int, Exception | None],
    ) -> list[Job]:
        """Send one call's copies; marks the sent ones done in ``out``, returns the others."""
        try:
            failed = set(self._queues.send_batch(queue, [m for _, _, m in chunk]))
        except Exception as exc:
            log.warning("requeue to %s failed: %s", queue, exc, extra={"queue": queue})
            return [job for _, job, _ in chunk]
        for _, job, message in chunk:
            if message.id not in failed:
                out[job.index] = None
        return [job for _, job, message in chunk if message.id in failed]

    def _hand_back(
        self, later: list[Job], back: float, interval: float
    ) -> dict[int, Exception | None]:
        out: dict[int, Exception | None] = {}
        for i, job in enumerate(later):
            seconds = policy.visibility_timeout_for(max(1.0, back + i * interval))
            record: Mapping[str, Any] = job.record
            message = f"rate-limited: token due in {seconds}s"
            try:
                self._queues.change_visibility(job.queue, record["receiptHandle"], seconds)
            except Exception as exc:
                log.warning(
                    "could not delay %s: %s",
                    record.get("messageId"),
                    exc,
                    extra={"message_id": record.get("messageId")},
                )
                message += " (visibility not set; the queue's timeout applies)"
            out[job.index] = RateLimitedError(message)
        return out
