"""EventTransform's JSONata (docs/transforms.md): checking an expression at PUT, and applying it to
an event at delivery. Pure: the library (``jsonata-python``) is pure Python, and nothing here does
I/O.

The expression's input is the event's JSON form (``json_format.to_wire_json``: attributes as
members, JSON data as a JSON value). Its result must be a JSON object that is a valid CloudEvent,
after the merge rule: ``id``, ``source``, ``type`` and ``specversion`` the result lacks (absent
or null) are the input event's. Nothing else is carried over: the result is the whole event.

Bounds (``core/limits.py``): the expression's size (at PUT); during evaluation
(``core/transform_bounds.py``), on every evaluation path: its time (at every evaluation step and
inside every regular expression), its depth, the size of every step's value and of the strings its
calls make in all, and what a built-in would allocate in one call, checked before it runs; and the
result's size in bytes (docs/transforms.md, "Limits")."""

from __future__ import annotations

import functools
import json
import re
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

from chalicelib.core import limits
from chalicelib.core.cloudevents import codec
from chalicelib.core.cloudevents.event import CloudEvent
from chalicelib.core.cloudevents.json_format import dumps_utf8_stdlib, to_wire_json
from chalicelib.core.errors import Problem, ValidationError
from chalicelib.core.transform_bounds import (
    Bounds,
    Clock,
    Overrun,
    TransformError,
    json_size_exceeds,
    regex_engine,
)

__all__ = ["Limits", "TransformError", "apply", "evaluate", "expression_problems", "merge"]


@dataclass(frozen=True, slots=True)
class Limits:
    """One evaluation's bounds; the defaults are core/limits.py's."""

    timeout_ms: int = limits.TRANSFORM_TIMEOUT_MS
    max_depth: int = limits.TRANSFORM_MAX_DEPTH
    # The result's size in bytes, and every step's value and built-in call's in characters.
    max_bytes: int = limits.MAX_TRANSFORM_OUTPUT_BYTES
    max_items: int = limits.MAX_TRANSFORM_ITEMS


DEFAULT_LIMITS = Limits()

# The attributes a result keeps from the input event when it lacks them (the merge rule).
INHERITED = ("specversion", "id", "source", "type")
_CACHE_ENTRIES = 64  # compiled expressions per thread (a compiled one is used by one thread)
# What the library raises, besides its JException, on input it does not expect (found by
# tests/fuzz/test_transform_fuzz.py): a problem with the expression, never a server error.
_LIBRARY_FAULTS = (
    TypeError,
    ValueError,
    ArithmeticError,
    KeyError,
    IndexError,
    AttributeError,
    re.error,
)


@functools.cache
def _library() -> Any:
    """The JSONata library, imported on first use: ~55 ms that the ingress (which never
    evaluates an expression) does not pay at cold start."""
    import regex
    from jsonata import Jsonata
    from jsonata.functions import Functions
    from jsonata.jexception import JException

    return SimpleNamespace(
        Jsonata=Jsonata, Functions=Functions, JException=JException, RegexError=regex.error
    )


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
    lib = _library()
    try:
        lib.Jsonata(expression, regex_engine(Clock()))
    except lib.JException as exc:
        return [Problem(path, describe(exc, "is not valid JSONata"))]
    except lib.RegexError as exc:
        return [Problem(path, f"has an invalid regular expression: {exc}")]
    except RecursionError:
        return [Problem(path, "is not valid JSONata: nested too deeply to parse")]
    except _LIBRARY_FAULTS as exc:  # the parser's own faults on some invalid input (fuzzed)
        return [Problem(path, f"is not valid JSONata: the parser failed ({type(exc).__name__})")]
    return []


def describe(exc: Exception, what: str) -> str:
    """``what``, the JSONata error code, its position in the expression and its message."""
    code = getattr(exc, "error", None) or "error"
    location = getattr(exc, "location", -1)
    where = f" at position {location}" if isinstance(location, int) and location >= 0 else ""
    return f"{what} ({code}{where}): {exc}"


