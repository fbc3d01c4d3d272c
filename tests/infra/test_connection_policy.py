"""The secrets Connections may name (docs/targets.md): the delivery, dead_letter and API roles may
read the stage's connection secret prefix and nothing else; the committed policies hold exactly
what ``python -m infra.connection_policy`` generates, and the functions read the same prefix."""

from __future__ import annotations

import json

from chalicelib.config import Settings
from infra import connection_policy
from infra.chalice_project import load_config, policy_path

STAGE = "prod"


def test_the_roles_that_use_connections_read_only_the_stage_prefix() -> None:
    config = load_config()
    prefix = connection_policy.prefix_of(config, STAGE)
    expected = connection_policy.statement(prefix)
    for function in config["stages"][STAGE]["lambda_functions"]:
        policy = json.loads(policy_path(config, STAGE, function).read_text())
        found = [s for s in policy["Statement"] if s.get("Sid") == connection_policy.SID]
        assert found == ([expected] if function in connection_policy.ROLES else []), function
    resource = expected["Resource"]["Fn::Sub"]
    assert resource.endswith(f":secret:{prefix}*") and resource.count("*") == 1


def test_the_functions_read_the_prefix_the_policies_grant() -> None:
    config = load_config()
    variables = config["stages"][STAGE]["environment_variables"]
    settings = Settings.from_env({**variables, "BROKER_STAGE": STAGE})
    assert settings.connection_secret_prefix == connection_policy.prefix_of(config, STAGE)
