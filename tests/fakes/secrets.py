"""An in-memory Secrets (chalicelib/ports.py), answering as Secrets Manager does: the secret
string of a known ARN, UnavailableError naming the ARN and the service's code otherwise.
tests/contract/test_secrets.py runs the same suite on it and on the adapter (moto)."""

from __future__ import annotations

from chalicelib.core.errors import UnavailableError


class MemorySecrets:
    def __init__(self) -> None:
        self.values: dict[str, str] = {}
        self.reads = 0  # GetSecretValue calls, as Secrets Manager would bill them

    def get_string(self, arn: str) -> str:
        self.reads += 1
        value = self.values.get(arn)
        if value is None:
            raise UnavailableError(f"{arn}: ResourceNotFoundException")
        return value
