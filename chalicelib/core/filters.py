"""Trigger filters (placeholder API; being completed)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from chalicelib.core.errors import Problem, ValidationError
from chalicelib.core.event import CloudEvent


class Filter(Protocol):
    def matches(self, event: CloudEvent) -> bool: ...


class _MatchAll:
    def matches(self, event: CloudEvent) -> bool:
        return True


def validate_filters(
    filter_attributes: Mapping[str, Any] | None,
    filters: Sequence[Any] | None,
    *,
    path: str = "spec",
) -> list[Problem]:
    return []


def build_filter(
    filter_attributes: Mapping[str, str] | None,
    filters: Sequence[Mapping[str, Any]] | None,
) -> Filter:
    problems = validate_filters(filter_attributes, filters)
    if problems:
        raise ValidationError(problems)
    return _MatchAll()
