"""Trigger filters: Knative's ``spec.filter.attributes`` and the ``spec.filters`` dialects.

One factory (``build_filter``) turns a trigger's spec into a small composable ``Filter`` object;
``validate_filters`` reports every problem at once, so an invalid filter is refused when the
trigger is created instead of being skipped (match-all) at runtime as Knative does.

Attribute lookup (Knative's ``LookupAttribute``): an attribute as the event carries it;
``schemaurl`` and ``dataschema`` stand in for each other (0.3 vs 1.0 name), and ``datamediatype``
is the media type of ``datacontenttype``. ``time`` is compared as the producer wrote it (Go
re-formats it first).

Non-string attribute values (integers and booleans from structured JSON) are compared through their
canonical CloudEvents string form (``true``/``false``, decimal), by every attribute dialect. Binary
mode carries them as exactly that text, so an event routes the same way in either content mode.
Knative's legacy ``filter.attributes`` compares ``string != interface{}`` in Go, so there such
values never match; the ``exact``/``prefix``/``suffix`` dialects use ``%v``, the same text as ours.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Protocol

from chalicelib.core.cloudevents.event import CloudEvent
from chalicelib.core.errors import Problem, ValidationError
from chalicelib.core.filtering import cesql, event_pattern
from chalicelib.core.filtering.cesql import nodes
from chalicelib.core.filtering.event_data import data_text

Hints = Mapping[str, frozenset[str]]
"""A necessary condition for a match: for each key, the attribute's text must be in the set."""

NO_HINTS: Final[Hints] = {}

KEY_PATTERN: Final = re.compile(r"[a-z][a-z0-9]*", re.ASCII)
DIALECTS: Final = ("exact", "prefix", "suffix", "all", "any", "not", "cesql", "eventPattern")
MAX_NESTING: Final = 32

_ALIASES: Final = {"schemaurl": "dataschema", "dataschema": "schemaurl"}


class Filter(Protocol):
    def matches(self, event: CloudEvent) -> bool: ...


def canonical_text(value: object) -> str:
    """The CloudEvents canonical string form of an attribute value."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return value if isinstance(value, str) else str(value)


def attribute_text(attributes: Mapping[str, object], name: str) -> str | None:
    """The attribute ``name`` as text, or ``None`` when the event does not have it."""
    value = attributes.get(name)
    if value is None:
        if name == "datamediatype":
            content_type = attributes.get("datacontenttype")
            if not isinstance(content_type, str):
                return None
            return content_type.split(";", 1)[0].strip().lower()
        alias = _ALIASES.get(name)
        if alias is None:
            return None
        value = attributes.get(alias)
        if value is None:
            return None
    return value if type(value) is str else canonical_text(value)


def index_hints(filter: Filter) -> Hints:
    """The filter's necessary exact-match conditions (empty when it has none, or is foreign)."""
    hints = getattr(filter, "index_hints", None)
    return hints() if callable(hints) else NO_HINTS


# -- the filters -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class MatchAll:
    """No filter (``filter: {}``, or nothing at all): every event passes."""

    def matches(self, event: CloudEvent) -> bool:
        return True

    def index_hints(self) -> Hints:
        return NO_HINTS


@dataclass(frozen=True, slots=True)
class AttributesFilter:
    """Legacy ``filter.attributes``: AND of exact, case-sensitive matches; an empty value means
    "present and non-empty"; a missing attribute never matches."""

    attributes: tuple[tuple[str, str], ...]

    def matches(self, event: CloudEvent) -> bool:
        attrs = event.attributes
        for name, expected in self.attributes:
            text = attribute_text(attrs, name)
            if text is None or (text != expected if expected else text == ""):
                return False
        return True

    def index_hints(self) -> Hints:
        return {name: frozenset((value,)) for name, value in self.attributes if value}


@dataclass(frozen=True, slots=True)
class ExactFilter:
    attributes: tuple[tuple[str, str], ...]

    def matches(self, event: CloudEvent) -> bool:
        attrs = event.attributes
        for name, expected in self.attributes:  # noqa: SIM110 - hot path, no generator
            if attribute_text(attrs, name) != expected:
                return False
        return True

    def index_hints(self) -> Hints:
        return {name: frozenset((value,)) for name, value in self.attributes}


@dataclass(frozen=True, slots=True)
class PrefixFilter:
    attributes: tuple[tuple[str, str], ...]

    def matches(self, event: CloudEvent) -> bool:
        attrs = event.attributes
        for name, prefix in self.attributes:
            text = attribute_text(attrs, name)
            if text is None or not text.startswith(prefix):
                return False
        return True

    def index_hints(self) -> Hints:
        return NO_HINTS


@dataclass(frozen=True, slots=True)
class SuffixFilter:
    attributes: tuple[tuple[str, str], ...]

    def matches(self, event: CloudEvent) -> bool:
        attrs = event.attributes
        for name, suffix in self.attributes:
            text = attribute_text(attrs, name)
            if text is None or not text.endswith(suffix):
                return False
        return True

    def index_hints(self) -> Hints:
        return NO_HINTS


