"""Settings from the environment fail closed: local mode only when asked for in full."""

from __future__ import annotations

import pytest

from chalicelib.config import ConfigurationError, Settings

LOCAL = {"BROKER_STAGE": "local", "BROKER_LOCAL_MODE": "true"}


@pytest.mark.parametrize(
    ("env", "local_mode"),
    [
        ({}, False),
        ({"BROKER_LOCAL_MODE": "true"}, False),  # no stage: refused below as well
        ({"BROKER_STAGE": "local"}, False),  # the stage alone does not open anything
        ({"BROKER_STAGE": "local", "BROKER_LOCAL_MODE": "false"}, False),
        ({"BROKER_STAGE": "local", "BROKER_LOCAL_MODE": "maybe"}, False),
        ({"BROKER_STAGE": "prod"}, False),
        ({"BROKER_STAGE": "prod", "BROKER_LOCAL_MODE": "true"}, False),
        (LOCAL, True),
        ({"BROKER_STAGE": " local ", "BROKER_LOCAL_MODE": "TRUE"}, True),
    ],
)
def test_local_mode_needs_the_local_stage_and_the_flag(
    env: dict[str, str], local_mode: bool
) -> None:
    assert Settings.from_env(env).local_mode is local_mode


@pytest.mark.parametrize(
    ("env", "fragments"),
    [
        ({}, ["BROKER_STAGE is not set"]),
        ({"BROKER_LOCAL_MODE": "true"}, ["BROKER_STAGE is not set"]),
        ({"BROKER_STAGE": "prod", "BROKER_LOCAL_MODE": "true"}, ["needs BROKER_STAGE=local"]),
        ({**LOCAL, "BROKER_LOCAL_MODE": "maybe"}, ["neither true nor false"]),
        (
            {"BROKER_STAGE": "prod", "BROKER_MAPPINGS_ENABLED": "false"},
            ["BROKER_MAPPINGS_ENABLED=false is for local mode only"],
        ),
        (
            {"BROKER_CACHE_TTL_SECONDS": "soon", "BROKER_DELIVERY_TIMEOUT_SECONDS": "1e3"},
            ["BROKER_STAGE is not set", "BROKER_CACHE_TTL_SECONDS", "BROKER_DELIVERY_TIMEOUT"],
        ),
    ],
)
def test_an_environment_that_cannot_run_safely_is_refused_with_every_problem(
    env: dict[str, str], fragments: list[str]
) -> None:
    settings = Settings.from_env(env)
    assert not settings.local_mode
    with pytest.raises(ConfigurationError) as raised:
        settings.require_runnable()
    for fragment in fragments:
        assert fragment in str(raised.value)
    assert "brokerctl dev" in str(raised.value)


@pytest.mark.parametrize(
    "env",
    [
        LOCAL,
        {"BROKER_STAGE": "prod"},
        {"BROKER_STAGE": "local"},
        {**LOCAL, "BROKER_MAPPINGS_ENABLED": "false"},
    ],
)
def test_a_complete_environment_runs(env: dict[str, str]) -> None:
    settings = Settings.from_env(env)
    assert settings.require_runnable() is settings


def test_the_registry_rereads_the_metrics_job_output_every_minute_and_locally_at_once() -> None:
    assert Settings.from_env({"BROKER_STAGE": "prod"}).metrics_refresh_seconds == 60
    assert Settings.from_env(LOCAL).metrics_refresh_seconds == 5


def test_bootstrap_creates_resources_only_in_local_mode() -> None:
    from brokerctl.bootstrap import bootstrap

    deployed = Settings.from_env({"BROKER_STAGE": "prod"})
    with pytest.raises(ConfigurationError, match="local-mode resources only"):
        bootstrap(deployed, clients=None)  # type: ignore[arg-type]  # refused before any call
