"""ISO-8601 durations as Knative's DeliverySpec reads them (``PT0.2S``, ``P1D``, ``PT1M30S``)."""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass

# Not isodate: it accepts what Knative's ``period.Parse`` refuses (``PT``, ``P1DT``, a fraction
# before the last component, the ``P0001-02-03T...`` alternative form), its errors do not say what
# to fix, and it keeps years and months as calendar units. Knative's ``DurationApprox`` takes them
# at their average lengths (365.2425 days, a twelfth of that); a leading ``-`` is negative, and
# whether that is allowed is the caller's rule. Only the last component may have a fraction
# (ISO 8601 §4.4.3.2), with ``.`` or ``,``.
_DAY = 86_400.0
_YEAR = 365.2425 * _DAY
_MONTH = _YEAR / 12

_NUMBER = r"(\d+(?:[.,]\d+)?)"
_PATTERN = re.compile(
    rf"^(?P<sign>[-+])?P"
    rf"(?:{_NUMBER}Y)?(?:{_NUMBER}M)?(?:{_NUMBER}W)?(?:{_NUMBER}D)?"
    rf"(?:(?P<t>T)(?:{_NUMBER}H)?(?:{_NUMBER}M)?(?:{_NUMBER}S)?)?$"
)
# Group order in _PATTERN: years, months, weeks, days, (T), hours, minutes, seconds.
_UNITS = (_YEAR, _MONTH, 7 * _DAY, _DAY, 3_600.0, 60.0, 1.0)
_EXAMPLES = "e.g. PT0.2S, PT1S, PT1M30S or P1D"


def _quote(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, default=repr)


class DurationError(ValueError):
    """The text is not an ISO-8601 duration; the message says why, for a person to fix it."""


@dataclass(frozen=True, slots=True)
class Duration:
    """A duration as the user wrote it (``text``, shown back unchanged) and its value in seconds."""

    text: str
    seconds: float

    @classmethod
    def parse(cls, text: str) -> Duration:
        return cls(text=text, seconds=parse_duration(text))


def parse_duration(text: str) -> float:
    """Seconds in an ISO-8601 duration; raises DurationError with a message a person can act on."""
    if not isinstance(text, str):
        raise DurationError(f"must be an ISO-8601 duration string ({_EXAMPLES})")
    match = _PATTERN.fullmatch(text)
    if match is None:
        raise DurationError(f"{_quote(text)} is not an ISO-8601 duration ({_EXAMPLES})")
    groups = [match.group(i) for i in (2, 3, 4, 5, 7, 8, 9)]
    parts = [(unit, value) for unit, value in zip(_UNITS, groups, strict=True) if value is not None]
    if not parts:
        hint = "add at least one time component after T" if match.group("t") else _EXAMPLES
        raise DurationError(f"{_quote(text)} has no components ({hint})")
    if match.group("t") and all(value is None for value in groups[4:]):
        raise DurationError(f"{_quote(text)} has a T but no hours, minutes or seconds after it")
    if any(c in value for _, value in parts[:-1] for c in ".,"):
        raise DurationError(f"{_quote(text)}: only the last component may have a decimal fraction")
    seconds = sum(float(value.replace(",", ".")) * unit for unit, value in parts)
    if not math.isfinite(seconds):
        raise DurationError(f"{_quote(text)} is too large")
    return -seconds if match.group("sign") == "-" else seconds
