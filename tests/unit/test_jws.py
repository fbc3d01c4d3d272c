"""ES256 tokens around a signature made elsewhere (chalicelib/core/jws.py, services/oidc.py): the
DER to raw signature conversion, the JWK of a DER public key and its RFC 7638 thumbprint, the
token's shape and claims, and the token cache (reused until five minutes before expiry, bounded).
Checked against ``cryptography`` and joserfc, which we did not write."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import (
    decode_dss_signature,
    encode_dss_signature,
)
from hypothesis import given
from hypothesis import strategies as st
from joserfc.jwk import ECKey

from chalicelib.core import jws
from chalicelib.services import oidc
from chalicelib.services.oidc import SigningKey, TokenIssuer
from tests.fakes.signer import MemorySigner

N = 2**256 - 1


@given(st.integers(1, N), st.integers(1, N))
def test_der_to_raw_is_r_then_s_in_32_bytes_each(r: int, s: int) -> None:
    raw = jws.der_to_raw_signature(encode_dss_signature(r, s))
    assert raw == r.to_bytes(32, "big") + s.to_bytes(32, "big")


def test_a_real_signature_converts_and_verifies() -> None:
    signer = MemorySigner()
    der = signer.sign(b"m")
    raw = jws.der_to_raw_signature(der)
    r, s = int.from_bytes(raw[:32], "big"), int.from_bytes(raw[32:], "big")
    assert (r, s) == decode_dss_signature(der)
    signer.key.public_key().verify(encode_dss_signature(r, s), b"m", ec.ECDSA(hashes.SHA256()))


@pytest.mark.parametrize(
    "der",
    [
        b"",
        b"\x31\x06\x02\x01\x01\x02\x01\x01",  # not a SEQUENCE
        b"\x30\x06\x02\x01\x01\x02\x01\x01\x00",  # trailing byte
        b"\x30\x03\x02\x01\x01",  # one integer
        b"\x30\x09\x02\x01\x01\x02\x01\x01\x02\x01\x01",  # three
        b"\x30\x06\x02\x01\x00\x02\x01\x01",  # r = 0
        b"\x30\x26\x02\x21\x01" + b"\x00" * 32 + b"\x02\x01\x01",  # r of 33 bytes
        b"\x30\x08\x02\x05\x01\x02\x01\x01",  # runs past its end
        b"\x30\x83\x00\x00\x06",  # a 3-byte length
    ],
)
def test_a_bad_signature_is_refused(der: bytes) -> None:
    with pytest.raises(jws.KeyFormatError):
        jws.der_to_raw_signature(der)


def test_the_jwk_is_the_public_key_with_its_thumbprint() -> None:
    signer = MemorySigner()
    jwk = jws.public_jwk(signer.public_key())
    numbers = signer.key.public_key().public_numbers()
    pad = "=" * 2

    def coordinate(name: str) -> int:
        return int.from_bytes(base64.urlsafe_b64decode(jwk[name] + pad), "big")

    assert (coordinate("x"), coordinate("y")) == (numbers.x, numbers.y)
    assert jwk["kid"] == ECKey.import_key(jwk).thumbprint()  # RFC 7638, as joserfc computes it
    assert set(jwk) == {"kty", "crv", "x", "y", "kid", "alg", "use"}


def test_another_curve_is_refused() -> None:
    from cryptography.hazmat.primitives import serialization

    other = ec.generate_private_key(ec.SECP384R1()).public_key()
    spki = other.public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    with pytest.raises(jws.KeyFormatError, match="P-256"):
        jws.public_jwk(spki)


# ---- tokens ---------------------------------------------------------------------------------


class Clock:
    def __init__(self, now: float = 1_700_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def _part(token: str, i: int) -> dict[str, Any]:
    segment = token.split(".")[i]
    return dict(json.loads(base64.urlsafe_b64decode(segment + "=" * (-len(segment) % 4))))


def issuer(clock: Clock) -> tuple[TokenIssuer, MemorySigner, SigningKey]:
    signer = MemorySigner()
    key = SigningKey(signer)
    return TokenIssuer(key, "https://broker.example", clock), signer, key


def test_the_token_has_the_header_and_claims_of_the_contract() -> None:
    clock = Clock()
    tokens, _, key = issuer(clock)
    token = tokens.token("aud-1", oidc.subject("ns", "tr"))
    assert token.count(".") == 2 and "=" not in token
    assert _part(token, 0) == {"alg": "ES256", "typ": "JWT", "kid": key.jwk["kid"]}
    claims = _part(token, 1)
    assert claims == {
        "iss": "https://broker.example",
        "aud": "aud-1",
        "sub": "system:serviceaccount:ns:trigger-tr",
        "iat": int(clock.now),
        "exp": int(clock.now) + 3600,
    }
    assert len(base64.urlsafe_b64decode(token.split(".")[2] + "==")) == 64  # raw r || s
    assert tokens.authorization("aud-1", "s").startswith("Bearer ")


def test_a_token_is_reused_until_five_minutes_before_it_expires() -> None:
    clock = Clock()
    tokens, signer, _ = issuer(clock)
    first = tokens.token("a", "s")
    clock.now += 3600 - 300 - 1
    assert tokens.token("a", "s") == first and signer.signed == 1
    clock.now += 1
    second = tokens.token("a", "s")
    assert second != first and signer.signed == 2
    assert _part(second, 1)["exp"] - _part(second, 1)["iat"] == 3600


def test_tokens_are_per_audience_and_subject() -> None:
    tokens, signer, _ = issuer(Clock())
    found = {tokens.token(a, s) for a in ("a", "b") for s in ("s", "t")}
    assert len(found) == 4 and signer.signed == 4


def test_the_cache_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(oidc, "MAX_TOKENS", 3)
    tokens, signer, _ = issuer(Clock())
    for i in range(5):
        tokens.token(f"aud-{i}", "s")
    assert len(tokens._tokens) == 3
    tokens.token("aud-4", "s")  # the newest is kept
    assert signer.signed == 5
    tokens.token("aud-0", "s")  # the oldest was dropped
    assert signer.signed == 6


def test_the_public_key_is_read_once() -> None:
    signer = MemorySigner()
    key = SigningKey(signer)
    calls = 0
    original = signer.public_key

    def counted() -> bytes:
        nonlocal calls
        calls += 1
        return original()

    signer.public_key = counted  # type: ignore[method-assign]
    TokenIssuer(key, "i").token("a", "s")
    TokenIssuer(key, "i").token("b", "s")
    assert calls == 1
