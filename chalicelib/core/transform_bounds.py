"""The bounds of one JSONata evaluation (docs/transforms.md, "Limits"), on every evaluation path.

Three kinds of work run inside an evaluation, and each is bounded here:

- **Evaluation steps** (``entry``/``exit``, called by the library at every step): the deadline,
  the nesting depth, and the size of every step's value. Every step counts, including the items of
  an array or object constructor after the first, which the library marks as "parallel calls"
  (JSONata's async heritage; here they run one after the other like any step).
- **Regular expressions**: compiled by the ``regex`` module instead of ``re`` (the same syntax)
  and run with the evaluation's remaining time as their timeout: a backtracking blow-up
  (``/(a|aa)+$/``) stops at the deadline instead of running for minutes inside one call.
- **Built-ins that run long or allocate in one call**, checked before they run: ``$pad`` and
  ``$replace`` (the result's size), ``$join`` and ``$string`` (the text they would make: an array
  of a million references to one large string costs nothing until it is written out), and
  ``$distinct`` (quadratic in the library; here it watches the deadline as it goes).

Whatever a bound stops raises ``Overrun``, a ``TransformError``: the reason for that one event."""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator
from typing import Any


class TransformError(Exception):
    """The expression failed on this event, or its result is not a valid CloudEvent: the
    reason, as the dead letter's ``knativeerrordata`` says it. Deterministic: never retried."""


class Overrun(TransformError):
    """Raised from inside an evaluation by the bounds (so the library cannot mistake it)."""


# The evaluation steps whose string results are new strings (calls, concatenation), counted
# together against a budget of MADE_CHARS_FACTOR × the bound on one string: a map of $pad or
# $join over many items makes many strings each under the bound, in well under the deadline.
_MAKING_STEPS = frozenset({"function", "binary", "apply", "partial"})
MADE_CHARS_FACTOR = 4


# A group reference in a replacement template, as ``Functions.safe_replacement`` writes ``$n``.
_GROUP_REFERENCE = re.compile(r"\\g<([0-9]+)>")


class Clock:
    """An evaluation's deadline, shared by its steps and its regular expressions."""

    __slots__ = ("deadline", "timeout_ms")

    def __init__(self) -> None:
        self.deadline = float("inf")
        self.timeout_ms = 0

    def start(self, timeout_ms: int) -> None:
        self.timeout_ms = timeout_ms
        self.deadline = time.monotonic() + timeout_ms / 1000

    def remaining(self) -> float:
        """Seconds left; ``Overrun`` when none."""
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise self.overrun()
        return left

    def overrun(self, where: str = "") -> Overrun:
        return Overrun(f"the JSONata expression ran longer than {self.timeout_ms} ms{where}")


