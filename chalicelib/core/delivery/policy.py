"""Delivery policy as pure functions (design.md §2.3): what an answer means, how long to wait,
when to give up, what a dead letter carries. Time is a parameter; nothing here reads a clock."""

from __future__ import annotations

import base64
import math
import re
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

from chalicelib.core.delivery.outcomes import Outcome
from chalicelib.core.resources.delivery_spec import DeliverySpec

# SQS caps a message's visibility timeout at 12 hours, and retries wait in the queue.
MAX_BACKOFF_SECONDS = 43_200
# Knative's KnativeErrorDataExtensionMaxLength applies to the base64 text; 768 bytes encode to
# exactly 1024 characters, so truncating the body there keeps the encoding whole and valid.
MAX_ERROR_DATA_CHARS = 1024
_MAX_ERROR_DATA_BYTES = MAX_ERROR_DATA_CHARS // 4 * 3
TRANSPORT_ERROR_CODE = 500  # what Knative records for a connection error or a timeout


# The data-plane contract retries these 4xx: the endpoint may appear (404), the request timed
# out (408), a conflicting operation may finish (409), the subscriber is overloaded (429).
_RETRYABLE_4XX = frozenset({404, 408, 409, 429})


def classify(status: int | None, *, has_reply_event: bool, reply_invalid: bool) -> Outcome:
    """The outcome of one attempt. ``status`` is None for a transport error or a timeout;
    ``has_reply_event``/``reply_invalid``: the response carries a valid / an invalid CloudEvent."""
    if status is None:
        return Outcome.RETRY
    if status == 200:
        if reply_invalid:
            return Outcome.RETRY  # a reply we cannot ingest is a failed delivery (Knative: 502)
        return Outcome.REPLY if has_reply_event else Outcome.SUCCESS
    if 200 <= status <= 299:
        return Outcome.SUCCESS  # 202 "MUST NOT be processed as a reply", nor other 2xx here
    if 100 <= status <= 199 or 300 <= status <= 399:
        return Outcome.DEAD_LETTER  # unspecified answers; we follow no redirects
    if 400 <= status <= 499:
        return Outcome.RETRY if status in _RETRYABLE_4XX else Outcome.DEAD_LETTER
    # 5xx, and "a response code not in this table SHOULD be treated as a retriable error".
    return Outcome.RETRY


def classify_publish(acknowledged: bool) -> Outcome:
    """The outcome of a Kafka publish: delivered once the cluster acknowledges it (a record has no
    reply), else retried like a transport error."""
    return Outcome.SUCCESS if acknowledged else Outcome.RETRY


def final(outcome: Outcome, attempt: int, spec: DeliverySpec) -> Outcome:
    """The outcome to act on: a retry after the last attempt is a dead letter."""
    if outcome is Outcome.RETRY and should_dead_letter(attempt, spec):
        return Outcome.DEAD_LETTER
    return outcome


def backoff_seconds(policy: str | None, delay_s: float | None, k: int) -> float:
    """The wait before retry ``k`` (1 for the first retry), capped at 12 hours.

    exponential: d·2^(k-1) (d, 2d, 4d, ...); linear: d·k (d, 2d, 3d, ...). Without a policy or a
    delay retries are immediate.

    Knative's implementation waits (k-1)·d for linear (0, d, 2d: go-retryablehttp passes a 0-based
    attempt number to ``delay * attemptNum``), so its first linear retry is immediate. We follow
    the API text ("backoffDelay*<numberOfRetries>"), which design.md §2.3 adopts: an immediate
    first retry is what a backoff policy is configured to avoid.
    """
    if policy is None or not delay_s or delay_s <= 0 or k < 1:
        return 0.0
    if policy == "linear":
        return min(delay_s * k, float(MAX_BACKOFF_SECONDS))
    if policy == "exponential":
        if k - 1 >= 64:  # 2^64·d is past the cap for any d > 0; avoids float overflow
            return float(MAX_BACKOFF_SECONDS)
        return min(delay_s * 2.0 ** (k - 1), float(MAX_BACKOFF_SECONDS))
    raise ValueError(f"unknown backoff policy {policy!r}")


_DELTA_SECONDS = re.compile(r"^[0-9]+$")
_RFC850_YEAR = re.compile(r"-\d\d ")  # "Sunday, 06-Nov-94 08:49:37 GMT"


