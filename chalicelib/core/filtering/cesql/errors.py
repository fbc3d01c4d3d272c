"""The CESQL errors (spec §3.3), each with the ``kind`` name the TCK uses.

Evaluation errors are collected, never raised: an expression is total, so every operator returns a
value (the zero value of its type when it failed) and appends what went wrong to the error list.
Only ``CesqlParseError`` is raised, by ``parse``.
"""

from __future__ import annotations

from typing import Literal

Kind = Literal[
    "generic", "math", "cast", "missingAttribute", "missingFunction", "functionEvaluation", "parse"
]


class CesqlError(Exception):
    """One CESQL error; ``kind`` is the TCK's name for it (a cast error is ``"cast"``)."""

    def __init__(self, kind: Kind, message: str) -> None:
        super().__init__(message)
        self.kind = kind


class CesqlParseError(CesqlError, ValueError):
    """The text is not a CESQL expression. ``position`` is the 1-based column of the problem."""

    def __init__(self, message: str, position: int) -> None:
        super().__init__("parse", f"{message} at position {position}")
        self.reason = message
        self.position = position
