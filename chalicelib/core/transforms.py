"""EventTransform's JSONata (docs/transforms.md): checking an expression at PUT, and applying it to
an event at delivery. Pure: the library (``jsonata-python``) is pure Python, and nothing here does
I/O.

The expression's input is the event's JSON form (``json_format.to_wire_json``: attributes as
members, JSON data as a JSON value). Its result must be a JSON object that is a valid CloudEvent,
after the merge rule: ``id``, ``source``, ``type`` and ``specversion`` the result lacks (absent
or null) are the input event's. Nothing else is carried over: the result is the whole event.

Bounds (``core/limits.py``): the expression's size (at PUT); during evaluation, checked at the
entry and exit of every evaluation step (as JSONata's own timebox does), its time, its depth, and
the size of every step's value (a string's characters, an array's items; ``$pad`` is checked
before it allocates), and the characters of the strings its calls and concatenations make in
all; and the result's size in bytes. A single built-in call runs to its end
before the next check: the deadline is that precise (docs/transforms.md, "Limits")."""

from __future__ import annotations

import functools
import json
import re
import threading
import time
from collections.abc import Mapping
from types import SimpleNamespace
from typing import Any

from chalicelib.core import limits
from chalicelib.core.cloudevents import codec
from chalicelib.core.cloudevents.event import CloudEvent
from chalicelib.core.cloudevents.json_format import dumps_utf8_stdlib, to_wire_json
from chalicelib.core.errors import Problem, ValidationError

# The attributes a result keeps from the input event when it lacks them (the merge rule).
INHERITED = ("specversion", "id", "source", "type")
_CACHE_ENTRIES = 64  # compiled expressions per thread (a compiled one is used by one thread)
# The evaluation steps whose string results are new strings (calls, concatenation), counted
# together against a budget of MADE_CHARS_FACTOR × the bound on one string: a map of $pad or
# $join over many items makes many strings each under the bound, in well under the deadline.
_MAKING_STEPS = frozenset({"function", "binary", "apply", "partial"})
MADE_CHARS_FACTOR = 4


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
    from jsonata import Jsonata
    from jsonata.functions import Functions
    from jsonata.jexception import JException

    return SimpleNamespace(Jsonata=Jsonata, Functions=Functions, JException=JException)


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
    lib = _library()
    try:
        lib.Jsonata(expression)
    except lib.JException as exc:
        return [Problem(path, describe(exc, "is not valid JSONata"))]
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


class _Overrun(TransformError):
    """Raised from inside an evaluation by the bounds (so the library cannot mistake it)."""


