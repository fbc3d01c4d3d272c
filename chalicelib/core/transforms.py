"""EventTransform's JSONata (docs/transforms.md): checking an expression at PUT, and applying it to
an event at delivery. Pure: the library (``jsonata-python``) is pure Python, and nothing here does
I/O.

The expression's input is the event's JSON form (``json_format.to_wire_json``: attributes as
members, JSON data as a JSON value). Its result must be a JSON object that is a valid CloudEvent,
after the merge rule: ``id``, ``source``, ``type`` and ``specversion`` the result lacks (absent
or null) are the input event's. Nothing else is carried over: the result is the whole event.

Bounds (``core/limits.py``): the expression's size (at PUT), the evaluation's time and depth
(JSONata's timebox, which checks both at the entry and exit of every evaluation step: a single
built-in call, such as a range of up to 10^7 numbers, runs to its end before the check) and the
result's size in bytes."""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping
from typing import Any

from jsonata import Jsonata
from jsonata.jexception import JException

from chalicelib.core import limits
from chalicelib.core.cloudevents import codec
from chalicelib.core.cloudevents.event import CloudEvent
from chalicelib.core.cloudevents.json_format import dumps_utf8_stdlib, to_wire_json
from chalicelib.core.errors import Problem, ValidationError

# The attributes a result keeps from the input event when it lacks them (the merge rule).
INHERITED = ("specversion", "id", "source", "type")
_CACHE_ENTRIES = 64  # compiled expressions per thread (a compiled one is used by one thread)


class TransformError(Exception):
    """The expression failed on this event, or its result is not a valid CloudEvent: the
    reason, as the dead letter's ``knativeerrordata`` says it. Deterministic: never retried."""


def expression_problems(expression: object, path: str) -> list[Problem]:
    """Every problem with a JSONata expression as a PUT gives it: not a string, too long, or not
    JSONata (the library's error code, message and character position)."""
    if not isinstance(expression, str) or not expression.strip():
        return [Problem(path, "must be a non-empty JSONata expression (a string)")]
    if len(expression) > limits.MAX_TRANSFORM_EXPRESSION_CHARS:
        return [
            Problem(
                path,
                f"is {len(expression)} characters; at most {limits.MAX_TRANSFORM_EXPRESSION_CHARS}",
            )
        ]
    try:
        Jsonata(expression)
    except JException as exc:
        return [Problem(path, describe(exc, "is not valid JSONata"))]
    except RecursionError:
        return [Problem(path, "is not valid JSONata: nested too deeply to parse")]
    return []


def describe(exc: JException, what: str) -> str:
    """``what``, the JSONata error code, its position in the expression and its message."""
    code = getattr(exc, "error", None) or "error"
    location = getattr(exc, "location", -1)
    where = f" at position {location}" if isinstance(location, int) and location >= 0 else ""
    return f"{what} ({code}{where}): {exc}"


_compiled = threading.local()


def _compile(expression: str) -> Any:
    """The compiled expression, kept per thread (evaluation binds per-call state into it)."""
    cache: dict[str, Any] | None = getattr(_compiled, "cache", None)
    if cache is None:
        cache = _compiled.cache = {}
    found = cache.get(expression)
    if found is None:
        if len(cache) >= _CACHE_ENTRIES:
            cache.pop(next(iter(cache)))
        found = cache[expression] = Jsonata(expression)
    return found


def evaluate(
    expression: str,
    document: Any,
    *,
    timeout_ms: int = limits.TRANSFORM_TIMEOUT_MS,
    max_depth: int = limits.TRANSFORM_MAX_DEPTH,
) -> Any:
    """The expression's result on ``document``; TransformError when it fails or overruns."""
    try:
        compiled = _compile(expression)
        frame = compiled.create_frame()
        frame.set_runtime_bounds(timeout_ms, max_depth)
        return compiled.evaluate(document, frame)
    except JException as exc:
        raise TransformError(describe(exc, "the JSONata expression failed")) from None
    except RecursionError:
        raise TransformError("the JSONata expression recursed too deeply") from None
    except (TypeError, ValueError, ArithmeticError, KeyError, IndexError) as exc:
        # The library's own faults on odd input (a bug in a built-in): the event's reason.
        reason = f"{type(exc).__name__}: {exc}"
        raise TransformError(f"the JSONata expression failed: {reason}") from None


def merge(result: Mapping[str, Any], original: Mapping[str, Any]) -> dict[str, Any]:
    """The merge rule: the result, with the input's ``specversion``, ``id``, ``source`` and
    ``type`` wherever the result has none (absent or null)."""
    merged = dict(result)
    for name in INHERITED:
        if merged.get(name) is None and original.get(name) is not None:
            merged[name] = original[name]
    return merged


def apply(
    expression: str,
    event: CloudEvent,
    *,
    timeout_ms: int = limits.TRANSFORM_TIMEOUT_MS,
    max_depth: int = limits.TRANSFORM_MAX_DEPTH,
    max_bytes: int = limits.MAX_TRANSFORM_OUTPUT_BYTES,
) -> CloudEvent:
    """The transformed event: evaluated, merged, bounded and validated like ingress validates a
    structured event; TransformError naming what went wrong otherwise."""
    original = to_wire_json(event)
    result = evaluate(expression, original, timeout_ms=timeout_ms, max_depth=max_depth)
    if result is None:
        raise TransformError("the JSONata expression gave no result (undefined) for this event")
    if not isinstance(result, Mapping):
        raise TransformError(
            "the JSONata expression must give a JSON object (a CloudEvent), "
            f"got {_json_type(result)}"
        )
    try:
        encoded = dumps_utf8_stdlib(result)
    except (TypeError, ValueError) as exc:  # a function, NaN: not JSON
        raise TransformError(f"the JSONata result is not JSON: {exc}") from None
    if len(encoded) > max_bytes:
        raise TransformError(f"the transformed event is {len(encoded)} bytes; at most {max_bytes}")
    plain = json.loads(encoded)  # the library's own list and dict types, as plain JSON
    try:
        return codec.from_json(merge(plain, original))
    except ValidationError as exc:
        raise TransformError(f"the transformed event is not a valid CloudEvent: {exc}") from None


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return type(value).__name__
