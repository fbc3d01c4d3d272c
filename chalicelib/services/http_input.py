"""Reading JSON request bodies for the control plane, with problem-shaped errors."""

from __future__ import annotations

import json
from typing import Any

from chalicelib.core.errors import Problem, ValidationError


def parse_json_body(body: bytes) -> Any:
    if not body.strip():
        raise ValidationError([Problem("body", "a JSON object is required")])
    try:
        return json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValidationError([Problem("body", f"not valid JSON: {exc}")]) from None


def parse_limit(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise ValidationError([Problem("limit", f"must be an integer, got {text!r}")]) from None