class _Bounds:
    """One evaluation's bounds, as callbacks at the entry and exit of every evaluation step."""

    def __init__(self, timeout_ms: int, max_depth: int, max_chars: int, max_items: int) -> None:
        self.deadline = time.monotonic() + timeout_ms / 1000
        self.timeout_ms, self.max_depth = timeout_ms, max_depth
        self.max_chars, self.max_items = max_chars, max_items
        self.depth = 0
        self.made_chars = 0
        self._functions = _library().Functions
        self.max_made_chars = MADE_CHARS_FACTOR * max_chars

    def entry(self, expr: Any, value: Any, env: Any) -> None:
        if env.is_parallel_call:
            return
        self.depth += 1
        if self.depth > self.max_depth:
            raise _Overrun(f"the JSONata expression nests deeper than {self.max_depth} steps")
        self._clock()

    def exit(self, expr: Any, value: Any, env: Any, result: Any) -> None:
        if env.is_parallel_call:
            return
        self.depth -= 1
        self._clock()
        if isinstance(result, str):
            if len(result) > self.max_chars:
                raise _Overrun(
                    f"the JSONata expression made a string of {len(result)} characters; "
                    f"at most {self.max_chars}"
                )
            if getattr(expr, "type", None) in _MAKING_STEPS:
                self.made_chars += len(result)
                if self.made_chars > self.max_made_chars:
                    raise _Overrun(
                        f"the JSONata expression made more than {self.max_made_chars} "
                        "characters of strings in all"
                    )
        if isinstance(result, list) and len(result) > self.max_items:
            raise _Overrun(
                f"the JSONata expression made an array of {len(result)} items; "
                f"at most {self.max_items}"
            )

    def _clock(self) -> None:
        if time.monotonic() > self.deadline:
            raise _Overrun(f"the JSONata expression ran longer than {self.timeout_ms} ms")

    def pad(self, string: Any, width: Any, char: Any = None) -> Any:
        """``$pad``, refusing a width past the bound before it allocates."""
        if isinstance(width, int | float) and abs(width) > self.max_chars:
            raise _Overrun(f"$pad to {int(width)} characters; at most {self.max_chars}")
        return self._functions.pad(string, width, char)

    def replace(self, string: Any, pattern: Any, replacement: Any, limit: Any = None) -> Any:
        """``$replace`` with a string replacement, refused before it allocates a result past
        the bound (from the number of matches, one C-speed pass; each ``$`` group reference adds
        at most the string's length), and done at C speed: the library's own copies the rest of
        the string at every match of a string pattern (quadratic: 30 s for a million matches)
        and scans the string again for every match up to a regex's limit. A replacement
        function goes to the library: each of its calls is a bounded evaluation step."""
        usable_limit = limit is None or (isinstance(limit, int | float) and limit >= 0)
        if not (isinstance(string, str) and isinstance(replacement, str) and usable_limit):
            return self._functions.replace(string, pattern, replacement, limit)  # its own errors
        most_matches = None if limit is None else int(limit)
        if isinstance(pattern, str):
            if not pattern:
                return self._functions.replace(string, pattern, replacement, limit)
            count = string.count(pattern)
            count = count if most_matches is None else min(count, most_matches)
            matched = count * len(pattern)
        else:
            count = matched = 0
            for found in pattern.finditer(string):
                if most_matches is not None and count >= most_matches:
                    break
                count += 1
                matched += found.end() - found.start()
        # What is kept, the replacements, and what each $ group reference can bring back.
        most = len(string) - matched + count * len(replacement)
        most += matched * replacement.count("$")
        if most > self.max_chars:
            raise _Overrun(
                f"$replace could make {most} characters ({count} matches); at most {self.max_chars}"
            )
        if isinstance(pattern, str):
            # Every match is the pattern itself: its replacement, expanded once as the library
            # expands it ($0, $$), is the same for all of them.
            once = self._functions.replace(pattern, pattern, replacement, 1)
            return string.replace(pattern, once, -1 if limit is None else int(limit))
        if limit is None:
            return self._functions.replace(string, pattern, replacement, None)  # one re.sub already
        return pattern.sub(self._functions.safe_replacement(replacement), string, count=int(limit))


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
        found = cache[expression] = _library().Jsonata(expression)
    return found


def evaluate(
    expression: str,
    document: Any,
    *,
    timeout_ms: int = limits.TRANSFORM_TIMEOUT_MS,
    max_depth: int = limits.TRANSFORM_MAX_DEPTH,
    max_chars: int = limits.MAX_TRANSFORM_OUTPUT_BYTES,
    max_items: int = limits.MAX_TRANSFORM_ITEMS,
) -> Any:
    """The expression's result on ``document``; TransformError when it fails or overruns."""
    bounds = _Bounds(timeout_ms, max_depth, max_chars, max_items)
    lib = _library()
    Jsonata = lib.Jsonata
    try:
        compiled = _compile(expression)
        frame = compiled.create_frame()
        frame.set_evaluate_entry_callback(bounds.entry)
        frame.set_evaluate_exit_callback(bounds.exit)
        # JSONata's signature of $pad (the library's own), over the bounded implementation.
        frame.bind("pad", Jsonata.JFunction(Jsonata.JLambda(bounds.pad), "<s-ns?:s>"))
        replace = Jsonata.JFunction(Jsonata.JLambda(bounds.replace), "<s-(sf)(sf)n?:s>")
        frame.bind("replace", replace)
        return compiled.evaluate(document, frame)
    except _Overrun as exc:
        raise TransformError(str(exc)) from None
    except lib.JException as exc:
        raise TransformError(describe(exc, "the JSONata expression failed")) from None
    except RecursionError:
        raise TransformError("the JSONata expression recursed too deeply") from None
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
    *,
    timeout_ms: int = limits.TRANSFORM_TIMEOUT_MS,
    max_depth: int = limits.TRANSFORM_MAX_DEPTH,
    max_bytes: int = limits.MAX_TRANSFORM_OUTPUT_BYTES,
    legacy: bool = False,
) -> CloudEvent:
    """The transformed event: evaluated, merged, bounded and validated like ingress validates a
    structured event (``legacy``: the broker also accepts CloudEvents 0.3); TransformError
    naming what went wrong otherwise."""
    original = to_wire_json(event)
    result = evaluate(
        expression, original, timeout_ms=timeout_ms, max_depth=max_depth, max_chars=max_bytes
    )
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
