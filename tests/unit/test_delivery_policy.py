import base64
import math
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from chalicelib.core.delivery.policy import (
    MAX_BACKOFF_SECONDS,
    Outcome,
    backoff_seconds,
    classify,
    dead_letter_extensions,
    parse_retry_after,
    retry_delay,
    should_dead_letter,
    visibility_timeout_for,
)
from chalicelib.core.resources.delivery_spec import DeliverySpec
from chalicelib.core.resources.durations import Duration

NOW = datetime(2026, 3, 4, 5, 6, 7, tzinfo=UTC)

# design.md §2.3, written out as sets rather than recomputed.
SUCCESS_CODES = set(range(200, 300))
RETRY_CODES = {404, 408, 409, 429} | set(range(500, 600))
DEAD_LETTER_CODES = (
    set(range(100, 200)) | set(range(300, 400)) | (set(range(400, 500)) - RETRY_CODES)
)
FLAGS = [(False, False), (True, False), (False, True), (True, True)]


def test_the_table_covers_every_code_once() -> None:
    assert set(range(100, 600)) == SUCCESS_CODES | RETRY_CODES | DEAD_LETTER_CODES
    assert not SUCCESS_CODES & RETRY_CODES and not RETRY_CODES & DEAD_LETTER_CODES


@pytest.mark.parametrize("status", range(100, 600))
def test_every_status_code(status: int) -> None:
    for has_reply, invalid in FLAGS:
        outcome = classify(status, has_reply_event=has_reply, reply_invalid=invalid)
        if status == 200:
            continue  # its own table below
        if status in SUCCESS_CODES:
            assert outcome is Outcome.SUCCESS, (status, has_reply, invalid)
        elif status in RETRY_CODES:
            assert outcome is Outcome.RETRY, status
        else:
            assert status in DEAD_LETTER_CODES
            assert outcome is Outcome.DEAD_LETTER, status


@pytest.mark.parametrize(
    ("has_reply", "invalid", "expected"),
    [
        (False, False, Outcome.SUCCESS),  # 200 without an event
        (True, False, Outcome.REPLY),  # 200 with a CloudEvent: ingest it
        (False, True, Outcome.RETRY),  # 200 claiming to be a CloudEvent but invalid
        (True, True, Outcome.RETRY),
    ],
)
def test_200(has_reply: bool, invalid: bool, expected: Outcome) -> None:
    assert classify(200, has_reply_event=has_reply, reply_invalid=invalid) is expected


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        (202, Outcome.SUCCESS),  # never a reply, even with an event
        (201, Outcome.SUCCESS),
        (204, Outcome.SUCCESS),
        (301, Outcome.DEAD_LETTER),  # redirects are not followed
        (400, Outcome.DEAD_LETTER),
        (401, Outcome.DEAD_LETTER),
        (403, Outcome.DEAD_LETTER),
        (422, Outcome.DEAD_LETTER),
        (404, Outcome.RETRY),
        (408, Outcome.RETRY),
        (409, Outcome.RETRY),
        (429, Outcome.RETRY),
        (500, Outcome.RETRY),
        (503, Outcome.RETRY),
        (None, Outcome.RETRY),  # transport error or timeout
        (0, Outcome.RETRY),  # codes not in the table retry
        (99, Outcome.RETRY),
        (600, Outcome.RETRY),
        (999, Outcome.RETRY),
    ],
)
def test_named_rows(status: int | None, expected: Outcome) -> None:
    assert classify(status, has_reply_event=True, reply_invalid=False) is expected


@given(st.integers().filter(lambda s: not 100 <= s <= 599))
def test_unlisted_codes_retry(status: int) -> None:
    assert classify(status, has_reply_event=False, reply_invalid=False) is Outcome.RETRY


@pytest.mark.parametrize(
    ("policy", "delay", "expected"),
    [
        ("exponential", 0.2, [0.2, 0.4, 0.8, 1.6, 3.2, 6.4, 12.8, 25.6, 51.2, 102.4]),
        ("exponential", 2.0, [2.0, 4.0, 8.0]),  # the conformance plan's retry 3, PT2S
        ("linear", 2.0, [2.0, 4.0, 6.0]),  # design.md: d·k (Knative's code: 0, 2, 4)
        ("linear", 0.5, [0.5, 1.0, 1.5, 2.0]),
        (None, 2.0, [0.0, 0.0, 0.0]),
        ("linear", None, [0.0, 0.0, 0.0]),
        ("exponential", 0.0, [0.0, 0.0]),
    ],
)
def test_backoff_sequences(policy: str | None, delay: float | None, expected: list[float]) -> None:
    got = [backoff_seconds(policy, delay, k) for k in range(1, len(expected) + 1)]
    assert got == pytest.approx(expected)


@pytest.mark.parametrize(
    ("policy", "delay", "k"),
    [("exponential", 1.0, 17), ("exponential", 0.2, 2000), ("linear", 3600.0, 13)],
)
def test_backoff_is_capped_at_twelve_hours(policy: str, delay: float, k: int) -> None:
    assert backoff_seconds(policy, delay, k) == MAX_BACKOFF_SECONDS


