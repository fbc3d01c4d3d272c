"""The xRegistry model this registry serves at ``GET /registry/model``: the ``endpoints`` Group and
its ``messages`` Resource, taken from the Endpoint and Message Definitions models (1.0-rc4) with the
core attributes and this broker's extension attributes added. Kept as data in
``model.json``; ``tests/unit/test_registry_model.py`` checks it still matches the spec's
model files."""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Any

_PATH = Path(__file__).with_name("model.json")


@lru_cache(maxsize=1)
def _text() -> str:
    return _PATH.read_text(encoding="utf-8")


def model() -> dict[str, Any]:
    """A fresh copy (callers may change it)."""
    value: dict[str, Any] = json.loads(_text())
    return value
