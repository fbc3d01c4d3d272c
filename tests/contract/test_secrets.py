"""The Secrets port (a Connection's secrets, docs/targets.md) on its in-memory fake and on the
Secrets Manager adapter against the moto server: a secret string is read back as stored, and a
missing secret is UnavailableError naming the ARN and the service's code, never a value."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from chalicelib.core.errors import UnavailableError
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


@pytest.fixture(params=["memory", "aws"])
def world(request: pytest.FixtureRequest) -> Any:
    if request.param == "memory":
        return MemoryWorld()
    return SecretsManagerWorld(request.getfixturevalue("aws_clients"))


def test_a_secret_string_reads_back_as_stored(world: Any) -> None:
    value = '{"username": "u", "password": "p é \\u00e9"}'
    arn = world.create(f"serverless-broker/local/connections/{uuid.uuid4().hex}", value)
    assert world.secrets.get_string(arn) == value


def test_a_missing_secret_is_unavailable_naming_the_arn_and_the_code(world: Any) -> None:
    with pytest.raises(UnavailableError) as raised:
        world.secrets.get_string(MISSING)
    assert MISSING in raised.value.detail
    assert "ResourceNotFoundException" in raised.value.detail
