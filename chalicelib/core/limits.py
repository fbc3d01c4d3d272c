"""Reading numbers and JSON that come from outside, with limits (issue 16).

Python refuses ``int()`` of a string over 4,300 digits (ValueError), a float of an int over 308
digits (OverflowError), and ``json.loads`` recurses once per nesting level (RecursionError). Input
from clients goes through these functions instead, which answer a value or a ``ValidationError``
naming the field, never another exception.

| limit | value |
|---|---|
| digits of an integer read from text (`limit`, `retry` ...) | 18 |
| bytes of a control-plane JSON body | 1 MiB |
| nesting depth of a control-plane JSON body | 64 |
| nesting depth of a structured event's JSON `data` (arrays and objects) | 64 |
| characters of a client string kept as a cache key | 256 (× ≤ 4,096 entries per cache) |
| characters of an EventTransform's JSONata expression | 16,384 |
| time one JSONata evaluation may run (checked at every evaluation step) | 1,000 ms |
| nesting of JSONata evaluation steps (recursion) | 300 |
| characters of a string made by one JSONata step | the broker's max event bytes |
| items of an array made by one JSONata step | 1,000,000 |
| bytes of a transformed event (its JSON form) | the broker's max event bytes (4 MiB by default) |
| an `eventPattern` filter (compact JSON characters; EventBridge's default quota) | 2,048 |
| `eventPattern` levels / values / `$or` combinations / `*` per wildcard | 16/256/1,000/8 |
| array elements visited matching one event against all its `eventPattern`s | 1,000,000 |
| time one JSONata regular expression may run | what is left of the evaluation's 1,000 ms |
"""

from __future__ import annotations

import json
import re
from typing import Any

from chalicelib.core.errors import Problem, ValidationError

MAX_INT_DIGITS = 18
MAX_JSON_BYTES = 1024 * 1024
MAX_JSON_DEPTH = 64
# Caches keyed by client strings (sources, attribute names, content types) keep only short keys,
# so each is bounded in bytes, not only in entries: a 2 MB source is checked, never remembered.
MAX_CACHED_KEY_CHARS = 256
MAX_CACHE_ENTRIES = 4096
# EventTransforms (docs/transforms.md): an expression is compiled at PUT and on each delivery
# container's first use, so it is bounded in size; an evaluation is bounded in time and depth
# (JSONata's own timebox, checked between evaluation steps) and its result in bytes.
MAX_TRANSFORM_EXPRESSION_CHARS = 16_384
TRANSFORM_TIMEOUT_MS = 1_000
TRANSFORM_MAX_DEPTH = 300
MAX_TRANSFORM_OUTPUT_BYTES = 4 * 1024 * 1024  # the default; delivery passes the broker's
MAX_TRANSFORM_ITEMS = 1_000_000

# EventBridge event patterns (filters' eventPattern dialect). The size is EventBridge's default
# "Event pattern size" quota (https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-quota.html);
# EventBridge documents no figure for the others, so these are ours, far above real patterns.
MAX_PATTERN_CHARS = 2048
MAX_PATTERN_DEPTH = 16
MAX_PATTERN_VALUES = 256
MAX_OR_COMBINATIONS = 1000
MAX_WILDCARDS = 8
# The work one event may cost across all its patterns, in array elements visited (a few hundred
# milliseconds at most): past it, a pattern that needs more does not match (logged and counted).
MAX_PATTERN_WORK = 1_000_000

_INT = re.compile(r"[+-]?[0-9]+")


def read_int(text: str, field: str, *, low: int | None = None, high: int | None = None) -> int:
    """A whole number written in decimal, within ``low``..``high`` when given."""
    text = text.strip()
    if not _INT.fullmatch(text):
        raise ValidationError([Problem(field, f"must be an integer, got {_quote(text)}")])
    if len(text.lstrip("+-").lstrip("0")) > MAX_INT_DIGITS:
        raise ValidationError([Problem(field, f"must have at most {MAX_INT_DIGITS} digits")])
    value = int(text)
    if (low is not None and value < low) or (high is not None and value > high):
        raise ValidationError([Problem(field, f"must be between {low} and {high}, got {value}")])
    return value


def json_depth(text: str | bytes, limit: int = MAX_JSON_DEPTH) -> int:
    """The nesting depth of a JSON text, counted without parsing it; stops counting at
    ``limit + 1`` (a text deeper than that is refused whatever its true depth)."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    depth = deepest = 0
    in_string = escaped = False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            if depth > deepest:
                deepest = depth
                if deepest > limit:
                    return deepest
        elif char in "]}":
            depth -= 1
    return deepest


def read_json(
    body: bytes,
    field: str = "body",
    *,
    max_bytes: int = MAX_JSON_BYTES,
    max_depth: int = MAX_JSON_DEPTH,
) -> Any:
    """A JSON document of at most ``max_bytes`` and ``max_depth`` levels. Numbers that no JSON
    encoder can write back (``1e999`` → infinity, NaN) are refused too."""
    if len(body) > max_bytes:
        raise ValidationError([Problem(field, f"is {len(body)} bytes; at most {max_bytes}")])
    if json_depth(body, max_depth) > max_depth:
        raise ValidationError([Problem(field, f"is nested deeper than {max_depth} levels")])
    try:
        return json.loads(body, parse_constant=_no_constant, parse_float=_finite_float)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValidationError([Problem(field, f"not valid JSON: {exc}")]) from None
    except ValueError as exc:  # a number out of range (the parse hooks below)
        raise ValidationError([Problem(field, str(exc))]) from None


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _finite_float(text: str) -> float:
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise ValueError(f"the number {_quote(text)} is out of range")
    return value


def _quote(text: str, limit: int = 40) -> str:
    return repr(text if len(text) <= limit else text[:limit] + "…")
