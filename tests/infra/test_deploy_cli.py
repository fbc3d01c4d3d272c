"""The deploy script's answers to a newcomer's mistakes: one line each, no traceback."""

from __future__ import annotations

from typing import Any

import pytest


def test_a_package_without_a_public_url_is_refused_in_one_line(tmp_path: Any) -> None:
    from infra import deploy

    with pytest.raises(SystemExit) as refused:
        deploy.main(["--stage", "prod", "--package-only", "--out", str(tmp_path)])
    message = str(refused.value)
    assert "--public-url" in message and "\n" not in message
    assert not any(tmp_path.iterdir())