@dataclass(frozen=True, slots=True)
class AllFilter:
    filters: tuple[Filter, ...]

    def matches(self, event: CloudEvent) -> bool:
        return all(f.matches(event) for f in self.filters)

    def index_hints(self) -> Hints:
        return _all_hints([index_hints(f) for f in self.filters])


@dataclass(frozen=True, slots=True)
class AnyFilter:
    filters: tuple[Filter, ...]

    def matches(self, event: CloudEvent) -> bool:
        return any(f.matches(event) for f in self.filters)

    def index_hints(self) -> Hints:
        return _any_hints([index_hints(f) for f in self.filters])


@dataclass(frozen=True, slots=True)
class NotFilter:
    filter: Filter

    def matches(self, event: CloudEvent) -> bool:
        return not self.filter.matches(event)

    def index_hints(self) -> Hints:
        return NO_HINTS


@dataclass(frozen=True, slots=True)
class CesqlFilter:
    """Passes only when the expression evaluates to boolean ``true`` without any error."""

    expression: cesql.Expression

    def matches(self, event: CloudEvent) -> bool:
        return self.expression.matches(event)

    def index_hints(self) -> Hints:
        return _cesql_hints(self.expression.tree)


def _all_hints(parts: Sequence[Hints]) -> Hints:
    merged: dict[str, frozenset[str]] = {}
    for hints in parts:
        for name, values in hints.items():
            merged[name] = merged[name] & values if name in merged else values
    return merged


def _any_hints(parts: Sequence[Hints]) -> Hints:
    if not parts:
        return NO_HINTS
    common = set(parts[0]).intersection(*parts[1:])
    return {name: frozenset().union(*(hints[name] for hints in parts)) for name in common}


# A ``data.a.b`` path is named ``data.a.b`` in hints: the index reads it with ``hint_text``.
_NAMED = (nodes.Attribute, nodes.DataPath)


def hint_text(event: CloudEvent, name: str) -> str | None:
    """The text an index files ``name`` under: an attribute's, or (``data.a.b``) the JSON data's
    value as an exact CESQL term compares it. Attribute names have no dots."""
    if name.startswith("data."):
        return data_text(event, name)
    return attribute_text(event.attributes, name)


def _cesql_hints(node: nodes.Node) -> Hints:
    """Exact-match conditions implied by a true, error-free CESQL result. Only shapes whose
    implicit casts are understood: ``attr = 'text'`` casts the attribute to String, so its text
    must equal the literal; ``'text' = attr`` and ``attr IN ('a', 'b')`` cast the literals to the
    attribute's type instead, so their Integer and Boolean readings are admitted too."""
    if isinstance(node, nodes.Binary):
        if node.op == "AND":
            return _all_hints([_cesql_hints(node.left), _cesql_hints(node.right)])
        if node.op == "OR":
            return _any_hints([_cesql_hints(node.left), _cesql_hints(node.right)])
        if node.op == "=":
            left, right = node.left, node.right
            if isinstance(left, _NAMED) and _is_text(right):
                return {left.name: frozenset((str(_constant(right)),))}
            if isinstance(right, _NAMED) and _is_text(left):
                return {right.name: _readings([_constant(left)])}
    if (
        isinstance(node, nodes.In)
        and not node.negated
        and isinstance(node.operand, _NAMED)
        and all(_is_text(item) for item in node.items)
    ):
        return {node.operand.name: _readings([_constant(item) for item in node.items])}
    return NO_HINTS


def _is_text(node: nodes.Node) -> bool:
    return isinstance(node, nodes.Constant) and isinstance(node.value, str)


def _constant(node: nodes.Node) -> object:
    assert isinstance(node, nodes.Constant)
    return node.value


def _readings(literals: Sequence[object]) -> frozenset[str]:
    texts: set[str] = set()
    for literal in literals:
        text = str(literal)
        texts.add(text)
        if re.fullmatch(r"[+-]?[0-9]+", text, re.ASCII) and -(2**31) <= int(text) < 2**31:
            texts.add(str(int(text)))
        if text.lower() in ("true", "false"):
            texts.add(text.lower())
    return frozenset(texts)


# -- validation ------------------------------------------------------------------------------


def validate_filters(
    filter_attributes: Mapping[str, Any] | None,
    filters: Sequence[Any] | None,
    *,
    path: str = "spec",
) -> list[Problem]:
    """Every problem with a trigger's ``filter.attributes`` and ``filters``, at once."""
    problems: list[Problem] = []
    if filter_attributes is not None:
        _check_legacy(filter_attributes, f"{path}.filter.attributes", problems)
    if filters is not None:
        if isinstance(filters, (str, bytes, Mapping)) or not isinstance(filters, Sequence):
            problems.append(Problem(f"{path}.filters", "must be a list of filter objects"))
        else:
            for i, element in enumerate(filters):
                _check_element(element, f"{path}.filters[{i}]", 0, problems)
    return problems


