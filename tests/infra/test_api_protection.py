"""Stage throttling and access logs as ``chalice deploy`` gets them (infra/api_protection.py)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from infra.api_protection import ACCESS_LOG_FORMAT, ApiProtection, put_on

ARN = "arn:aws:logs:us-east-1:123456789012:log-group:/aws/apigateway/sb-prod-access"


class RecordingApiGateway:
    def __init__(self, refuse_logs: bool) -> None:
        self.calls: list[list[dict[str, str]]] = []
        self._refuse_logs = refuse_logs

    def update_stage(self, *, restApiId: str, stageName: str, patchOperations: Any) -> None:
        self.calls.append(patchOperations)
        paths = {op["path"] for op in patchOperations}
        if self._refuse_logs and "/accessLogSettings/destinationArn" in paths:
            raise RuntimeError(
                "BadRequestException: CloudWatch Logs role ARN must be set in account settings"
            )


def test_throttling_and_json_access_logs_are_set_on_the_stage() -> None:
    gateway = RecordingApiGateway(refuse_logs=False)
    put_on(gateway, "api1", "api", ApiProtection(200.0, 400, True), ARN + ":*")
    ops = {op["path"]: op["value"] for op in gateway.calls[0]}
    assert ops["/*/*/throttling/rateLimit"] == "200.0"
    assert ops["/*/*/throttling/burstLimit"] == "400"
    assert ops["/tracingEnabled"] == "true"
    assert ops["/accessLogSettings/destinationArn"] == ARN  # without CloudFormation's ":*"
    assert json.loads(ops["/accessLogSettings/format"]) == json.loads(ACCESS_LOG_FORMAT)


def test_without_the_accounts_logs_role_throttling_is_still_set_and_one_line_says_why() -> None:
    gateway = RecordingApiGateway(refuse_logs=True)
    said: list[str] = []
    put_on(gateway, "api1", "api", ApiProtection(), ARN, say=said.append)
    assert len(gateway.calls) == 2
    assert {op["path"] for op in gateway.calls[1]} == {
        "/tracingEnabled",
        "/*/*/throttling/rateLimit",
        "/*/*/throttling/burstLimit",
    }
    assert len(said) == 1 and "update-account" in said[0]


def test_other_errors_are_not_swallowed() -> None:
    class Broken(RecordingApiGateway):
        def update_stage(self, **kwargs: Any) -> None:
            raise RuntimeError("NotFoundException: Invalid stage identifier specified")

    with pytest.raises(RuntimeError, match="Invalid stage"):
        put_on(Broken(False), "api1", "api", ApiProtection(), ARN)


def test_stage_settings_come_from_the_chalice_config() -> None:
    config = {"stages": {"prod": {"api_protection": {"throttling_rate_limit": 50}}, "dev": {}}}
    assert ApiProtection.of_stage(config, "prod") == ApiProtection(50.0, 1000, True)
    assert ApiProtection.of_stage(config, "dev") == ApiProtection()
