"""Authenticated HTTP delivery on the local runtime (design.md §2.5): a subscriber that trusts the
broker the way any OIDC relying party does (discovery document, then the JWKS it names, then an
OIDC/JWT library we did not write: joserfc) accepts the token of a trigger whose audience is its
own, and refuses (401) a token for another audience, which dead-letters the event at once (401
is not retried, design.md §2.3). The key is the KMS key the bootstrap made on the embedded
endpoint; the token shows up nowhere but the request."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from joserfc import jwt
from joserfc.errors import JoseError
from joserfc.jwk import KeySet

from brokerctl.event_display import EventDisplay, Received, Reply
from tests.e2e.conftest import LocalBroker, wait_until

pytestmark = pytest.mark.e2e

AUDIENCE = "orders-api"


class VerifyingSubscriber:
    """Answers 202 to a request whose bearer token verifies for ``audience``, 401 otherwise;
    keeps every token it was sent and why it refused."""

    def __init__(self, broker: LocalBroker, audience: str) -> None:
        self.broker = broker
        self.audience = audience
        self.tokens: list[str] = []
        self.claims: list[dict[str, Any]] = []
        self.refused: list[str] = []
        self._keys: KeySet | None = None
        self._lock = threading.Lock()

    def keys(self) -> tuple[str, KeySet]:
        config = httpx.get(f"{self.broker.url}/.well-known/openid-configuration", timeout=10)
        assert config.status_code == 200 and "max-age" in config.headers["cache-control"]
        doc = config.json()
        if self._keys is None:
            jwks = httpx.get(doc["jwks_uri"], timeout=10)
            assert jwks.status_code == 200
            self._keys = KeySet.import_key_set(jwks.json())
        return doc["issuer"], self._keys

    def __call__(self, got: Received, n: int) -> Reply:
        headers = {k.lower(): v for k, v in got.headers.items()}
        scheme, _, token = headers.get("authorization", "").partition(" ")
        with self._lock:
            self.tokens.append(token)
        try:
            issuer, keys = self.keys()
            decoded = jwt.decode(token, keys, algorithms=["ES256"])
            jwt.JWTClaimsRegistry(
                iss={"essential": True, "value": issuer},
                aud={"essential": True, "value": self.audience},
                sub={"essential": True},
                exp={"essential": True},
                iat={"essential": True},
            ).validate(decoded.claims)
            assert scheme == "Bearer"
        except (JoseError, AssertionError, ValueError) as exc:
            with self._lock:
                self.refused.append(f"{type(exc).__name__}: {exc}")
            return Reply(401, body=b"invalid token")
        with self._lock:
            self.claims.append(dict(decoded.claims))
        return Reply(202)


@pytest.fixture
def ns(local_broker: LocalBroker) -> Iterator[str]:
    ns = f"a-{uuid.uuid4().hex[:8]}"
    r = local_broker.put(ns, "brokers", "default", {"metadata": {"name": "default"}})
    assert r.status_code == 201, r.text
    yield ns


def trigger(broker: LocalBroker, ns: str, name: str, uri: str, audience: str) -> None:
    spec = {
        "broker": "default",
        "subscriber": {"uri": uri, "audience": audience},
        "delivery": {"retry": 3, "backoffDelay": "PT0.1S"},
    }
    r = broker.put(ns, "triggers", name, {"metadata": {"name": name}, "spec": spec})
    assert r.status_code == 201, r.text
    assert r.json()["spec"]["subscriber"]["audience"] == audience
    broker.wait_ready(ns, "triggers", name)


def send(broker: LocalBroker, ns: str) -> str:
    event_id = uuid.uuid4().hex
    headers = {
        "ce-specversion": "1.0",
        "ce-id": event_id,
        "ce-source": "/e2e",
        "ce-type": "order.created",
        "content-type": "application/json",
    }
    r = httpx.post(f"{broker.url}/{ns}/default", content=b"{}", headers=headers, timeout=30)
    assert r.status_code == 202, r.text
    return event_id


def test_the_subscriber_verifies_the_token_with_the_brokers_jwks(
    local_broker: LocalBroker, ns: str
) -> None:
    verifier = VerifyingSubscriber(local_broker, AUDIENCE)
    with EventDisplay(responder=verifier) as sub:
        trigger(local_broker, ns, "t", sub.url, AUDIENCE)
        send(local_broker, ns)
        send(local_broker, ns)
        wait_until(lambda: len(verifier.claims) == 2, 30, "two verified deliveries")
    assert verifier.refused == []
    for claims in verifier.claims:
        assert claims["iss"] == local_broker.url
        assert claims["aud"] == AUDIENCE
        assert claims["sub"] == f"system:serviceaccount:{ns}:trigger-t"
        assert claims["exp"] - claims["iat"] <= 3600 and claims["exp"] > time.time()


def test_a_token_for_another_audience_is_refused_and_dead_lettered_at_once(
    local_broker: LocalBroker, ns: str
) -> None:
    verifier = VerifyingSubscriber(local_broker, AUDIENCE)
    with EventDisplay(responder=verifier) as sub:
        trigger(local_broker, ns, "wrong", sub.url, "billing-api")
        event_id = send(local_broker, ns)

        def dead() -> list[dict[str, Any]]:
            r = httpx.get(f"{local_broker.cp(ns)}/triggers/wrong/deadletters", timeout=10)
            return list(r.json()["items"]) if r.status_code == 200 else []

        [letter] = wait_until(dead, 30, "the refused event in the DLQ")
    assert letter["event"]["id"] == event_id
    assert str(letter["event"]["knativeerrorcode"]) == "401"
    assert len(verifier.tokens) == 1, "a 401 is not retried"
    assert verifier.refused and "aud" in verifier.refused[0]
    token = verifier.tokens[0]
    listing = httpx.get(f"{local_broker.cp(ns)}/triggers/wrong/deadletters", timeout=10).text
    assert token not in listing
    assert not any(token in line for line in local_broker.lines), "the token was logged"
