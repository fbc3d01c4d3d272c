"""Signer on an asymmetric KMS key (KeySpec ECC_NIST_P256, KeyUsage SIGN_VERIFY): the private key
never leaves KMS (design.md §2.5). The same calls deployed and in local mode, where the bootstrap
made the key on the embedded endpoint."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from chalicelib.adapters.aws_clients import AwsClients
from chalicelib.adapters.aws_errors import error_code
from chalicelib.core.errors import UnavailableError


class KmsSigner:
    def __init__(self, clients: AwsClients, key_id: str) -> None:
        """``key_id``: the key's id, ARN, alias name (``alias/...``) or alias ARN."""
        self._clients = clients
        self._key_id = key_id

    def sign(self, message: bytes) -> bytes:
        with _unavailable(f"KMS Sign with {self._key_id}"):
            answer = self._clients.client("kms").sign(
                KeyId=self._key_id,
                Message=message,
                MessageType="RAW",
                SigningAlgorithm="ECDSA_SHA_256",
            )
        return bytes(answer["Signature"])

    def public_key(self) -> bytes:
        with _unavailable(f"KMS GetPublicKey of {self._key_id}"):
            answer = self._clients.client("kms").get_public_key(KeyId=self._key_id)
        return bytes(answer["PublicKey"])


@contextmanager
def _unavailable(what: str) -> Iterator[None]:
    """Any KMS failure (no key, access denied, throttled) is the service's unavailability: a
    missing key is the stage's misconfiguration, never the caller's 404."""
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        yield
    except ClientError as exc:
        raise UnavailableError(f"{what}: {error_code(exc) or 'AWS error'}") from exc
    except BotoCoreError as exc:
        raise UnavailableError(f"{what}: {exc}") from exc
