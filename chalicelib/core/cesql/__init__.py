"""CloudEvents SQL v1 (CESQL): parse an expression once, evaluate it against many events.

Work in progress: the full lexer/parser/evaluator replace these placeholders.
"""

from __future__ import annotations

from typing import Any

from chalicelib.core.event import CloudEvent


class CesqlError(Exception):
    """An error found while evaluating an expression (evaluation continues with a zero value)."""


class CesqlParseError(ValueError):
    """The expression is not valid CESQL; the message names the position."""


class Expression:
    """A parsed CESQL expression."""


def parse(expression: str) -> Expression:
    raise CesqlParseError("CESQL is not implemented yet")


def evaluate(expr: Expression, event: CloudEvent) -> tuple[Any, list[CesqlError]]:
    return False, [CesqlError("CESQL is not implemented yet")]


__all__ = ["CesqlError", "CesqlParseError", "Expression", "evaluate", "parse"]
