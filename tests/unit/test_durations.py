import pytest

from chalicelib.core.resources.durations import (
    Duration,
    DurationError,
    parse_duration,
)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("PT0.2S", 0.2),
        ("PT1S", 1.0),
        ("PT2S", 2.0),
        ("PT0S", 0.0),
        ("PT1M30S", 90.0),
        ("PT1H", 3600.0),
        ("P1D", 86400.0),
        ("P1W", 604800.0),
        ("P1DT2H3M4.25S", 93784.25),
        ("PT0,5S", 0.5),
        ("PT1.5M", 90.0),
        ("-PT1S", -1.0),
        ("+PT1S", 1.0),
        # Knative's DurationApprox: a year is 365.2425 days, a month a twelfth of that.
        ("P1Y", 365.2425 * 86400),
        ("P1M", 365.2425 * 86400 / 12),
    ],
)
def test_parse(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("", "is not an ISO-8601 duration"),
        ("1s", "is not an ISO-8601 duration"),
        ("pt1s", "is not an ISO-8601 duration"),
        ("PT1", "is not an ISO-8601 duration"),
        ("P1S", "is not an ISO-8601 duration"),  # seconds need the T
        ("PT1H1H", "is not an ISO-8601 duration"),
        ("PT1S1M", "is not an ISO-8601 duration"),  # out of order
        (" PT1S", "is not an ISO-8601 duration"),
        ("P", "has no components"),
        ("PT", "has no components (add at least one time component after T)"),
        ("P1DT", "has a T but no hours"),
        ("PT1.5M30S", "only the last component may have a decimal fraction"),
        ("PT.5S", "is not an ISO-8601 duration"),
    ],
)
def test_parse_rejects_with_a_message(text: str, fragment: str) -> None:
    with pytest.raises(DurationError) as err:
        parse_duration(text)
    assert fragment in str(err.value)


def test_parse_rejects_non_strings() -> None:
    with pytest.raises(DurationError, match="must be an ISO-8601 duration string"):
        parse_duration(5)  # type: ignore[arg-type]


def test_duration_keeps_the_text() -> None:
    duration = Duration.parse("PT0.20S")
    assert duration == Duration("PT0.20S", 0.2)
