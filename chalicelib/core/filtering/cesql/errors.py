"""The CESQL error kinds (spec §3.3). Each carries the ``kind`` name the TCK uses.

Evaluation errors are collected, never raised: an expression is total, so every operator returns a
value (the zero value of its type when it failed) and appends what went wrong to the error list.
Only ``CesqlParseError`` is raised, by ``parse``.
"""

from __future__ import annotations

from typing import ClassVar


class CesqlError(Exception):
    """Base of every CESQL error; ``kind`` is the TCK's name for it."""

    kind: ClassVar[str] = "generic"


class GenericError(CesqlError):
    kind = "generic"


class MathError(CesqlError):
    kind = "math"


class CastError(CesqlError):
    kind = "cast"


class MissingAttributeError(CesqlError):
    kind = "missingAttribute"


class MissingFunctionError(CesqlError):
    kind = "missingFunction"


class FunctionEvaluationError(CesqlError):
    kind = "functionEvaluation"


class CesqlParseError(CesqlError, ValueError):
    """The text is not a CESQL expression. ``position`` is the 1-based column of the problem."""

    kind = "parse"

    def __init__(self, message: str, position: int) -> None:
        super().__init__(f"{message} at position {position}")
        self.reason = message
        self.position = position