def parse_retry_after(value: str, now: datetime) -> float | None:
    """Seconds to wait from a ``Retry-After`` value: delta-seconds or an HTTP-date (a date in the
    past means 0). Anything else is None, and the header is then ignored. A naive ``now`` is
    taken as UTC."""
    if now.tzinfo is None:
        now = now.replace(tzinfo=UTC)
    text = value.strip()
    if _DELTA_SECONDS.fullmatch(text):
        # Any number of digits may come: past 9 (31 years) the wait is longer than SQS can hold
        # a message anyway, and int/float would refuse thousands of digits.
        digits = text.lstrip("0") or "0"
        return float(int(digits)) if len(digits) <= 9 else float(MAX_BACKOFF_SECONDS)
    when = _http_date(text, now)
    if when is None:
        return None
    return max(0.0, (when - now).total_seconds())


def _http_date(text: str, now: datetime) -> datetime | None:
    """An HTTP-date (RFC 9110 §5.6.7), or None. The stdlib reads its three forms and more besides,
    which HTTP does not allow and is refused here: IMF-fixdate and the obsolete RFC 850 form say
    ``GMT``, asctime says no zone at all."""
    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError):  # not a date, or 31 Feb, 25:00 ...
        return None
    if when.tzinfo is None:  # asctime; "-0000" also reads as no zone, but it is not HTTP's
        if "," in text:
            return None
        when = when.replace(tzinfo=UTC)
    elif not text.endswith(" GMT"):  # "UTC", "+0200"
        return None
    # RFC 9110: a two-digit year more than 50 years in the future is in the past century. The
    # stdlib's fixed pivot (69 -> 1969) reads some years a century too early.
    if _RFC850_YEAR.search(text) and when.year + 100 <= now.year + 50:
        when = when.replace(year=when.year + 100)
    return when


def retry_delay(
    spec: DeliverySpec,
    attempt: int,
    status: int | None,
    retry_after_header: str | None,
    now: datetime,
) -> float:
    """Seconds to wait after failed attempt ``attempt`` (1-based) before the next one.

    The backoff for retry ``attempt``; on 429 and 503, when ``retryAfterMax`` is set, a longer
    ``Retry-After`` is honoured up to it: ``max(backoff, min(Retry-After, retryAfterMax))``
    (Knative's rule; ``retryAfterMax: PT0S`` therefore ignores the header).
    """
    delay = spec.backoff_delay.seconds if spec.backoff_delay is not None else None
    wait = backoff_seconds(spec.backoff_policy, delay, attempt)
    if status in (429, 503) and spec.retry_after_max is not None and retry_after_header:
        retry_after = parse_retry_after(retry_after_header, now)
        if retry_after is not None:
            wait = max(wait, min(retry_after, spec.retry_after_max.seconds))
    return min(wait, float(MAX_BACKOFF_SECONDS))


def should_dead_letter(attempt: int, spec: DeliverySpec) -> bool:
    """Whether attempt number ``attempt`` (1-based) was the last: ``retry`` retries follow the
    first attempt, so ``retry + 1`` attempts in all (``retry`` absent means 0)."""
    return attempt >= (spec.retry or 0) + 1


def dead_letter_extensions(dest_uri: str, status: int | None, body: bytes) -> dict[str, str | int]:
    """Knative's error extensions for a dead-lettered event: the URI that failed, the final
    status (500 for a transport error, whose description the caller passes as ``body``), and the
    response body in base64, cut so the text stays within 1024 characters (empty body: "")."""
    return {
        "knativeerrordest": dest_uri,
        "knativeerrorcode": TRANSPORT_ERROR_CODE if status is None else status,
        "knativeerrordata": base64.b64encode(body[:_MAX_ERROR_DATA_BYTES]).decode("ascii"),
    }


def visibility_timeout_for(delay_s: float) -> int:
    """The SQS visibility timeout, in whole seconds, that holds a message back for ``delay_s``.

    Rounded up, because SQS takes integers and a retry must never come before its backoff (0.2 s
    becomes 1 s); clamped to SQS's range of 0 to 43200 (12 hours).
    """
    if math.isnan(delay_s) or delay_s <= 0:
        return 0
    if delay_s >= MAX_BACKOFF_SECONDS:
        return MAX_BACKOFF_SECONDS
    return math.ceil(delay_s)