class BoundedPattern:
    """A regular expression of the ``regex`` module run with the clock's remaining time as its
    timeout. The methods JSONata's built-ins call (``jsonata.regex_engine.CompiledPattern``)."""

    __slots__ = ("_clock", "_compiled", "pattern")

    def __init__(self, compiled: Any, clock: Clock) -> None:
        self._compiled = compiled
        self._clock = clock
        self.pattern: str = compiled.pattern

    def _timed(self, call: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        try:
            return call(*args, timeout=self._clock.remaining(), **kwargs)
        except TimeoutError:
            raise self._clock.overrun(f" (in the regular expression /{self.pattern}/)") from None

    def search(self, string: str) -> Any:
        return self._timed(self._compiled.search, string)

    def match(self, string: str) -> Any:
        return self._timed(self._compiled.match, string)

    def fullmatch(self, string: str) -> Any:
        return self._timed(self._compiled.fullmatch, string)

    def finditer(self, string: str) -> Iterator[Any]:
        matches = self._timed(self._compiled.finditer, string)
        try:
            yield from matches  # the timeout covers the whole iteration
        except TimeoutError:
            raise self._clock.overrun(f" (in the regular expression /{self.pattern}/)") from None

    def sub(self, repl: Any, string: str, count: int = 0) -> str:
        if isinstance(repl, str):
            repl = _GROUP_REFERENCE.sub(self._existing_group, repl)
        result: str = self._timed(self._compiled.sub, repl, string, count=count)
        return result

    def _existing_group(self, reference: re.Match[str]) -> str:
        """JSONata's reading of ``$12`` when there is no group 12 (the library reads it from
        ``re``'s error message, which ``regex`` words otherwise): group 1, then a literal
        ``2``; a one-digit group that does not exist: nothing."""
        group, dropped = reference.group(1), ""
        while int(group) > self._compiled.groups:
            if len(group) == 1:
                return dropped
            group, dropped = group[:-1], group[-1] + dropped
        return f"\\g<{group}>{dropped}"

    def subn(self, repl: Any, string: str, count: int = 0) -> tuple[str, int]:
        if isinstance(repl, str):
            repl = _GROUP_REFERENCE.sub(self._existing_group, repl)
        result: tuple[str, int] = self._timed(self._compiled.subn, repl, string, count=count)
        return result

    def split(self, string: str, maxsplit: int = 0) -> list[str]:
        result: list[str] = self._timed(self._compiled.split, string, maxsplit=maxsplit)
        return result


def regex_engine(clock: Clock) -> Callable[[str, Any], BoundedPattern]:
    """The ``regex_engine`` of ``jsonata.Jsonata``: literals compiled by the ``regex`` module
    (``re``'s syntax; its errors are ``regex.error``), matched within ``clock``'s deadline."""
    import regex

    def compile_literal(pattern: str, flags: Any) -> BoundedPattern:
        native = regex.V0
        if flags.case_insensitive:
            native |= regex.IGNORECASE
        if flags.multiline:
            native |= regex.MULTILINE
        return BoundedPattern(regex.compile(pattern, native), clock)

    return compile_literal


class Bounds:
    """One evaluation's bounds, as callbacks at the entry and exit of every evaluation step, and
    as the bounded built-ins the evaluation's frame binds."""

    def __init__(
        self, clock: Clock, functions: Any, max_depth: int, max_chars: int, max_items: int
    ) -> None:
        self.clock = clock
        self.max_depth = max_depth
        self.max_chars, self.max_items = max_chars, max_items
        self.depth = 0
        self.made_chars = 0
        self.max_made_chars = MADE_CHARS_FACTOR * max_chars
        self._functions = functions

    def entry(self, expr: Any, value: Any, env: Any) -> None:
        self.depth += 1
        if self.depth > self.max_depth:
            raise Overrun(f"the JSONata expression nests deeper than {self.max_depth} steps")
        self.clock.remaining()

    def exit(self, expr: Any, value: Any, env: Any, result: Any) -> None:
        self.depth -= 1
        self.clock.remaining()
        if isinstance(result, str):
            if len(result) > self.max_chars:
                raise Overrun(
                    f"the JSONata expression made a string of {len(result)} characters; "
                    f"at most {self.max_chars}"
                )
            if getattr(expr, "type", None) in _MAKING_STEPS:
                self.made_chars += len(result)
                if self.made_chars > self.max_made_chars:
                    raise Overrun(
                        f"the JSONata expression made more than {self.max_made_chars} "
                        "characters of strings in all"
                    )
        if isinstance(result, list) and len(result) > self.max_items:
            raise Overrun(
                f"the JSONata expression made an array of {len(result)} items; "
                f"at most {self.max_items}"
            )

    # -- bounded built-ins (bound over the library's by the evaluation's frame) ---------------

    def pad(self, string: Any, width: Any, char: Any = None) -> Any:
        """``$pad``, refusing a width past the bound before it allocates."""
        if isinstance(width, int | float) and abs(width) > self.max_chars:
            raise Overrun(f"$pad to {int(width)} characters; at most {self.max_chars}")
        return self._functions.pad(string, width, char)

    def join(self, strings: Any, separator: Any = None) -> Any:
        """``$join``, refusing a result past the bound before it allocates."""
        if isinstance(strings, list) and all(isinstance(s, str) for s in strings):
            sep = len(separator) if isinstance(separator, str) else 0
            most = sum(map(len, strings)) + sep * max(len(strings) - 1, 0)
            if most > self.max_chars:
                raise Overrun(f"$join would make {most} characters; at most {self.max_chars}")
        return self._functions.join(strings, separator)

    def string(self, value: Any, prettify: Any = None) -> Any:
        """``$string``, refusing a text past the bound before it is written."""
        if isinstance(value, list | dict):
            # Pretty printing adds at most a line and an indent per member: 4 × the compact size
            # is ample room, and the bound on the result itself is checked at the step's exit.
            limit = self.max_chars * (4 if prettify else 1)
            if json_size_exceeds(value, limit, self.clock):
                raise Overrun(f"$string would make more than {self.max_chars} characters")
        return self._functions.string(value, prettify)

    def distinct(self, values: Any) -> Any:
        """``$distinct`` as the library answers it (first occurrences, compared with ``==``),
        in linear time for scalars (a set holds what ``==`` tells apart, hashes agreeing with
        it) and with the deadline checked at every array or object (compared one by one): the
        library's own compares every item with every other in one call."""
        if not isinstance(values, list) or len(values) <= 1:
            return values
        from jsonata.utils import Utils

        result = Utils.create_sequence() if isinstance(values, Utils.JList) else []
        scalars: set[Any] = set()
        containers: list[Any] = []
        for item in values:
            if isinstance(item, list | dict):
                self.clock.remaining()
                if item in containers:
                    continue
                containers.append(item)
            elif isinstance(item, str | int | float | bool) or item is None:
                if item in scalars:
                    continue
                scalars.add(item)
            else:  # a function or the library's null: compared as the library compares them
                self.clock.remaining()
                if item in result:
                    continue
            result.append(item)
        return result

    def replace(self, string: Any, pattern: Any, replacement: Any, limit: Any = None) -> Any:
        """``$replace`` with a string replacement, refused before it allocates a result past
        the bound (from the number and length of the matches, one C-speed pass; each ``$`` group
        reference adds at most the string's length), and done at C speed: the library's own
        copies the rest of the string at every match of a string pattern (quadratic: 30 s for a
        million matches) and scans the string again for every match up to a regex's limit. A
        replacement function goes to the library: each of its calls is a bounded evaluation
        step."""
        functions = self._functions
        usable_limit = limit is None or (isinstance(limit, int | float) and limit >= 0)
        if not (isinstance(string, str) and isinstance(replacement, str) and usable_limit):
            return functions.replace(string, pattern, replacement, limit)  # its own errors
        most_matches = None if limit is None else int(limit)
        if isinstance(pattern, str):
            if not pattern:
                return functions.replace(string, pattern, replacement, limit)
            count = string.count(pattern)
            count = count if most_matches is None else min(count, most_matches)
            matched = count * len(pattern)
        else:
            if most_matches == 0:
                return string
            # One C-speed pass: the matches removed tell their number and their length.
            kept, count = pattern.subn("", string, most_matches or 0)
            matched = len(string) - len(kept)
        # What is kept, the replacements, and what each $ group reference can bring back.
        most = len(string) - matched + count * len(replacement)
        most += matched * replacement.count("$")
        if most > self.max_chars:
            raise Overrun(
                f"$replace could make {most} characters ({count} matches); at most {self.max_chars}"
            )
        if isinstance(pattern, str):
            # Every match is the pattern itself: its replacement, expanded once as the library
            # expands it ($0, $$), is the same for all of them.
            once = functions.replace(pattern, pattern, replacement, 1)
            return string.replace(pattern, once, -1 if limit is None else int(limit))
        if limit is None:
            return functions.replace(string, pattern, replacement, None)  # one sub already
        return pattern.sub(functions.safe_replacement(replacement), string, count=int(limit))


def json_size_exceeds(value: Any, limit: int, clock: Clock | None = None) -> bool:
    """Whether ``value`` written as compact JSON would surely exceed ``limit`` characters
    (counting a lower bound: strings whole, one character per other scalar), found without
    writing it, iteratively, stopping as soon as it does. A value shared by many places counts
    at each, as a writer writes it at each."""
    size = 0
    stack = [value]
    visited = 0
    while stack:
        item = stack.pop()
        visited += 1
        if clock is not None and not visited & 0xFFF:
            clock.remaining()
        if isinstance(item, str):
            size += len(item) + 2
        elif isinstance(item, dict):
            size += 2 + 2 * len(item)  # braces, a colon and a comma (or the end) per member
            for key, member in item.items():
                size += len(key) + 2 if isinstance(key, str) else 8
                stack.append(member)
        elif isinstance(item, list):
            size += 2 + len(item)
            stack.extend(item)
        else:
            size += 1  # a number, true, false, null: at least one character (a lower bound)
        if size > limit:
            return True
    return False
