"""``../shared`` (the spec texts, beside the repository in CI) for the tests that read it. On a
lone clone such a test module skips with one line instead of failing."""

from __future__ import annotations

from pathlib import Path

import pytest

SHARED = Path(__file__).absolute().parents[1].parent / "shared"


def require(path: Path) -> None:
    if not path.exists():
        pytest.skip(f"needs ../shared beside the repository ({path.name})", allow_module_level=True)
