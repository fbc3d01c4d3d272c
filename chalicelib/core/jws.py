"""The JSON forms of an ES256 token (RFC 7515, 7518, 7519) around a signature made elsewhere
(design.md §2.5): the signing input, KMS's DER signature as JWS's raw ``r || s``, a DER
SubjectPublicKeyInfo as a JWK, and the key's RFC 7638 thumbprint. Encoding only: the key and the
signing stay in KMS, and subscribers verify with libraries of their own."""

from __future__ import annotations

import base64
import hashlib
import json
from typing import Any

ALG = "ES256"
# P-256: coordinates and signature halves of 32 bytes.
_SIZE = 32
# DER of the algorithm identifier of an EC P-256 public key: OID id-ecPublicKey (1.2.840.10045.2.1)
# and OID prime256v1 (1.2.840.10045.3.1.7).
_EC_PUBLIC_KEY = bytes.fromhex("06072a8648ce3d0201")
_P256 = bytes.fromhex("06082a8648ce3d030107")
_SEQUENCE, _INTEGER, _BIT_STRING = 0x30, 0x02, 0x03


class KeyFormatError(ValueError):
    """A signature or public key that is not what an ECC_NIST_P256 KMS key gives."""


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _json(value: dict[str, Any]) -> bytes:
    return json.dumps(value, separators=(",", ":"), sort_keys=True).encode()


def signing_input(header: dict[str, Any], claims: dict[str, Any]) -> bytes:
    """``BASE64URL(header) . BASE64URL(claims)``: the bytes the signature covers."""
    return f"{b64url(_json(header))}.{b64url(_json(claims))}".encode("ascii")


def compact(signing_input: bytes, raw_signature: bytes) -> str:
    return f"{signing_input.decode('ascii')}.{b64url(raw_signature)}"


def _tlv(data: bytes, at: int, tag: int) -> tuple[bytes, int]:
    """The value of the DER element of type ``tag`` at ``at``, and where the next one starts."""
    if at + 2 > len(data) or data[at] != tag:
        raise KeyFormatError(f"expected DER tag 0x{tag:02x} at byte {at}")
    length, at = data[at + 1], at + 2
    if length & 0x80:  # long form: the next (length & 0x7F) bytes are the length
        count = length & 0x7F
        if count == 0 or count > 2 or at + count > len(data):
            raise KeyFormatError("DER length out of range")
        length, at = int.from_bytes(data[at : at + count], "big"), at + count
    if at + length > len(data):
        raise KeyFormatError("DER element runs past its end")
    return data[at : at + length], at + length


def der_to_raw_signature(der: bytes) -> bytes:
    """ECDSA ``SEQUENCE { INTEGER r, INTEGER s }`` (KMS ``Sign``) as JWS's 64-byte ``r || s``
    (RFC 7518 §3.4): each integer without its sign byte, left-padded to 32 bytes."""
    body, end = _tlv(der, 0, _SEQUENCE)
    if end != len(der):
        raise KeyFormatError("trailing bytes after the signature")
    r, at = _tlv(body, 0, _INTEGER)
    s, at = _tlv(body, at, _INTEGER)
    if at != len(body):
        raise KeyFormatError("a signature is two integers")
    out = b""
    for half in (r, s):
        half = half.lstrip(b"\x00")
        if not half or len(half) > _SIZE:
            raise KeyFormatError("signature integer out of range for P-256")
        out += half.rjust(_SIZE, b"\x00")
    return out


def public_jwk(spki_der: bytes) -> dict[str, str]:
    """A DER SubjectPublicKeyInfo of a P-256 key (KMS ``GetPublicKey``) as a JWK (RFC 7518 §6.2),
    with its thumbprint as ``kid``, ``alg`` and ``use``."""
    body, end = _tlv(spki_der, 0, _SEQUENCE)
    if end != len(spki_der):
        raise KeyFormatError("trailing bytes after the public key")
    algorithm, at = _tlv(body, 0, _SEQUENCE)
    if algorithm != _EC_PUBLIC_KEY + _P256:
        raise KeyFormatError("not an EC P-256 public key (KeySpec ECC_NIST_P256)")
    bits, at = _tlv(body, at, _BIT_STRING)
    # No unused bits, then an uncompressed point: 0x04 || X || Y.
    if at != len(body) or len(bits) != 2 + 2 * _SIZE or bits[:2] != b"\x00\x04":
        raise KeyFormatError("expected an uncompressed P-256 point")
    x, y = b64url(bits[2 : 2 + _SIZE]), b64url(bits[2 + _SIZE :])
    required = {"crv": "P-256", "kty": "EC", "x": x, "y": y}
    kid = b64url(hashlib.sha256(_json(required)).digest())  # RFC 7638: members in order
    return {**required, "kid": kid, "alg": ALG, "use": "sig"}
