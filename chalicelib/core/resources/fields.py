"""Small readers for JSON request bodies that collect problems instead of raising, shared by the
resource parsers (brokers, triggers, Kafka sources)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from chalicelib.core.errors import Problem
from chalicelib.core.names import quote


def json_object(value: object, path: str, problems: list[Problem]) -> Mapping[str, Any]:
    """``value`` as a JSON object; absent (None) is an empty one."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        problems.append(Problem(path, "must be a JSON object"))
        return {}
    return value


def string_map(value: object, path: str, problems: list[Problem]) -> dict[str, str]:
    """A JSON object of strings (labels, annotations, filter attributes)."""
    out: dict[str, str] = {}
    for key, item in json_object(value, path, problems).items():
        if not isinstance(key, str) or not key:
            problems.append(Problem(path, f"keys must be non-empty strings, got {quote(key)}"))
        elif not isinstance(item, str):
            problems.append(Problem(f"{path}[{key}]", "value must be a string"))
        else:
            out[key] = item
    return out


def unknown_fields(
    raw: Mapping[str, Any], allowed: tuple[str, ...], path: str, problems: list[Problem]
) -> None:
    """A problem for every member of ``raw`` that is not ``allowed`` (strict, like kubectl)."""
    for key in raw:
        if key not in allowed:
            where = f"{path}.{key}" if path else str(key)
            problems.append(Problem(where, f"unknown field; expected one of: {', '.join(allowed)}"))
