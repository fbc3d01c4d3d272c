"""Shared fixtures: a real moto server over HTTP for the adapters, and AWS-free settings."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

os.environ.setdefault("AWS_ACCESS_KEY_ID", "testing")
os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "testing")
os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")


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
