"""How many deliveries of one batch to run at once, per subscriber queue (Little's law).

A delivery costs the worker some CPU (``cpu``: decode, encode, the HTTP client, the archive
record) and then waits for the subscriber (``wait``: network plus the subscriber's own time).
Python threads overlap waits, not CPU: with ``k`` requests in flight the worker is busy when
``k >= 1 + wait / cpu``; more only adds lock hand-offs between threads. A batch goes in rounds of
``k``, so the pacer picks the ``k`` that finishes the batch soonest, weighing the CPU it needs
against the rounds of waiting. A subscriber that answers in 5 ms while the worker spends 0.3 ms of
CPU per event gets all ten deliveries of a batch at once; one on the same host answering in 40 µs
gets them one after the other.

Waits are only measured cleanly when one delivery runs alone (otherwise the time spent waiting for
the other threads counts as waiting), so the pacer learns from serial deliveries: every serial
stretch of a batch while the concurrency is 1 (measured as a whole: the thread's CPU clock is a
system call, not worth making per delivery), and one *probe* delivery, run alone at the start of a
batch, at most once per ``probe_interval`` seconds while it is higher. A serial stretch ends early
when one delivery takes ``SLOW`` times the usual, so a subscriber that slows down is not waited
on ten times over.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

ALPHA = 0.3  # weight of a new observation in the moving average of wait / cpu
# Threads are not free: on a 2-core machine a second thread in flight costs about 0.4 x the CPU of
# a delivery in lock hand-offs and cache misses (benchmarks/delivery.py), so overlapping pays only
# once the wait is about as long as the work.
SERIAL_BELOW = 1.0
CONTENTION = 0.05  # extra CPU per delivery for each further thread in flight (lock hand-offs)
SLOW = 4.0  # a serial delivery this many times slower than usual ends the serial stretch


@dataclass
class _Queue:
    ratio: float | None = None  # moving average of wait / cpu, from serial deliveries
    elapsed: float | None = None  # moving average of the seconds one serial delivery takes
    probed_at: float = -math.inf


def _average(old: float | None, new: float) -> float:
    return new if old is None else ALPHA * new + (1 - ALPHA) * old


class Pacer:
    def __init__(
        self,
        limit: int,
        clock: Callable[[], float],
        *,
        probe_interval: float = 1.0,
        max_queues: int = 1024,
    ) -> None:
        if limit < 1:
            raise ValueError("limit must be >= 1")
        self._limit = limit
        self._clock = clock
        self._probe_interval = probe_interval
        self._max_queues = max_queues
        self._queues: dict[str, _Queue] = {}

    def concurrency(self, queue: str, jobs: int | None = None) -> int:
        """Deliveries to run at once for ``jobs`` more of this queue (1 .. limit; the limit when
        nothing is known). A batch goes in rounds of that many, so the choice weighs both: the
        CPU the batch needs (each extra lane adding ``CONTENTION`` of it) against the rounds of
        waiting, in units of one delivery's CPU time."""
        ratio = self._state(queue).ratio
        jobs = self._limit if jobs is None else max(1, jobs)
        if ratio is None:
            return min(self._limit, jobs)
        if ratio < SERIAL_BELOW:
            return 1
        best, best_time = 1, math.inf
        for lanes in range(1, min(self._limit, jobs) + 1):
            cpu = jobs * (1 + CONTENTION * (lanes - 1))
            waiting = math.ceil(jobs / lanes) * (1 + ratio)
            if max(cpu, waiting) < best_time:
                best, best_time = lanes, max(cpu, waiting)
        return best

    def should_probe(self, queue: str) -> bool:
        """Run the next delivery alone and ``observe`` it: when nothing is known yet, or the
        concurrency is above 1 and the last probe is older than the interval."""
        state = self._state(queue)
        if state.ratio is None:
            return True
        return self.concurrency(queue) > 1 and (
            self._clock() - state.probed_at >= self._probe_interval
        )

    def observe(self, queue: str, elapsed: float, cpu: float, count: int = 1) -> None:
        """``count`` deliveries that ran one after the other, alone: ``elapsed`` wall seconds in
        all, of which ``cpu`` on the CPU."""
        if count < 1:
            return
        state = self._state(queue)
        state.probed_at = self._clock()
        ratio = max(0.0, elapsed - cpu) / max(cpu, 1e-6)
        state.ratio = _average(state.ratio, ratio)
        state.elapsed = _average(state.elapsed, elapsed / count)

    def slow_after(self, queue: str) -> float:
        """The seconds beyond which a serial delivery counts as too slow (inf: nothing known)."""
        usual = self._state(queue).elapsed
        return math.inf if usual is None else SLOW * usual

    def _state(self, queue: str) -> _Queue:
        state = self._queues.get(queue)
        if state is None:
            if len(self._queues) >= self._max_queues:
                self._queues.clear()  # queues of deleted triggers must not pile up
            state = self._queues[queue] = _Queue()
        return state
