"""The leaf matchers of the ``eventPattern`` dialect (``event_pattern``): each tests one JSON
scalar of the event, as Amazon EventBridge's matcher (aws/event-ruler) does, with one difference
kept on purpose: ``equals-ignore-case`` (alone or in a prefix, suffix or anything-but) compares
full Unicode case foldings of both sides, where event-ruler maps the pattern's characters one by
one (so it finds ``straße`` in ``STRASSE`` but not ``strasse`` in ``STRAßE``; we find both)."""

from __future__ import annotations

import ipaddress
import json
import operator
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final

COMPARE: Final[dict[str, Callable[[float, float], bool]]] = {
    "=": operator.eq,
    ">": operator.gt,
    ">=": operator.ge,
    "<": operator.lt,
    "<=": operator.le,
}


def is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _same(expected: object, value: object) -> bool:
    if isinstance(expected, str):
        return isinstance(value, str) and value == expected
    if isinstance(expected, bool) or expected is None:
        return value is expected
    return is_number(value) and value == expected


@dataclass(frozen=True, slots=True)
class Equals:
    value: str | int | float | bool | None

    def test(self, value: object) -> bool:
        return _same(self.value, value)

    def describe(self) -> str:
        return json.dumps(self.value)


@dataclass(frozen=True, slots=True)
class Affix:
    """``{"prefix"}`` or ``{"suffix"}`` (``at_end``): the value starts (ends) with ``text``; with
    ``{"equals-ignore-case"}``, both are casefolded (full Unicode case folding) before they are
    compared: ``straße`` is a prefix of ``STRASSE-1``, ``ﬁle`` of ``FILE.txt``."""

    text: str
    at_end: bool = False
    ignore_case: bool = False
    folded: str = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "folded", self.text.casefold())

    def test(self, value: object) -> bool:
        if not isinstance(value, str):
            return False
        if not self.ignore_case:
            return value.endswith(self.text) if self.at_end else value.startswith(self.text)
        # Folding never shortens a character, so the value's first (last) n characters fold to
        # at least the first (last) n folded ones: only that end of a long value is folded.
        n = len(self.folded)
        if self.at_end:
            return value[-n:].casefold().endswith(self.folded) if n else True
        return value[:n].casefold().startswith(self.folded)

    def describe(self) -> str:
        inner = {"equals-ignore-case": self.text} if self.ignore_case else self.text
        return json.dumps({"suffix" if self.at_end else "prefix": inner})


@dataclass(frozen=True, slots=True)
class EqualsIgnoreCase:
    """The value equals one of ``texts`` once both are casefolded (several only under
    ``anything-but``)."""

    texts: tuple[str, ...]
    folded: frozenset[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "folded", frozenset(t.casefold() for t in self.texts))

    def test(self, value: object) -> bool:
        return isinstance(value, str) and value.casefold() in self.folded

    def describe(self) -> str:
        shown = self.texts[0] if len(self.texts) == 1 else list(self.texts)
        return json.dumps({"equals-ignore-case": shown})


class Wildcard:
    """``*`` = any run of characters, ``\\*`` = a star, ``\\\\`` = a backslash. Matched segment by
    segment (head anchored, tail anchored, each middle at its leftmost fit), never by
    backtracking, so a match costs one forward search per segment."""

    __slots__ = ("pattern", "segments")

    def __init__(self, pattern: str) -> None:
        self.pattern = pattern
        self.segments = wildcard_segments(pattern)

    def test(self, value: object) -> bool:
        if not isinstance(value, str):
            return False
        segments = self.segments
        if len(segments) == 1:
            return value == segments[0]
        head, tail = segments[0], segments[-1]
        if len(value) < len(head) + len(tail) or not value.startswith(head):
            return False
        pos, end = len(head), len(value) - len(tail)
        for middle in segments[1:-1]:
            found = value.find(middle, pos, end)
            if found < 0:
                return False
            pos = found + len(middle)
        return value.endswith(tail)

    def describe(self) -> str:
        return json.dumps({"wildcard": self.pattern})

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Wildcard) and other.pattern == self.pattern

    def __hash__(self) -> int:
        return hash(self.pattern)


def wildcard_segments(pattern: str) -> tuple[str, ...]:
    segments, current, i = [], [], 0
    while i < len(pattern):
        char = pattern[i]
        if char == "\\" and i + 1 < len(pattern) and pattern[i + 1] in "*\\":
            current.append(pattern[i + 1])
            i += 2
            continue
        if char == "*":
            segments.append("".join(current))
            current = []
        else:
            current.append(char)
        i += 1
    segments.append("".join(current))
    return tuple(segments)


@dataclass(frozen=True, slots=True)
class AnythingBut:
    """Not one of ``values``; or, for strings, none of ``inner`` (each prefix, suffix,
    equals-ignore-case or wildcard of ``{"anything-but": {"prefix": [...]}}``)."""

    values: tuple[str | int | float | bool | None, ...] = ()
    inner: tuple[Affix | EqualsIgnoreCase | Wildcard, ...] = ()

    def test(self, value: object) -> bool:
        if self.inner:
            return isinstance(value, str) and not any(m.test(value) for m in self.inner)
        return not any(_same(expected, value) for expected in self.values)

    def describe(self) -> str:
        first = self.inner[0] if self.inner else None
        if first is None:
            shown: object = self.values[0] if len(self.values) == 1 else list(self.values)
        elif isinstance(first, EqualsIgnoreCase):
            shown = json.loads(first.describe())
        else:
            name = "wildcard" if isinstance(first, Wildcard) else ""
            name = name or ("suffix" if getattr(first, "at_end", False) else "prefix")
            texts = [
                m.pattern if isinstance(m, Wildcard) else getattr(m, "text", "") for m in self.inner
            ]
            shown = {name: texts[0] if len(texts) == 1 else texts}
        return json.dumps({"anything-but": shown})


@dataclass(frozen=True, slots=True)
class Numeric:
    conditions: tuple[tuple[str, int | float], ...]

    def test(self, value: object) -> bool:
        if not is_number(value):
            return False
        assert isinstance(value, (int, float))
        return all(COMPARE[op](value, bound) for op, bound in self.conditions)

    def describe(self) -> str:
        return json.dumps({"numeric": [x for pair in self.conditions for x in pair]})


@dataclass(frozen=True, slots=True)
class Exists:
    present: bool

    def test(self, value: object) -> bool:
        return self.present

    def describe(self) -> str:
        return json.dumps({"exists": self.present})


@dataclass(frozen=True, slots=True)
class Cidr:
    network: ipaddress.IPv4Network | ipaddress.IPv6Network

    def test(self, value: object) -> bool:
        if not isinstance(value, str) or len(value) > 64:
            return False
        try:
            address = ipaddress.ip_address(value)
        except ValueError:  # not an IP address: the term does not match, as in EventBridge
            return False
        return address.version == self.network.version and address in self.network

    def describe(self) -> str:
        return json.dumps({"cidr": str(self.network)})


Matcher = Equals | Affix | EqualsIgnoreCase | Wildcard | AnythingBut | Numeric | Exists | Cidr
