"""The AWS endpoints the contract suite runs its adapters on: the moto server (``aws``), and
LocalStack's runtime in host mode (``localstack``, marked: it needs Python >= 3.12)."""

from __future__ import annotations

from typing import Any

import pytest

LOCALSTACK = pytest.param("localstack", marks=pytest.mark.localstack)
AWS_BACKENDS = ["aws", LOCALSTACK]
BACKENDS = ["memory", *AWS_BACKENDS]


def aws_env(request: pytest.FixtureRequest, backend: str) -> tuple[Any, Any]:
    """(Settings, AwsClients) of ``backend``'s endpoint, from the session fixtures."""
    prefix = "localstack" if backend == "localstack" else "aws"
    settings = request.getfixturevalue(f"{prefix}_settings")
    return settings, request.getfixturevalue(f"{prefix}_clients")