_compiled = threading.local()


def _compile(expression: str) -> tuple[Any, Clock]:
    """The compiled expression and the clock its regular expressions read, kept per thread
    (evaluation binds per-call state into both)."""
    cache: dict[str, tuple[Any, Clock]] | None = getattr(_compiled, "cache", None)
    if cache is None:
        cache = _compiled.cache = {}
    found = cache.get(expression)
    if found is None:
        if len(cache) >= _CACHE_ENTRIES:
            cache.pop(next(iter(cache)))
        clock = Clock()
        found = cache[expression] = (_library().Jsonata(expression, regex_engine(clock)), clock)
    return found


# The built-ins bound over the library's in every evaluation, with the library's signatures.
_BOUNDED_BUILTINS = {
    "pad": "<s-ns?:s>",
    "replace": "<s-(sf)(sf)n?:s>",
    "join": "<a<s>s?:s>",
    "string": "<x-b?:s>",
    "distinct": "<x:x>",
}


def evaluate(
    expression: str,
    document: Any,
    bounded: Limits = DEFAULT_LIMITS,
) -> Any:
    """The expression's result on ``document``; TransformError when it fails or overruns
    ``bounded``."""
    lib = _library()
    Jsonata = lib.Jsonata
    try:
        compiled, clock = _compile(expression)
        clock.start(bounded.timeout_ms)
        bounds = Bounds(
            clock, lib.Functions, bounded.max_depth, bounded.max_bytes, bounded.max_items
        )
        frame = compiled.create_frame()
        frame.set_evaluate_entry_callback(bounds.entry)
        frame.set_evaluate_exit_callback(bounds.exit)
        for name, signature in _BOUNDED_BUILTINS.items():
            bounded = getattr(bounds, name)
            frame.bind(name, Jsonata.JFunction(Jsonata.JLambda(bounded), signature))
        return compiled.evaluate(document, frame)
    except Overrun:
        raise
    except lib.JException as exc:
        raise TransformError(describe(exc, "the JSONata expression failed")) from None
    except lib.RegexError as exc:  # stored before regular expressions were checked this way
        raise TransformError(f"invalid regular expression: {exc}") from None
    except RecursionError:
        raise TransformError("the JSONata expression recursed too deeply") from None
    except MemoryError:
        raise TransformError("the JSONata expression ran out of memory") from None
    except _LIBRARY_FAULTS as exc:
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
    bounded: Limits = DEFAULT_LIMITS,
    *,
    legacy: bool = False,
) -> CloudEvent:
    """The transformed event: evaluated, merged, bounded and validated like ingress validates a
    structured event (``legacy``: the broker also accepts CloudEvents 0.3); TransformError
    naming what went wrong otherwise."""
    original = to_wire_json(event)
    result = evaluate(expression, original, bounded)
    max_bytes = bounded.max_bytes
    if result is None:
        raise TransformError("the JSONata expression gave no result (undefined) for this event")
    if not isinstance(result, Mapping):
        raise TransformError(
            "the JSONata expression must give a JSON object (a CloudEvent), "
            f"got {_json_type(result)}"
        )
    if json_size_exceeds(result, max_bytes):  # before writing it: shared values multiply
        raise TransformError(
            f"the transformed event is over {max_bytes} bytes; at most {max_bytes}"
        )
    try:
        encoded = dumps_utf8_stdlib(result)
    except (TypeError, ValueError) as exc:  # a function, NaN: not JSON
        raise TransformError(f"the JSONata result is not JSON: {exc}") from None
    if len(encoded) > max_bytes:
        raise TransformError(f"the transformed event is {len(encoded)} bytes; at most {max_bytes}")
    plain = json.loads(encoded)  # the library's own list and dict types, as plain JSON
    try:
        return codec.from_json(merge(plain, original), legacy=legacy)
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
