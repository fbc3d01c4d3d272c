"""The Signer port on its in-memory fake and on the KMS adapter against the moto server (an
ECC_NIST_P256 SIGN_VERIFY key behind an alias, as the stack and the local bootstrap make it):
what it signs verifies with the public key it gives, the public key is the JWK the broker
publishes, a token the issuer makes verifies with an OIDC library we did not write (joserfc), and
a key that cannot be used is UnavailableError, never a signature."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from joserfc import jwt
from joserfc.jwk import KeySet

from chalicelib.core import jws
from chalicelib.core.errors import UnavailableError
from chalicelib.services.oidc import SigningKey, TokenIssuer
from tests.fakes.signer import MemorySigner


class MemoryWorld:
    def signer(self) -> Any:
        return MemorySigner()

    def broken(self) -> Any:
        signer = MemorySigner()
        signer.fail = True
        return signer


class KmsWorld:
    def __init__(self, clients: Any) -> None:
        self.clients = clients

    def signer(self) -> Any:
        from chalicelib.adapters.kms_signer import KmsSigner

        kms = self.clients.client("kms")
        key = kms.create_key(KeySpec="ECC_NIST_P256", KeyUsage="SIGN_VERIFY")["KeyMetadata"]
        alias = f"alias/test-{uuid.uuid4().hex[:10]}"
        kms.create_alias(AliasName=alias, TargetKeyId=key["KeyId"])
        return KmsSigner(self.clients, alias)

    def broken(self) -> Any:
        from chalicelib.adapters.kms_signer import KmsSigner

        return KmsSigner(self.clients, f"alias/missing-{uuid.uuid4().hex[:10]}")


@pytest.fixture(params=["memory", "aws"])
def world(request: pytest.FixtureRequest) -> Any:
    if request.param == "memory":
        return MemoryWorld()
    return KmsWorld(request.getfixturevalue("aws_clients"))


def _verify(spki: bytes, signature: bytes, message: bytes) -> None:
    key = serialization.load_der_public_key(spki)
    assert isinstance(key, ec.EllipticCurvePublicKey)
    key.verify(signature, message, ec.ECDSA(hashes.SHA256()))


def test_a_signature_verifies_with_the_public_key(world: Any) -> None:
    signer = world.signer()
    message = b"eyJhbGciOiJFUzI1NiJ9.eyJzdWIiOiJ4In0"
    signature = signer.sign(message)
    _verify(signer.public_key(), signature, message)
    with pytest.raises(InvalidSignature):
        _verify(signer.public_key(), signature, message + b"x")


def test_the_public_key_is_a_p256_jwk(world: Any) -> None:
    jwk = jws.public_jwk(world.signer().public_key())
    assert jwk["kty"] == "EC" and jwk["crv"] == "P-256" and jwk["alg"] == "ES256"
    assert jwk["use"] == "sig" and len(jwk["kid"]) == 43  # a base64url SHA-256 thumbprint


def test_a_token_verifies_with_an_oidc_library(world: Any) -> None:
    key = SigningKey(world.signer())
    token = TokenIssuer(key, "https://broker.example").token("my-aud", "sub-1")
    keys = KeySet.import_key_set({"keys": [dict[str, Any](key.jwk)]})
    decoded = jwt.decode(token, keys, algorithms=["ES256"])
    assert decoded.header["kid"] == key.jwk["kid"]
    assert decoded.claims["aud"] == "my-aud" and decoded.claims["iss"] == "https://broker.example"


def test_a_key_that_cannot_be_used_is_unavailable(world: Any) -> None:
    signer = world.broken()
    with pytest.raises(UnavailableError):
        signer.sign(b"a.b")
    with pytest.raises(UnavailableError):
        signer.public_key()


def test_the_local_bootstrap_makes_the_key_the_functions_sign_with_once(
    aws_settings: Any, aws_clients: Any
) -> None:
    """Local mode: the key the template declares (infra/declarations.py), on the embedded
    endpoint under the alias Settings names; a second start finds it instead of making another."""
    from brokerctl.bootstrap import bootstrap
    from chalicelib.adapters.kms_signer import KmsSigner
    from infra.declarations import local_declarations

    assert local_declarations(aws_settings).signing_alias == aws_settings.signing_key
    said: list[str] = []
    bootstrap(aws_settings, aws_clients, said.append)
    bootstrap(aws_settings, aws_clients, said.append)
    kms = aws_clients.client("kms")
    key = kms.describe_key(KeyId=aws_settings.signing_key)["KeyMetadata"]
    assert (key["KeySpec"], key["KeyUsage"]) == ("ECC_NIST_P256", "SIGN_VERIFY")
    made = [line for line in said if "signing key" in line]
    assert len(made) <= 1  # once (or before this test, by another suite's bootstrap)
    signer = KmsSigner(aws_clients, aws_settings.signing_key)
    _verify(signer.public_key(), signer.sign(b"a.b"), b"a.b")
