"""The pacer: deliveries in flight per queue from serial observations of wait and CPU time."""

from __future__ import annotations

import math

import pytest

from chalicelib.core.delivery.pacing import Pacer


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def pacer(limit: int = 10, interval: float = 1.0) -> tuple[Pacer, Clock]:
    clock = Clock()
    return Pacer(limit, clock, probe_interval=interval), clock


def test_unknown_queue_probes_then_runs_at_the_limit() -> None:
    p, _ = pacer()
    assert p.should_probe("q") and p.concurrency("q") == 10


@pytest.mark.parametrize(
    ("elapsed_ms", "cpu_ms", "expected"),
    [
        (0.30, 0.25, 1),  # a subscriber on the same host: wait 0.2 x cpu -> one at a time
        (0.40, 0.25, 1),  # wait 0.6 x cpu: a second thread would cost more than it hides
        (0.55, 0.25, 2),  # wait 1.2 x cpu: two in flight
        (1.00, 0.25, 4),  # wait 3 x cpu
        (5.25, 0.25, 10),  # wait 20 x cpu: the limit
        (0.25, 0.25, 1),  # no wait at all
    ],
)
def test_concurrency_is_one_plus_wait_over_cpu(
    elapsed_ms: float, cpu_ms: float, expected: int
) -> None:
    p, _ = pacer()
    p.observe("q", elapsed_ms / 1000, cpu_ms / 1000)
    assert p.concurrency("q") == expected


def test_serial_queue_is_not_probed_and_learns_from_every_delivery() -> None:
    p, clock = pacer()
    p.observe("q", 0.0003, 0.00025)
    clock.now += 60
    assert p.concurrency("q") == 1 and not p.should_probe("q")
    # The subscriber slows down: serial observations move the average at once (weight 0.3).
    p.observe("q", 0.01025, 0.00025)  # wait 40 x cpu
    assert p.concurrency("q") == 10


def test_concurrent_queue_is_probed_once_per_interval() -> None:
    p, clock = pacer(interval=1.0)
    p.observe("q", 0.00525, 0.00025)
    assert not p.should_probe("q")
    clock.now += 0.999
    assert not p.should_probe("q")
    clock.now += 0.002
    assert p.should_probe("q")
    p.observe("q", 0.00525, 0.00025)
    assert not p.should_probe("q")


def test_probes_bring_a_recovered_subscriber_back_to_serial() -> None:
    p, clock = pacer()
    p.observe("q", 0.00525, 0.00025)  # slow: ratio 20
    seen = [p.concurrency("q")]
    while seen[-1] > 1 and len(seen) < 20:
        assert not p.should_probe("q")  # not before the interval
        clock.now += 1.0
        assert p.should_probe("q")
        p.observe("q", 0.00025, 0.00025)  # fast again
        seen.append(p.concurrency("q"))
    assert seen[0] == 10 and seen[-1] == 1 and len(seen) <= 13
    assert seen == sorted(seen, reverse=True)
    assert not p.should_probe("q")  # serial again: every delivery is an observation


def test_queues_are_paced_apart() -> None:
    p, _ = pacer()
    p.observe("fast", 0.00025, 0.00025)
    p.observe("slow", 0.00525, 0.00025)
    assert (p.concurrency("fast"), p.concurrency("slow")) == (1, 10)


def test_limit_one_never_runs_concurrently() -> None:
    p, _ = pacer(limit=1)
    assert p.concurrency("q") == 1
    p.observe("q", 1.0, 0.0001)
    assert p.concurrency("q") == 1


def test_zero_cpu_and_clock_skew_do_not_break_it() -> None:
    p, _ = pacer()
    p.observe("q", 0.001, 0.0)  # a coarse thread clock can read 0
    assert p.concurrency("q") == 10
    p.observe("other", 0.0, 0.001)  # elapsed below cpu: no negative wait
    assert p.concurrency("other") == 1


def test_forgets_queues_beyond_its_bound() -> None:
    p = Pacer(10, Clock(), max_queues=3)
    for name in "abc":
        p.observe(name, 0.00025, 0.00025)
    p.observe("d", 0.00025, 0.00025)
    assert p.should_probe("a")  # forgotten: unknown again
    assert not math.isnan(p.concurrency("d"))


def test_limit_must_be_positive() -> None:
    with pytest.raises(ValueError):
        Pacer(0, Clock())


def test_a_serial_stretch_is_observed_as_a_whole() -> None:
    p, _ = pacer()
    p.observe("q", elapsed=10 * 0.0003, cpu=10 * 0.00025, count=10)  # wait 0.2 x cpu
    assert p.concurrency("q") == 1
    assert 0.0011 < p.slow_after("q") < 0.0013  # 4 x the usual 0.3 ms
    p.observe("q", elapsed=1.0, cpu=1.0, count=0)  # nothing sent: nothing learnt
    assert p.concurrency("q") == 1


def test_nothing_is_too_slow_before_anything_is_known() -> None:
    p, _ = pacer()
    assert p.slow_after("q") == math.inf


@pytest.mark.parametrize(
    ("ratio", "jobs", "expected"),
    [
        (8.0, 10, 10),  # 9 lanes would leave a second round of 1: one round of 10 is sooner
        (8.0, 4, 4),  # never more lanes than jobs
        (20.0, 1, 1),
        (3.0, 10, 4),  # CPU-bound from 4 lanes on: more only adds hand-offs
        (0.5, 10, 1),
    ],
)
def test_lanes_fit_the_batch(ratio: float, jobs: int, expected: int) -> None:
    p, _ = pacer()
    p.observe("q", elapsed=1.0 + ratio, cpu=1.0)
    assert p.concurrency("q", jobs) == expected
