"""The CESQL syntax tree: plain immutable data, built by the parser, compiled by the evaluator."""

from __future__ import annotations

import re
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
    regex: re.Pattern[str]
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


def like_regex(pattern: str) -> re.Pattern[str]:
    """``%`` = any run, ``_`` = one character, ``\\%``/``\\_`` = themselves, all else literal."""
    out: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "\\" and i + 1 < n and pattern[i + 1] in "%_":
            out.append(re.escape(pattern[i + 1]))
            i += 2
            continue
        if c == "%":
            out.append(".*")
        elif c == "_":
            out.append(".")
        else:
            out.append(re.escape(c))
        i += 1
    return re.compile("".join(out), re.DOTALL)
