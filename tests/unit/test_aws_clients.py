"""Client timeouts sit well inside the functions' (issue 31, item 5): the worst case of one AWS
call, computed from the clients as the functions build them, against the timeouts the functions
are deployed with (.chalice/config.json)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from botocore.retries.standard import ExponentialBackoff

from chalicelib.adapters.aws_clients import AwsClients
from chalicelib.config import Settings

CHALICE_CONFIG = Path(__file__).resolve().parents[2] / ".chalice" / "config.json"
SERVICES = ("dynamodb", "sqs", "s3", "firehose", "lambda", "kafka", "secretsmanager")
API_GATEWAY_LIMIT_SECONDS = 29  # a REST API's integration timeout: api_handler is cut off there
CHALICE_DEFAULT_TIMEOUT_SECONDS = 60  # a function's timeout when the stage names none


def worst_case_seconds(client: Any) -> float:
    """attempts x (connect + read), plus the longest backoff botocore's standard mode can wait
    between them: the throttling base (1 s) doubled per attempt, capped, plus what a
    ``x-amz-retry-after`` answer can add."""
    config = client.meta.config
    assert config.retries["mode"] == "standard"  # the backoff below is standard mode's
    attempts = config.retries["total_max_attempts"]
    scales = [ExponentialBackoff._DEFAULT_BACKOFF_CONFIG, *_service_scales()]
    longest = max(v for scale in scales for v in scale.values())  # throttling's 1 s
    added = getattr(ExponentialBackoff, "_RETRY_AFTER_MAX_ADDITIONAL", 0)
    waits = sum(
        min(longest * ExponentialBackoff._BASE ** (k - 1), ExponentialBackoff._MAX_BACKOFF) + added
        for k in range(1, attempts)
    )
    return float(attempts * (config.connect_timeout + config.read_timeout) + waits)


def _service_scales() -> list[dict[str, float]]:
    return list(ExponentialBackoff._SERVICE_BACKOFF_CONFIG.values())


def _stages() -> list[Any]:
    """(stage, its environment, {function: timeout}) for every stage of .chalice/config.json."""
    config = json.loads(CHALICE_CONFIG.read_text())
    stages = []
    for name, stage in config["stages"].items():
        env = {**config.get("environment_variables", {}), **stage.get("environment_variables", {})}
        functions = stage.get("lambda_functions", {})
        timeouts = {
            function: functions.get(function, {}).get(
                "lambda_timeout", stage.get("lambda_timeout", CHALICE_DEFAULT_TIMEOUT_SECONDS)
            )
            for function in {"api_handler", *functions}
        }
        timeouts["api_handler"] = min(timeouts["api_handler"], API_GATEWAY_LIMIT_SECONDS)
        stages.append(pytest.param(name, env, timeouts, id=name))
    return stages


@pytest.mark.parametrize(("stage", "env", "timeouts"), _stages())
def test_a_calls_worst_case_is_within_half_of_every_function_timeout(
    stage: str, env: dict[str, str], timeouts: dict[str, int]
) -> None:
    """Half: a call failing as slowly as it can still leaves the function the time to answer
    (503) and undo what it began, e.g. release a dedup claim."""
    clients = AwsClients(Settings.from_env(env))
    for service in SERVICES:
        worst = worst_case_seconds(clients.client(service))
        for function, timeout in timeouts.items():
            assert worst <= timeout / 2, (stage, service, function, worst, timeout)
    assert timeouts["api_handler"] <= API_GATEWAY_LIMIT_SECONDS


def test_the_worst_case_counts_every_attempt_and_wait() -> None:
    """The arithmetic itself, on a client of known configuration (botocore 1.44: retry-after adds
    up to 5 s to each wait)."""
    import boto3
    from botocore.config import Config

    config = Config(
        retries={"total_max_attempts": 3, "mode": "standard"}, connect_timeout=2, read_timeout=5
    )
    client = boto3.session.Session().client("sqs", region_name="us-east-1", config=config)
    added = getattr(ExponentialBackoff, "_RETRY_AFTER_MAX_ADDITIONAL", 0)
    assert worst_case_seconds(client) == 3 * (2 + 5) + (1 + added) + (2 + added)


def test_an_emulator_client_reads_longer_with_the_same_attempts() -> None:
    """moto or LocalStack may load a service on its first call for longer than a call on AWS."""
    aws = AwsClients(Settings.from_env({"BROKER_STAGE": "prod"})).client("dynamodb").meta.config
    local = AwsClients(Settings.from_env({"AWS_ENDPOINT_URL": "http://127.0.0.1:4566"}))
    emulated = local.client("dynamodb").meta.config
    assert emulated.read_timeout > aws.read_timeout
    assert (emulated.connect_timeout, emulated.retries) == (aws.connect_timeout, aws.retries)
