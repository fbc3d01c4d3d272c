"""The token bucket of max-rate (core/delivery/rate.py) on a virtual clock, and the annotation."""

from __future__ import annotations

import pytest

from chalicelib.core.delivery.rate import Bucket, Grant, burst, take
from chalicelib.core.errors import ValidationError
from chalicelib.core.resources.broker import MAX_RATE_ANNOTATION, parse_max_rate
from chalicelib.core.resources.trigger import max_rate, parse_trigger

T0 = 1_700_000_000.0


def test_a_new_bucket_is_full_with_a_tenth_of_a_seconds_worth() -> None:
    bucket, grant = take(None, 20.0, 25, T0, horizon=0.0)
    assert grant.granted == 2 and grant.wait == 0.0
    assert bucket == Bucket(0.0, T0)
    assert burst(0.5) == 1.0  # at least one token, or a slow rate could never grant one


def test_grants_ahead_up_to_the_horizon_each_due_one_interval_apart() -> None:
    bucket, grant = take(Bucket(0.0, T0), 10.0, 50, T0, horizon=2.0)
    assert grant.granted == 20  # 2 s of refill at 10/s
    assert grant.wait == pytest.approx(0.1)  # the first token is a tenth of a second away
    assert grant.due(19) == pytest.approx(2.0)
    assert bucket.tokens == pytest.approx(-20.0)


def test_a_second_taker_queues_behind_the_first() -> None:
    bucket, first = take(Bucket(0.0, T0), 10.0, 10, T0, horizon=5.0)
    bucket, second = take(bucket, 10.0, 10, T0, horizon=5.0)
    assert second.wait == pytest.approx(first.due(9) + 0.1)  # no token is given twice


def test_nothing_granted_beyond_the_horizon_says_when_to_come_back() -> None:
    bucket = Bucket(-30.0, T0)  # 3 s of tokens promised at 10/s
    after, grant = take(bucket, 10.0, 5, T0, horizon=1.0)
    assert grant.granted == 0 and after == bucket
    # one token is grantable once 31 - 10 * (t) <= 10, i.e. in 2.1 s
    assert grant.wait == pytest.approx(2.1)
    _, later = take(after, 10.0, 5, T0 + grant.wait, horizon=1.0)
    assert later.granted >= 1


def test_refill_is_capped_at_the_burst() -> None:
    _, grant = take(Bucket(0.0, T0), 50.0, 100, T0 + 3600, horizon=0.0)
    assert grant == Grant(5, 0.0, 0.02)


def test_a_clock_behind_the_bucket_invents_no_token() -> None:
    bucket = Bucket(0.0, T0)
    after, grant = take(bucket, 10.0, 1, T0 - 5, horizon=0.0)
    assert grant.granted == 0 and after.at == T0


@pytest.mark.parametrize("rate", [0.1, 0.5, 3.0, 20.0, 1000.0])
def test_over_a_long_run_grants_match_the_rate(rate: float) -> None:
    """A taker asking every 50 ms for more than the rate gives, waiting at most 1 s: over 600 s
    it gets rate * 600 tokens plus the horizon's worth granted ahead, never more."""
    bucket: Bucket | None = Bucket(0.0, T0)
    got = 0
    for step in range(12_000):
        bucket, grant = take(bucket, rate, int(rate * 0.05) + 10, T0 + step * 0.05, horizon=1.0)
        got += grant.granted
    promised = rate * (11_999 * 0.05 + 1.0)  # the refill, plus the horizon's worth ahead
    assert promised - 10 <= got <= promised + 1


def test_rejects_nonsense() -> None:
    with pytest.raises(ValueError):
        take(None, 0.0, 1, T0, 1.0)


@pytest.mark.parametrize(
    ("text", "value"),
    [("20", 20.0), ("0.5", 0.5), ("0.1", 0.1), ("10000", 10000.0), ("1.", 1.0)],
)
def test_annotation_accepts_decimal_rates(text: str, value: float) -> None:
    assert parse_max_rate(text) == value


@pytest.mark.parametrize(
    "text", ["0", "0.05", "10001", "-1", "1e3", "inf", "nan", " 5", "", "5" * 17, "1.2.3", "٣"]
)
def test_annotation_refuses_what_is_not_a_rate(text: str) -> None:
    assert parse_max_rate(text) is None
    body = {
        "metadata": {"name": "t", "annotations": {MAX_RATE_ANNOTATION: text}},
        "spec": {"broker": "default", "subscriber": {"uri": "http://x.example"}},
    }
    with pytest.raises(ValidationError) as caught:
        parse_trigger("ns", body, path_name=None)
    fields = [p.field for p in caught.value.problems]
    assert fields == [f"metadata.annotations[{MAX_RATE_ANNOTATION}]"]


def test_the_triggers_rate_else_its_brokers() -> None:
    from chalicelib.core.resources.broker import parse_broker

    def trigger(annotations: dict[str, str]) -> object:
        body = {
            "metadata": {"name": "t", "annotations": annotations},
            "spec": {"broker": "b", "subscriber": {"uri": "http://x.example"}},
        }
        return parse_trigger("ns", body, path_name=None)

    metadata = {"name": "b", "annotations": {MAX_RATE_ANNOTATION: "5"}}
    broker = parse_broker("ns", {"metadata": metadata}, path_name=None)
    assert max_rate(trigger({MAX_RATE_ANNOTATION: "2.5"}), broker) == 2.5  # type: ignore[arg-type]
    assert max_rate(trigger({}), broker) == 5.0  # type: ignore[arg-type]
    assert max_rate(trigger({}), None) is None  # type: ignore[arg-type]


@pytest.mark.parametrize("rate", [1.0, 20.0, 100.0])
def test_in_any_second_at_most_rate_plus_burst_tokens_fall_due(rate: float) -> None:
    """Four takers asking for 10 at irregular times, each sending its tokens at their due
    times: whatever the pattern, no one-second window holds more than rate + burst sends."""
    bucket: Bucket | None = None
    sends: list[float] = []
    now = T0
    for step in range(400):
        now += (0.013, 0.21, 0.0, 0.05, 1.3)[step % 5]  # bursts of asks, and idle gaps
        bucket, grant = take(bucket, rate, 10, now, horizon=2.0)
        sends.extend(now + grant.due(i) for i in range(grant.granted))
    sends.sort()
    j = 0
    busiest = 0
    for i, t in enumerate(sends):
        while sends[j] <= t - 1.0:
            j += 1
        busiest = max(busiest, i - j + 1)
    assert busiest <= rate + burst(rate) + 1e-9