def test_backoff_rejects_unknown_policy() -> None:
    with pytest.raises(ValueError, match="unknown backoff policy"):
        backoff_seconds("fibonacci", 1.0, 1)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("120", 120.0),
        ("0", 0.0),
        (" 7 ", 7.0),
        ("Wed, 04 Mar 2026 05:08:07 GMT", 120.0),  # IMF-fixdate
        ("Wednesday, 04-Mar-26 05:06:37 GMT", 30.0),  # RFC 850
        ("Wed Mar  4 05:06:17 2026", 10.0),  # asctime
        ("Tue, 03 Mar 2026 05:06:07 GMT", 0.0),  # in the past: retry now
        ("Sun, 06 Nov 1994 08:49:37 GMT", 0.0),
        ("soon", None),
        ("", None),
        ("-5", None),
        ("1.5", None),
        ("120s", None),
        ("Wed, 31 Feb 2026 05:08:07 GMT", None),
        ("Wed, 04 Mar 2026 05:08:07 UTC", None),
        ("Wed, 04 Foo 2026 05:08:07 GMT", None),
    ],
)
def test_parse_retry_after(value: str, expected: float | None) -> None:
    assert parse_retry_after(value, NOW) == expected


def test_parse_retry_after_naive_now_is_utc() -> None:
    later = "Wed, 04 Mar 2026 05:08:07 GMT"
    assert parse_retry_after(later, NOW.replace(tzinfo=None)) == 120.0


def _spec(retry_after_max: str | None, *, policy: str = "exponential") -> DeliverySpec:
    return DeliverySpec(
        retry=5,
        backoff_policy=policy,
        backoff_delay=Duration.parse("PT2S"),
        retry_after_max=Duration.parse(retry_after_max) if retry_after_max else None,
    )


@pytest.mark.parametrize(
    ("retry_after_max", "attempt", "status", "header", "expected"),
    [
        ("PT60S", 1, 429, "120", 60.0),  # Retry-After capped by retryAfterMax
        ("PT60S", 1, 503, "30", 30.0),
        ("PT60S", 3, 429, "1", 8.0),  # backoff is longer: keep it
        ("PT60S", 1, 429, "Wed, 04 Mar 2026 05:06:52 GMT", 45.0),
        ("PT60S", 1, 500, "30", 2.0),  # only 429 and 503
        ("PT60S", 1, None, "30", 2.0),
        (None, 1, 429, "30", 2.0),  # retryAfterMax unset: header ignored
        ("PT0S", 1, 429, "30", 2.0),  # PT0S: header ignored
        ("PT60S", 1, 429, "garbage", 2.0),
        ("PT60S", 1, 429, None, 2.0),
        ("P2D", 1, 429, "999999", float(MAX_BACKOFF_SECONDS)),
    ],
)
def test_retry_delay(
    retry_after_max: str | None,
    attempt: int,
    status: int | None,
    header: str | None,
    expected: float,
) -> None:
    assert retry_delay(_spec(retry_after_max), attempt, status, header, NOW) == expected


def test_retry_delay_without_backoff() -> None:
    assert retry_delay(DeliverySpec(retry=3), 2, 500, None, NOW) == 0.0


@pytest.mark.parametrize(
    ("retry", "last_attempt"),
    [(None, 1), (0, 1), (1, 2), (3, 4), (10, 11)],
)
def test_should_dead_letter_after_retry_plus_one_attempts(
    retry: int | None, last_attempt: int
) -> None:
    spec = DeliverySpec(retry=retry)
    assert [should_dead_letter(a, spec) for a in range(1, last_attempt + 2)] == [
        *([False] * (last_attempt - 1)),
        True,
        True,
    ]


def test_dead_letter_extensions() -> None:
    body = b'{ "message": "catastrophic failure" }'
    assert dead_letter_extensions("http://sub.example/", 422, body) == {
        "knativeerrordest": "http://sub.example/",
        "knativeerrorcode": 422,
        "knativeerrordata": base64.b64encode(body).decode(),
    }


def test_dead_letter_extensions_for_a_transport_error() -> None:
    ext = dead_letter_extensions("http://sub.example/", None, b"dispatch error: refused")
    assert ext["knativeerrorcode"] == 500
    assert base64.b64decode(str(ext["knativeerrordata"])) == b"dispatch error: refused"


def test_empty_body_gives_present_but_empty_data() -> None:
    assert dead_letter_extensions("http://x/", 500, b"")["knativeerrordata"] == ""


@pytest.mark.parametrize("size", [1, 767, 768, 769, 1024, 100_000])
def test_error_data_is_at_most_1024_characters(size: int) -> None:
    body = bytes(range(256)) * (size // 256 + 1)
    body = body[:size]
    data = str(dead_letter_extensions("http://x/", 500, body)["knativeerrordata"])
    assert len(data) <= 1024
    assert base64.b64decode(data, validate=True) == body[:768]


@pytest.mark.parametrize(
    ("delay", "timeout"),
    [
        (0.0, 0),
        (-3.0, 0),
        (math.nan, 0),
        (0.2, 1),  # rounded up: never earlier than the backoff
        (1.0, 1),
        (1.01, 2),
        (102.4, 103),
        (43_200.0, 43_200),
        (1e9, 43_200),
        (math.inf, 43_200),
    ],
)
def test_visibility_timeout_for(delay: float, timeout: int) -> None:
    assert visibility_timeout_for(delay) == timeout


@given(st.floats(min_value=0, max_value=50_000, allow_nan=False))
def test_visibility_never_shortens_the_wait(delay: float) -> None:
    timeout = visibility_timeout_for(delay)
    assert isinstance(timeout, int)
    assert timeout >= min(delay, MAX_BACKOFF_SECONDS)
    assert timeout - 1 < delay or timeout == MAX_BACKOFF_SECONDS


def test_past_http_date_relative_to_now() -> None:
    earlier = NOW - timedelta(seconds=5)
    assert parse_retry_after(earlier.strftime("%a, %d %b %Y %H:%M:%S GMT"), NOW) == 0.0
