"""Fixtures for the infrastructure tests: the template, the Chalice config and policy files, and
a resolver for the prod stage in a made-up account (every test here is offline)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from infra.cfn import Resolver, load_template

REPO = Path(__file__).resolve().parents[2]
ACCOUNT = "123456789012"
REGION = "us-east-1"
STAGE = "prod"


@pytest.fixture(scope="session")
def template() -> dict[str, Any]:
    return load_template()


@pytest.fixture(scope="session")
def chalice_config() -> dict[str, Any]:
    config: dict[str, Any] = json.loads((REPO / ".chalice" / "config.json").read_text())
    return config


def prod_resolver(template: dict[str, Any], **parameters: str) -> Resolver:
    """The prod stage as AWS would resolve it, the stack's own exports available to import."""
    exports = Resolver(
        template, {"Stage": STAGE, **parameters}, account_id=ACCOUNT, region=REGION
    ).exports()
    return Resolver(
        template,
        {"Stage": STAGE, **parameters},
        account_id=ACCOUNT,
        region=REGION,
        stack_name=f"serverless-broker-{STAGE}",
        imports=exports,
    )


@pytest.fixture(scope="session")
def resolver(template: dict[str, Any]) -> Resolver:
    return prod_resolver(template)


@pytest.fixture(scope="session")
def policy_files(chalice_config: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Function -> the policy document its prod role gets (as committed, intrinsics unresolved)."""
    functions = chalice_config["stages"][STAGE]["lambda_functions"]
    return {
        fn: json.loads((REPO / ".chalice" / spec["iam_policy_file"]).read_text())
        for fn, spec in functions.items()
    }
