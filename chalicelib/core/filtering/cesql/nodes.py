"""The CESQL syntax tree: plain immutable data, built by the parser, compiled by the evaluator."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

Literal = str | int | bool


@dataclass(frozen=True, slots=True)
class Node:
    position: int  # 1-based column where the construct starts


@dataclass(frozen=True, slots=True)
class Constant(Node):
    value: Literal


@dataclass(frozen=True, slots=True)
class Attribute(Node):
    name: str  # lower-cased


@dataclass(frozen=True, slots=True)
class Exists(Node):
    name: str
    path: tuple[str, ...] | None = None  # EXISTS data.a.b: the members under data


@dataclass(frozen=True, slots=True)
class DataPath(Node):
    """``data.a.b``: a value read from the event's JSON data (our extension, docs/filters.md)."""

    path: tuple[str, ...]

    @property
    def name(self) -> str:
        return "data." + ".".join(self.path)


@dataclass(frozen=True, slots=True)
class Unary(Node):
    op: str  # "NOT" or "-"
    operand: Node


@dataclass(frozen=True, slots=True)
class Binary(Node):
    op: str  # "AND" "OR" "XOR" "=" "!=" "<>" "<" "<=" ">" ">=" "+" "-" "*" "/" "%"
    left: Node
    right: Node


@dataclass(frozen=True, slots=True)
class Like(Node):
    operand: Node
    pattern: str  # as written, with \% and \_ escapes
    matcher: LikeMatcher
    negated: bool


@dataclass(frozen=True, slots=True)
class In(Node):
    operand: Node
    items: tuple[Node, ...]
    negated: bool


@dataclass(frozen=True, slots=True)
class Call(Node):
    name: str  # upper-cased
    args: tuple[Node, ...]


class _Segment:
    """A run of pattern characters between two ``%``: literals and ``_`` (any one character)."""

    __slots__ = ("_lead", "_search", "length", "literal", "regex")

    def __init__(self, chars: list[str | None]) -> None:
        self.length = len(chars)
        self.literal = None if None in chars else "".join(c for c in chars if c is not None)
        self.regex = re.compile("".join("." if c is None else re.escape(c) for c in chars), re.S)
        # Searching with a regex that starts with ``.`` tries every position in Python's re
        # (``'%____c%'`` over 1 MiB took 0.5 s). The search starts at the segment's first literal
        # character instead, with the leading wildcards counted back: re then skips ahead to
        # that literal in C, and only candidates are tried.
        lead = next((i for i, c in enumerate(chars) if c is not None), self.length)
        self._lead = lead
        self._search = re.compile(
            "".join("." if c is None else re.escape(c) for c in chars[lead:]), re.S
        )

    def at(self, text: str, pos: int) -> bool:
        if self.literal is not None:
            return text.startswith(self.literal, pos)
        return self.regex.match(text, pos) is not None

    def find(self, text: str, start: int, end: int) -> int:
        if self.literal is not None:
            return text.find(self.literal, start, end)
        if self._lead == self.length:  # only wildcards: any place with room
            return start if start + self.length <= end else -1
        found = self._search.search(text, start + self._lead, end)
        return -1 if found is None else found.start() - self._lead


class LikeMatcher:
    """``%`` = any run, ``_`` = one character, ``\\%``/``\\_`` = themselves, all else literal.

    Not a regular expression with ``.*``: those backtrack, and ``'%a%a%a%a%b'`` against a long
    attribute would stall ingress (any trigger author could write one). The pattern is split at
    ``%`` into fixed-length segments; the first is anchored at the start, the last at the end,
    and each middle one is taken at its leftmost fit, which is always a correct choice. So a
    match costs one forward search per segment, never a retry.
    """

    __slots__ = ("_head", "_middle", "_minimum", "_tail", "matches", "pattern")

    def __init__(self, pattern: str) -> None:
        self.pattern = pattern
        segments: list[list[str | None]] = [[]]
        i, n = 0, len(pattern)
        while i < n:
            c = pattern[i]
            if c == "\\" and i + 1 < n and pattern[i + 1] in "%_":
                segments[-1].append(pattern[i + 1])
                i += 2
                continue
            if c == "%":
                segments.append([])
            else:
                segments[-1].append(None if c == "_" else c)
            i += 1
        self._head = _Segment(segments[0])
        self._tail = _Segment(segments[-1]) if len(segments) > 1 else None
        self._middle = tuple(_Segment(chars) for chars in segments[1:-1] if chars)
        self._minimum = sum(len(chars) for chars in segments)
        self.matches: Callable[[str], bool] = _literal_shortcut(segments) or self._general

    def _general(self, text: str) -> bool:
        head, tail = self._head, self._tail
        if tail is None:
            return len(text) == head.length and head.at(text, 0)
        if len(text) < self._minimum or not head.at(text, 0):
            return False
        pos, end = head.length, len(text) - tail.length
        for segment in self._middle:
            found = segment.find(text, pos, end)
            if found < 0:
                return False
            pos = found + segment.length
        return tail.at(text, end)

    def __repr__(self) -> str:
        return f"LikeMatcher({self.pattern!r})"


def _literal_shortcut(segments: list[list[str | None]]) -> Callable[[str], bool] | None:
    """The usual patterns (exact, ``x%``, ``%x``, ``x%y``, ``%x%``) as plain string tests."""
    if any(None in chars for chars in segments):
        return None
    texts = ["".join(c for c in chars if c is not None) for chars in segments]
    if len(texts) == 1:
        return texts[0].__eq__
    if len(texts) == 2:
        head, tail = texts
        if not tail:
            return lambda text: text.startswith(head)
        if not head:
            return lambda text: text.endswith(tail)
        minimum = len(head) + len(tail)
        return lambda text: len(text) >= minimum and text.startswith(head) and text.endswith(tail)
    if len(texts) == 3 and not texts[0] and not texts[2]:
        middle = texts[1]
        return lambda text: middle in text
    return None
