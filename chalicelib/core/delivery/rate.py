"""A trigger's max-rate (annotation ``serverless-broker/max-rate``, docs/flow-control.md): a token
bucket shared by every delivery invocation of the trigger, with reservations.

The bucket holds at most ``burst(rate)`` tokens (a tenth of a second's worth, at least one) and
refills at ``rate`` tokens a second: in any second at most ``rate + burst(rate)`` tokens are due.
A one-second burst let concurrent invocations that found the bucket full send twice the rate
within one second (benchmarks/rate_limit.py at 100/s: 208 in the busiest second).

``take`` grants tokens ahead of time: the balance may go negative (a
debt) as long as the last granted token is due within ``horizon`` seconds, so an invocation can
wait for its tokens inside itself instead of handing its messages back to the queue. Granted
tokens are due one ``1 / rate`` apart, the first after ``Grant.wait`` seconds; the caller sends
each job at its due time. Time, the rate and the horizon are parameters: no clock is read here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

MIN_RATE = 0.1  # events per second: a token every 10 s
MAX_RATE = 10_000.0
BURST_SECONDS = 0.1


@dataclass(frozen=True, slots=True)
class Bucket:
    tokens: float  # may be negative: tokens granted ahead of their time
    at: float  # epoch seconds of ``tokens``


@dataclass(frozen=True, slots=True)
class Grant:
    granted: int  # tokens given, 0 .. n
    wait: float  # seconds until the first granted token is due (none granted: until one can be)
    interval: float  # seconds between two granted tokens (1 / rate)

    def due(self, index: int) -> float:
        """Seconds from the grant until the ``index``-th granted token (0-based) is due."""
        return self.wait + index * self.interval


def burst(rate: float) -> float:
    return max(1.0, rate * BURST_SECONDS)


def take(
    bucket: Bucket | None, rate: float, n: int, now: float, horizon: float
) -> tuple[Bucket, Grant]:
    """Grant up to ``n`` tokens whose due times fall within ``horizon`` seconds of ``now``; the
    bucket after the grant, and the grant. A missing bucket is full. A clock that went back (two
    invocations on two hosts) is taken as ``now == bucket.at``: no token is invented."""
    if rate <= 0 or n < 0 or horizon < 0:
        raise ValueError("rate must be > 0, n and horizon >= 0")
    cap = burst(rate)
    if bucket is None:
        tokens, at = cap, now
    else:
        at = max(now, bucket.at)
        tokens = min(cap, bucket.tokens + (at - bucket.at) * rate)
    # the k-th token (1-based) is due at max(0, k - tokens) / rate from ``at``
    allowed = math.floor(tokens + horizon * rate + 1e-6)  # float noise of epoch times
    granted = max(0, min(n, allowed))
    interval = 1.0 / rate
    first_due = max(0.0, 1.0 - tokens) / rate + (at - now)
    if granted == 0:
        # one token becomes grantable when 1 - tokens <= horizon * rate
        wait = max(0.0, (1.0 - tokens) / rate - horizon + (at - now))
        return Bucket(tokens, at), Grant(0, wait, interval)
    return Bucket(tokens - granted, at), Grant(granted, first_due, interval)
