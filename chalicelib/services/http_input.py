"""Reading JSON request bodies for the control plane, with problem-shaped errors and the limits
of ``core/limits.py`` (size, nesting depth, number ranges)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from chalicelib.core import limits
from chalicelib.core.errors import Problem, ValidationError
from chalicelib.core.names import quote


def parse_json_body(body: bytes) -> Any:
    if not body.strip():
        raise ValidationError([Problem("body", "a JSON object is required")])
    return limits.read_json(body)


def parse_limit(text: str) -> int:
    return limits.read_int(text, "limit")


def parse_dry_run(query: Mapping[str, str]) -> bool:
    """Kubernetes' ``dryRun`` query parameter: absent, or ``All`` (the one value it defines)."""
    value = query.get("dryRun")
    if value is None:
        return False
    if value != "All":
        raise ValidationError([Problem("dryRun", f'must be "All", got {quote(value)}')])
    return True