def _key_problem(key: object) -> str | None:
    if not isinstance(key, str) or not KEY_PATTERN.fullmatch(key):
        return (
            f"invalid attribute name {key!r}: must start with a lower-case letter followed by "
            "lower-case letters and digits (^[a-z][a-z0-9]*$)"
        )
    return None


def _check_legacy(attributes: object, path: str, problems: list[Problem]) -> None:
    if not isinstance(attributes, Mapping):
        problems.append(Problem(path, "must be an object mapping attribute names to strings"))
        return
    for key, value in attributes.items():
        where = f"{path}.{key}"
        message = _key_problem(key)
        if message:
            problems.append(Problem(where, message))
        if not isinstance(value, str):
            problems.append(Problem(where, "value must be a string"))


def _check_element(element: object, path: str, depth: int, problems: list[Problem]) -> None:
    if depth > MAX_NESTING:
        problems.append(Problem(path, f"filters nest deeper than {MAX_NESTING} levels"))
        return
    if not isinstance(element, Mapping):
        problems.append(
            Problem(path, f"must be a filter object with one of: {', '.join(DIALECTS)}")
        )
        return
    unknown = [key for key in element if key not in DIALECTS]
    for key in unknown:
        problems.append(
            Problem(f"{path}.{key}", f"unknown filter dialect; known: {', '.join(DIALECTS)}")
        )
    dialects = [key for key in DIALECTS if key in element]
    if len(dialects) > 1:
        problems.append(
            Problem(
                path,
                f"multiple dialects found ({', '.join(dialects)}); "
                "a filter can have only one dialect set",
            )
        )
    elif not dialects and not unknown:
        problems.append(Problem(path, f"must set exactly one dialect: {', '.join(DIALECTS)}"))
    for dialect in dialects:
        where, value = f"{path}.{dialect}", element[dialect]
        if dialect in ("exact", "prefix", "suffix"):
            _check_attribute_dialect(dialect, value, where, problems)
        elif dialect in ("all", "any"):
            _check_list(value, where, depth, problems)
        elif dialect == "not":
            _check_element(value, where, depth + 1, problems)
        elif dialect == "eventPattern":
            event_pattern.check(value, where, problems)
        else:
            _check_cesql(value, where, problems)


def _check_attribute_dialect(
    dialect: str, value: object, path: str, problems: list[Problem]
) -> None:
    # Problems go on the dialect's path with the key in the message, as Knative reports them.
    if not isinstance(value, Mapping):
        problems.append(Problem(path, "must be an object mapping attribute names to strings"))
        return
    if not value:
        problems.append(Problem(path, f"{dialect} filter must name at least one attribute"))
    for key, expected in value.items():
        message = _key_problem(key)
        if message:
            problems.append(Problem(path, message))
        if not isinstance(expected, str):
            problems.append(Problem(path, f"value of {key!r} must be a string"))
        elif not expected:
            problems.append(
                Problem(path, f"value of {key!r} must not be empty ({dialect} needs a value)")
            )


def _check_list(value: object, path: str, depth: int, problems: list[Problem]) -> None:
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Sequence):
        problems.append(Problem(path, "must be a list of filter objects"))
        return
    if not value:
        problems.append(Problem(path, "must contain at least one filter"))
    for i, element in enumerate(value):
        _check_element(element, f"{path}[{i}]", depth + 1, problems)


def _check_cesql(value: object, path: str, problems: list[Problem]) -> None:
    if not isinstance(value, str):
        problems.append(Problem(path, "must be a CESQL expression string"))
        return
    try:
        cesql.parse(value)
    except cesql.CesqlParseError as error:
        problems.append(Problem(path, f"invalid CESQL expression: {error}"))


# -- the factory -----------------------------------------------------------------------------


def build_filter(
    filter_attributes: Mapping[str, str] | None,
    filters: Sequence[Mapping[str, Any]] | None,
) -> Filter:
    """The trigger's filter. A non-empty ``filters`` overrides ``filter.attributes``; an empty
    ``filters: []`` does not (Knative ``filterEvent``). Raises ``ValidationError`` if invalid."""
    problems = validate_filters(filter_attributes, filters)
    if problems:
        raise ValidationError(problems)
    if filters:
        built = tuple(_build(element) for element in filters)
        return built[0] if len(built) == 1 else AllFilter(built)
    if filter_attributes:
        return AttributesFilter(tuple(filter_attributes.items()))
    return MatchAll()


def _build(element: Mapping[str, Any]) -> Filter:
    (dialect,) = (key for key in DIALECTS if key in element)
    value = element[dialect]
    if dialect == "exact":
        return ExactFilter(tuple(value.items()))
    if dialect == "prefix":
        return PrefixFilter(tuple(value.items()))
    if dialect == "suffix":
        return SuffixFilter(tuple(value.items()))
    if dialect == "all":
        return AllFilter(tuple(_build(e) for e in value))
    if dialect == "any":
        return AnyFilter(tuple(_build(e) for e in value))
    if dialect == "not":
        return NotFilter(_build(value))
    if dialect == "eventPattern":
        return event_pattern.compile_pattern(value)
    return CesqlFilter(cesql.parse(value))
