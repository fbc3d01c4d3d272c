"""CloudEvents SQL v1 (CESQL): parse an expression once, evaluate it against many events.

    expr = parse("type LIKE 'com.example.%' AND INT(sequence) > 10")
    value, errors = evaluate(expr, event)   # value: bool | int | str; errors: list[CesqlError]

``parse`` raises ``CesqlParseError`` (a ``ValueError``) naming the position. ``evaluate`` never
raises: CESQL is total, so failures come back as the error list next to a (zero) value. As a
filter, an expression matches only when the value is ``True`` and the error list is empty.

Identifiers address the event's attributes by name, exactly as the event carries them (no
``schemaurl``/``dataschema`` aliasing: that is a quirk of Knative's attribute filters only).

Extension (not in CESQL v1; docs/filters.md): ``data.a.b`` reads the event's JSON data
(``event_data``: structured JSON data, or bytes whose ``datacontenttype`` is JSON). Member names
are word characters and case-sensitive; an all-digit member also indexes an array
(``data.items.0.sku``). Typing follows CESQL's own: a JSON string is a String, a boolean a
Boolean, a whole number within 32 bits an Integer; anything else (null, objects, arrays, other
numbers) is a CastError, and a missing member, or no JSON data, a MissingAttributeError, so such
a term simply does not match. ``EXISTS data.a.b`` is true when the member is there (null too).
Exact terms ``data.a.b = 'text'`` and ``data.a.b IN (...)`` feed the trigger index.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from chalicelib.core.cloudevents.event import CloudEvent
from chalicelib.core.filtering.cesql.errors import CesqlError, CesqlParseError
from chalicelib.core.filtering.cesql.evaluator import Compiled, EventView, compile_tree
from chalicelib.core.filtering.cesql.nodes import DataPath, Exists, Node
from chalicelib.core.filtering.cesql.parser import parse_tree


@dataclass(frozen=True, slots=True)
class Expression:
    """A parsed, compiled CESQL expression; immutable and safe to share."""

    source: str
    tree: Node
    _run: Compiled = field(repr=False, compare=False)
    reads_data: bool = False

    def evaluate(self, event: CloudEvent) -> tuple[Any, list[CesqlError]]:
        errors: list[CesqlError] = []
        attrs = EventView(event) if self.reads_data else event.attributes
        return self._run(attrs, errors), errors

    def matches(self, event: CloudEvent) -> bool:
        errors: list[CesqlError] = []
        attrs = EventView(event) if self.reads_data else event.attributes
        return self._run(attrs, errors) is True and not errors


def parse(expression: str) -> Expression:
    tree = parse_tree(expression)
    return Expression(expression, tree, compile_tree(tree), _reads_data(tree))


def _reads_data(node: object) -> bool:
    if isinstance(node, DataPath) or (isinstance(node, Exists) and node.path is not None):
        return True
    if isinstance(node, (tuple, list)):
        return any(_reads_data(item) for item in node)
    if isinstance(node, Node):
        return any(_reads_data(getattr(node, name)) for name in node.__slots__)
    return False


def evaluate(expr: Expression, event: CloudEvent) -> tuple[Any, list[CesqlError]]:
    return expr.evaluate(event)


__all__ = [
    "CesqlError",
    "CesqlParseError",
    "Expression",
    "evaluate",
    "parse",
]
