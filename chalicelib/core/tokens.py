"""Ingress bearer tokens: shown once, stored only as salted hashes, checked in constant time."""

from __future__ import annotations

import hashlib
import hmac
import secrets

STORE_KIND = "token"  # the ResourceStore kind of a token record


def new_token() -> str:
    return "sbt_" + secrets.token_urlsafe(32)


def hash_token(token: str, salt: str | None = None) -> str:
    salt = salt if salt is not None else secrets.token_hex(16)
    digest = hashlib.sha256((salt + token).encode()).hexdigest()
    return f"sha256${salt}${digest}"


def match(token: str, stored: tuple[tuple[str, str], ...]) -> str | None:
    """The id of the stored ``(id, hash)`` that ``token`` matches, or None; every hash is
    compared (no early exit)."""
    found: str | None = None
    for token_id, hashed in stored:
        try:
            _, salt, digest = hashed.split("$", 2)
        except ValueError:
            continue
        candidate = hashlib.sha256((salt + token).encode()).hexdigest()
        if hmac.compare_digest(candidate, digest):
            found = token_id
    return found


def bearer(authorization: str | None) -> str | None:
    if not authorization:
        return None
    scheme, _, value = authorization.strip().partition(" ")
    if scheme.lower() != "bearer" or not value.strip():
        return None
    return value.strip()
