"""An in-memory Signer (chalicelib/ports.py): a real P-256 key made with ``cryptography`` in the
test process, answering as KMS does (DER signature, DER SubjectPublicKeyInfo), or refusing as an
unreachable KMS does. tests/contract/test_signer.py runs the same suite on it and on the KMS
adapter (moto)."""

from __future__ import annotations

from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec

from chalicelib.core.errors import UnavailableError


class MemorySigner:
    def __init__(self) -> None:
        self.key = ec.generate_private_key(ec.SECP256R1())
        self.signed = 0  # Sign calls, as KMS would bill them
        self.fail = False  # answer as a KMS that cannot be reached

    def sign(self, message: bytes) -> bytes:
        if self.fail:
            raise UnavailableError("KMS Sign: KMSInternalException")
        self.signed += 1
        return self.key.sign(message, ec.ECDSA(hashes.SHA256()))

    def public_key(self) -> bytes:
        if self.fail:
            raise UnavailableError("KMS GetPublicKey: KMSInternalException")
        return self.key.public_key().public_bytes(
            serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
        )
