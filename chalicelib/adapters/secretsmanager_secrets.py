"""Secrets on Secrets Manager (a Connection's API key, password or client secret; docs/targets.md).
Only ``GetSecretValue``, and only on the stage's prefix (the functions' policies). An error names
the secret and the service's code, never the value."""

from __future__ import annotations

from chalicelib.adapters.aws_clients import AwsClients
from chalicelib.adapters.aws_errors import error_code
from chalicelib.core.errors import UnavailableError


class SecretsManagerSecrets:
    def __init__(self, clients: AwsClients) -> None:
        self._clients = clients

    def get_string(self, arn: str) -> str:
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            answer = self._clients.client("secretsmanager").get_secret_value(SecretId=arn)
        except ClientError as exc:
            raise UnavailableError(f"{arn}: {error_code(exc) or 'AWS error'}") from None
        except BotoCoreError as exc:
            raise UnavailableError(f"{arn}: {type(exc).__name__}") from None
        value = answer.get("SecretString")
        if not isinstance(value, str):
            raise UnavailableError(f"{arn}: holds no secret string (a binary secret)")
        return value
