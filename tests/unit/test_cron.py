"""core/cron.py: Knative's cron read as robfig/cron reads it, converted to EventBridge Scheduler's
cron(...) and read back unchanged, refused with the reason where Scheduler cannot run it, and the
next fire time equal to a minute-by-minute search (hypothesis)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from chalicelib.core.cron import Cron, Rate, from_scheduler, parse_cron


def cron(text: str, tz: str | None = None):  # type: ignore[no-untyped-def]
    found, problems = parse_cron(text, tz, "spec.schedule", "spec.timezone")
    assert not problems, problems
    return found


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("* * * * *", "cron(* * * * ? *)"),
        ("*/5 * * * *", "cron(0/5 * * * ? *)"),
        ("0 9 * * 1-5", "cron(0 9 ? * 2-6 *)"),
        ("0 9 * * MON-FRI", "cron(0 9 ? * 2-6 *)"),
        ("30 2 1,15 * *", "cron(30 2 1,15 * ? *)"),
        ("0 0 * JAN,jul *", "cron(0 0 * 1,7 ? *)"),
        ("5/15 * * * *", "cron(5/15 * * * ? *)"),
        ("0 0 * * 0", "cron(0 0 ? * 1 *)"),
        ("@hourly", "cron(0 * * * ? *)"),
        ("@weekly", "cron(0 0 ? * 1 *)"),
        ("0 */2 * * * *", "cron(0/2 * * * ? *)"),  # a seconds field of 0 is the minute
    ],
)
def test_scheduler_form(text: str, expected: str) -> None:
    assert cron(text).scheduler() == (expected, "UTC")


def test_time_zone_from_the_prefix_or_the_field() -> None:
    assert cron("CRON_TZ=Europe/Paris 0 9 * * *").scheduler()[1] == "Europe/Paris"
    assert cron("TZ=Asia/Tokyo 0 9 * * *").scheduler()[1] == "Asia/Tokyo"
    assert cron("0 9 * * *", "America/New_York").scheduler()[1] == "America/New_York"


@pytest.mark.parametrize(
    ("text", "tz", "words"),
    [
        ("0 0 1 * MON", None, "Scheduler cannot express"),
        ("15 * * * * *", None, "seconds field"),
        ("@every 5m", None, "@every"),
        ("@often", None, "unknown descriptor"),
        ("* * * *", None, "has 4 fields"),
        ("60 * * * *", None, "outside 0-59"),
        ("* * * * 7", None, "outside 0-6"),
        ("5-1 * * * *", None, "runs backwards"),
        ("*/0 * * * *", None, "positive"),
        ("0 0 L * *", None, "not a number"),
        ("0 0 30 2 *", None, "never fires"),
        ("* * * * *", "Nowhere/Land", "not an IANA"),
        ("* * * * *", "../etc/passwd", "not an IANA"),
        ("CRON_TZ=UTC * * * * *", "UTC", "set one"),
        ("x" * 300, None, "at most 256"),
    ],
)
def test_refusals_say_why(text: str, tz: str | None, words: str) -> None:
    found, problems = parse_cron(text, tz, "spec.schedule", "spec.timezone")
    assert found is None
    assert any(words in p.message for p in problems), problems


def test_next_time_across_a_daylight_saving_change() -> None:
    paris = cron("30 2 * * *", "Europe/Paris")
    # 2026-03-29: 02:30 does not exist in Paris (clocks go 02:00 -> 03:00): skipped.
    at = paris.next_after(datetime(2026, 3, 28, 12, 0, tzinfo=UTC))
    assert at == datetime(2026, 3, 30, 0, 30, tzinfo=UTC)


def test_rates() -> None:
    assert Rate(60).scheduler() == ("rate(1 minute)", "UTC")
    assert Rate(7200).scheduler() == ("rate(2 hours)", "UTC")
    with pytest.raises(ValueError, match="whole minutes"):
        Rate(2).scheduler()
    from chalicelib.services.schedules import schedule_problems

    assert schedule_problems(Rate(120), "spec.timer.period") == []
    (problem,) = schedule_problems(Rate(2), "spec.timer.period")
    assert problem.field == "spec.timer.period" and "whole minutes" in problem.message
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    assert Rate(90).next_after(t0 + timedelta(seconds=100), t0) == t0 + timedelta(seconds=180)


def _field(low: int, high: int) -> st.SearchStrategy[str]:
    value = st.integers(low, high).map(str)
    span = st.tuples(st.integers(low, high), st.integers(low, high)).map(
        lambda p: f"{min(p)}-{max(p)}"
    )
    step = st.tuples(st.sampled_from(["*", str(low)]), st.integers(1, 9)).map(
        lambda p: f"{p[0]}/{p[1]}"
    )
    part = st.one_of(st.just("*"), value, span, step)
    return st.lists(part, min_size=1, max_size=3).map(",".join)


schedules = st.tuples(
    _field(0, 59), _field(0, 23), _field(1, 31), _field(1, 12), _field(0, 6), st.booleans()
).map(lambda f: f"{f[0]} {f[1]} {f[2] if f[5] else '*'} {f[3]} {'*' if f[5] else f[4]}")


@settings(max_examples=150, deadline=None)
@given(schedules, st.sampled_from(["UTC", "Europe/Paris", "America/New_York"]))
@example("0 0 31 2,4 *", "UTC")
def test_round_trip_and_next_time_match_a_search(text: str, tz: str) -> None:
    c, problems = parse_cron(text, tz, "spec.schedule", "spec.timezone")
    if c is None:  # only what never fires (30 February) is refused of these
        assert [p.message for p in problems] == ["never fires: no month it names has that day"]
        return
    expression, zone = c.scheduler()
    back = from_scheduler(expression, zone)
    assert isinstance(back, Cron)
    assert [f.values for f in back.fields] == [f.values for f in c.fields]
    start = datetime(2026, 10, 24, 23, 17, 30, tzinfo=UTC)  # a DST change within the window
    found = c.next_after(start)
    assert back.next_after(start) == found
    from zoneinfo import ZoneInfo

    local = ZoneInfo(tz)
    minute, hour, dom, month, dow = c.fields
    t = start.replace(second=0) + timedelta(minutes=1)
    for _ in range(60 * 24 * 3):
        w = t.astimezone(local)
        days = (w.day in dom.values, w.isoweekday() % 7 in dow.values)
        day_ok = all(days) if dom.star or dow.star else any(days)
        matches = w.minute in minute.values and w.hour in hour.values and day_ok
        if matches and w.month in month.values and w.fold == 0:  # a repeated hour: once
            assert found == t
            return
        t += timedelta(minutes=1)
    assert found is None or found >= t
