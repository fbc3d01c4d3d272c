"""CloudEvents SQL v1 (CESQL): parse an expression once, evaluate it against many events.

    expr = parse("type LIKE 'com.example.%' AND INT(sequence) > 10")
    value, errors = evaluate(expr, event)   # value: bool | int | str; errors: list[CesqlError]

``parse`` raises ``CesqlParseError`` (a ``ValueError``) naming the position. ``evaluate`` never
raises: CESQL is total, so failures come back as the error list next to a (zero) value. As a
filter, an expression matches only when the value is ``True`` and the error list is empty.

Identifiers address the event's attributes by name, exactly as the event carries them (no
``schemaurl``/``dataschema`` aliasing: that is a quirk of Knative's attribute filters only).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from chalicelib.core.cloudevents.event import CloudEvent
from chalicelib.core.filtering.cesql.errors import (
    CastError,
    CesqlError,
    CesqlParseError,
    FunctionEvaluationError,
    GenericError,
    MathError,
    MissingAttributeError,
    MissingFunctionError,
)
from chalicelib.core.filtering.cesql.evaluator import Compiled, compile_tree
from chalicelib.core.filtering.cesql.nodes import Node
from chalicelib.core.filtering.cesql.parser import parse_tree


@dataclass(frozen=True, slots=True)
class Expression:
    """A parsed, compiled CESQL expression; immutable and safe to share."""

    source: str
    tree: Node
    _run: Compiled = field(repr=False, compare=False)

    def evaluate(self, event: CloudEvent) -> tuple[Any, list[CesqlError]]:
        errors: list[CesqlError] = []
        return self._run(event.attributes, errors), errors

    def matches(self, event: CloudEvent) -> bool:
        errors: list[CesqlError] = []
        return self._run(event.attributes, errors) is True and not errors


def parse(expression: str) -> Expression:
    tree = parse_tree(expression)
    return Expression(expression, tree, compile_tree(tree))


def evaluate(expr: Expression, event: CloudEvent) -> tuple[Any, list[CesqlError]]:
    return expr.evaluate(event)


__all__ = [
    "CastError",
    "CesqlError",
    "CesqlParseError",
    "Expression",
    "FunctionEvaluationError",
    "GenericError",
    "MathError",
    "MissingAttributeError",
    "MissingFunctionError",
    "evaluate",
    "parse",
]
