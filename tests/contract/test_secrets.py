"""The Secrets port (a Connection's secrets, docs/targets.md) on its in-memory fake and on the
Secrets Manager adapter against the moto server and LocalStack's runtime (tests/backends.py): a
secret string is read back as stored, and a missing secret is UnavailableError naming the ARN and
the service's code, never a value; a binary secret (the endpoints only) is UnavailableError too.
Measured: LocalStack answers all of these as moto does (docs/deploy.md)."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from chalicelib.core.errors import UnavailableError
from tests.backends import AWS_BACKENDS, BACKENDS, aws_env
from tests.fakes.secrets import MemorySecrets

MISSING = "arn:aws:secretsmanager:us-east-1:123456789012:secret:serverless-broker/x/missing-AbCdEf"


class MemoryWorld:
    def __init__(self) -> None:
        self.secrets = MemorySecrets()

    def create(self, name: str, value: str) -> str:
        arn = f"arn:aws:secretsmanager:us-east-1:123456789012:secret:{name}-AbCdEf"
        self.secrets.values[arn] = value
        return arn


class SecretsManagerWorld:
    def __init__(self, clients: Any) -> None:
        from chalicelib.adapters.secretsmanager_secrets import SecretsManagerSecrets

        self.client = clients.client("secretsmanager")
        self.secrets = SecretsManagerSecrets(clients)

    def create(self, name: str, value: str) -> str:
        return str(self.client.create_secret(Name=name, SecretString=value)["ARN"])


@pytest.fixture(params=BACKENDS)
def world(request: pytest.FixtureRequest) -> Any:
    if request.param == "memory":
        return MemoryWorld()
    return SecretsManagerWorld(aws_env(request, request.param)[1])


def test_a_secret_string_reads_back_as_stored(world: Any) -> None:
    value = '{"username": "u", "password": "p é \\u00e9"}'
    arn = world.create(f"serverless-broker/local/connections/{uuid.uuid4().hex}", value)
    assert world.secrets.get_string(arn) == value


def test_a_missing_secret_is_unavailable_naming_the_arn_and_the_code(world: Any) -> None:
    with pytest.raises(UnavailableError) as raised:
        world.secrets.get_string(MISSING)
    assert MISSING in raised.value.detail
    assert "ResourceNotFoundException" in raised.value.detail


@pytest.mark.parametrize("backend", AWS_BACKENDS)
def test_a_binary_secret_is_unavailable_without_its_value(
    request: pytest.FixtureRequest, backend: str
) -> None:
    world = SecretsManagerWorld(aws_env(request, backend)[1])
    name = f"serverless-broker/local/connections/{uuid.uuid4().hex}"
    arn = str(world.client.create_secret(Name=name, SecretBinary=b"planted-binary")["ARN"])
    with pytest.raises(UnavailableError) as raised:
        world.secrets.get_string(arn)
    assert arn in raised.value.detail and "binary" in raised.value.detail
    assert "planted-binary" not in raised.value.detail
