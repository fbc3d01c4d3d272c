"""Reading JSON request bodies for the control plane, with problem-shaped errors and the limits
of ``core/limits.py`` (size, nesting depth, number ranges)."""

from __future__ import annotations

from typing import Any

from chalicelib.core import limits
from chalicelib.core.errors import Problem, ValidationError


def parse_json_body(body: bytes) -> Any:
    if not body.strip():
        raise ValidationError([Problem("body", "a JSON object is required")])
    return limits.read_json(body)


def parse_limit(text: str) -> int:
    return limits.read_int(text, "limit")
