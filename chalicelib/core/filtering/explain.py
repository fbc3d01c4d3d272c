"""Why a filter matches an event or not, for ``POST .../triggers:test``: the verdict of
``build_filter`` plus the term that decided it, named by its path in the request
(``filters[0].eventPattern.data.amount: [{"numeric": [">", 100]}] did not match 42``).

The verdict is always the built filter's own ``matches`` (asserted), so an explanation never
disagrees with routing; the walk over the raw spec only finds the words.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from chalicelib.core.cloudevents.event import CloudEvent
from chalicelib.core.errors import Problem, ValidationError
from chalicelib.core.filtering import cesql, event_pattern
from chalicelib.core.filtering.filters import (
    DIALECTS,
    attribute_text,
    build_filter,
    validate_filters,
)

Verdict = tuple[bool, list[str]]


def explain(
    filter_attributes: Mapping[str, Any] | None,
    filters: Sequence[Any] | None,
    event: CloudEvent,
) -> Verdict:
    """``(matched, reasons)``; raises ``ValidationError`` (fields as in the request body:
    ``filters[0]...``, ``filter.attributes...``) when the filter is invalid."""
    problems = filter_problems(filter_attributes, filters)
    if problems:
        raise ValidationError(problems)
    built = build_filter(filter_attributes, filters)
    event_pattern.reset_budget(event)  # the verdict as routing reaches it, with a whole budget
    matched = built.matches(event)
    if event_pattern.over_budget(event):
        return matched, [event_pattern.BUDGET_REASON]
    if filters:
        verdict = _all([_element(e, f"filters[{i}]", event) for i, e in enumerate(filters)])
    elif filter_attributes:
        verdict = _legacy(filter_attributes, event)
    else:
        verdict = True, ["no filter: every event matches"]
    assert verdict[0] == matched, "explanation disagrees with the filter"
    return verdict


def filter_problems(
    filter_attributes: Mapping[str, Any] | None, filters: Sequence[Any] | None
) -> list[Problem]:
    """``validate_filters`` with fields as the request names them (``filters[0]...``)."""
    problems = validate_filters(filter_attributes, filters, path="")
    return [Problem(p.field.lstrip("."), p.message) for p in problems]


def _all(parts: Sequence[Verdict]) -> Verdict:
    for matched, reasons in parts:
        if not matched:
            return False, reasons
    return True, [reason for _, reasons in parts for reason in reasons]


def _shown(text: str | None) -> str:
    if text is None:
        return "nothing (the event has no such attribute)"
    return json.dumps(text if len(text) <= 80 else text[:80] + "…")


def _legacy(attributes: Mapping[str, Any], event: CloudEvent) -> Verdict:
    parts: list[Verdict] = []
    for name, expected in attributes.items():
        where = f"filter.attributes.{name}"
        text = attribute_text(event.attributes, name)
        if expected == "":
            ok = bool(text)
            parts.append((ok, [f"{where}: {'present' if ok else 'absent or empty'}"]))
        else:
            ok = text == expected
            verb = "matched" if ok else f"expected {json.dumps(expected)}, got"
            parts.append((ok, [f"{where}: {verb} {_shown(text)}"]))
    return _all(parts)


def _attributes(dialect: str, spec: Mapping[str, str], path: str, event: CloudEvent) -> Verdict:
    parts: list[Verdict] = []
    for name, expected in spec.items():
        text = attribute_text(event.attributes, name)
        if dialect == "exact":
            ok = text == expected
        elif dialect == "prefix":
            ok = text is not None and text.startswith(expected)
        else:
            ok = text is not None and text.endswith(expected)
        verb = "matched" if ok else "did not match"
        parts.append(
            (ok, [f"{path}.{name}: {dialect} {json.dumps(expected)} {verb} {_shown(text)}"])
        )
    return _all(parts)


def _element(element: Mapping[str, Any], path: str, event: CloudEvent) -> Verdict:
    (dialect,) = (key for key in DIALECTS if key in element)
    value, where = element[dialect], f"{path}.{dialect}"
    if dialect in ("exact", "prefix", "suffix"):
        return _attributes(dialect, value, where, event)
    if dialect == "all":
        return _all([_element(e, f"{where}[{i}]", event) for i, e in enumerate(value)])
    if dialect == "any":
        parts = [_element(e, f"{where}[{i}]", event) for i, e in enumerate(value)]
        for matched, reasons in parts:
            if matched:
                return True, reasons
        return False, [f"{where}: no filter matched"] + [r for _, rs in parts for r in rs]
    if dialect == "not":
        matched, reasons = _element(value, where, event)
        verb = "matched, so not does not" if matched else "did not match, so not does"
        return not matched, [f"{where}: the inner filter {verb}", *reasons]
    if dialect == "cesql":
        result, errors = cesql.parse(value).evaluate(event)
        if errors:
            return False, [f"{where}: evaluation error: {errors[0]}"]
        return result is True, [f"{where}: evaluated to {json.dumps(result)}"]
    return event_pattern.compile_pattern(value).explain(event, where)
