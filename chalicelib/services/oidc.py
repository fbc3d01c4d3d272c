"""The broker as an OIDC issuer (design.md §2.5): the tokens deliveries to a destination with an
``audience`` carry, and the public discovery documents subscribers verify them with. The key is
an asymmetric KMS key (a ``Signer``); nothing here holds a private key."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from chalicelib.core import jws
from chalicelib.ports import Signer

# A token lives an hour at most (design.md §2.5) and is reused until five minutes before it
# expires: any attempt (at most the delivery function's timeout) that carries it ends first.
TOKEN_SECONDS = 3600
REFRESH_BEFORE_SECONDS = 300
# Tokens kept per container, one per (audience, trigger): an audience is at most 1,024 characters,
# a token at most ~1.8 KB, so the cache stays under ~3 MB.
MAX_TOKENS = 1024
JWKS_PATH = "/.well-known/jwks.json"
DISCOVERY_PATH = "/.well-known/openid-configuration"


def subject(namespace: str, trigger: str) -> str:
    """The ``sub`` naming a trigger, as Knative names its OIDC service account."""
    return f"system:serviceaccount:{namespace}:trigger-{trigger}"


class SigningKey:
    """The signer and its public JWK, read once per container (the key never changes under an
    alias; a new key is a new ``kid``)."""

    def __init__(self, signer: Signer) -> None:
        self._signer = signer
        self._jwk: dict[str, str] | None = None
        self._lock = threading.Lock()

    @property
    def jwk(self) -> dict[str, str]:
        if self._jwk is None:
            with self._lock:
                if self._jwk is None:
                    self._jwk = jws.public_jwk(self._signer.public_key())
        return self._jwk

    def sign(self, message: bytes) -> bytes:
        """JWS's raw ``r || s`` of ``message``."""
        return jws.der_to_raw_signature(self._signer.sign(message))


class TokenIssuer:
    """``Authorization`` values for deliveries: an ES256 JWT per (audience, subject), cached."""

    def __init__(
        self, key: SigningKey, issuer: str, clock: Callable[[], float] = time.time
    ) -> None:
        self._key = key
        self._issuer = issuer
        self._clock = clock
        self._tokens: dict[tuple[str, str], tuple[str, int]] = {}  # key -> (token, exp)
        self._issuing = threading.Lock()

    def authorization(self, audience: str, sub: str) -> str:
        """``Bearer <JWT>`` for ``audience``; raises UnavailableError when KMS cannot sign."""
        return f"Bearer {self.token(audience, sub)}"

    def token(self, audience: str, sub: str) -> str:
        key = (audience, sub)
        token = self._fresh(key)
        if token is not None:
            return token
        # One signing at a time: the lanes of a batch that miss the same token wait for the
        # first one's instead of each calling KMS.
        with self._issuing:
            token = self._fresh(key)
            if token is None:
                token = self._issue(key)
        return token

    def _fresh(self, key: tuple[str, str]) -> str | None:
        cached = self._tokens.get(key)
        if cached is not None and self._clock() < cached[1] - REFRESH_BEFORE_SECONDS:
            return cached[0]
        return None

    def _issue(self, key: tuple[str, str]) -> str:
        audience, sub = key
        now = int(self._clock())
        exp = now + TOKEN_SECONDS
        header = {"alg": jws.ALG, "typ": "JWT", "kid": self._key.jwk["kid"]}
        claims = {"iss": self._issuer, "sub": sub, "aud": audience, "iat": now, "exp": exp}
        signed = jws.signing_input(header, claims)
        token = jws.compact(signed, self._key.sign(signed))
        if len(self._tokens) >= MAX_TOKENS and key not in self._tokens:
            self._tokens.pop(next(iter(self._tokens)))  # the oldest entry
        self._tokens[key] = (token, exp)
        return token


class Discovery:
    """``GET /.well-known/openid-configuration`` and ``GET /.well-known/jwks.json``: public, what
    any OIDC library needs to verify the broker's tokens (Kubernetes' service account issuer
    discovery has the same fields)."""

    def __init__(self, key: SigningKey, issuer: str) -> None:
        self._key = key
        self._issuer = issuer

    def configuration(self) -> dict[str, Any]:
        return {
            "issuer": self._issuer,
            "jwks_uri": self._issuer + JWKS_PATH,
            "response_types_supported": ["id_token"],
            "subject_types_supported": ["public"],
            "id_token_signing_alg_values_supported": [jws.ALG],
            "claims_supported": ["iss", "sub", "aud", "iat", "exp"],
        }

    def jwks(self) -> dict[str, Any]:
        return {"keys": [dict(self._key.jwk)]}
