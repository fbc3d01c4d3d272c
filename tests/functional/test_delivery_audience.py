"""Authenticated HTTP delivery (design.md §2.5): a destination with an ``audience`` gets
``Authorization: Bearer <JWT>`` signed by the broker's key, which verifies against the broker's
JWKS with an OIDC library we did not write (joserfc); the claims name the broker, the audience and
the trigger; a token is reused until near its expiry; the token never shows up anywhere but the
request. In-memory fakes (a real P-256 key in tests/fakes/signer.py)."""

from __future__ import annotations

import base64
import json
import logging
from collections.abc import Iterator
from typing import Any

import pytest
from chalice.test import Client
from joserfc import jwt
from joserfc.errors import InvalidClaimError
from joserfc.jwk import KeySet

from app import app
from chalicelib.container import use_container
from chalicelib.core.errors import ValidationError
from chalicelib.ports import HttpResponse
from tests.fakes.signer import MemorySigner
from tests.functional.harness import CP, Harness

SUB = "http://sub.example/"
SINK = "http://sink.example/"


def with_signer(h: Harness) -> MemorySigner:
    from chalicelib.services.oidc import SigningKey

    signer = MemorySigner()
    h.container.signing_key = SigningKey(signer)  # type: ignore[misc]
    return signer


def harness(*answers: HttpResponse) -> tuple[Harness, MemorySigner]:
    h = Harness(*answers)
    signer = with_signer(h)
    h.broker()
    return h, signer


def keys(h: Harness) -> KeySet:
    return KeySet.import_key_set(h.container.discovery.jwks())


def bearer(headers: dict[str, str]) -> str:
    scheme, _, token = headers["Authorization"].partition(" ")
    assert scheme == "Bearer"
    return token


def claims_of(h: Harness, token: str, audience: str) -> dict[str, Any]:
    decoded = jwt.decode(token, keys(h), algorithms=["ES256"])
    registry = jwt.JWTClaimsRegistry(
        iss={"essential": True, "value": h.settings.public_url},
        aud={"essential": True, "value": audience},
        sub={"essential": True},
        exp={"essential": True},
    )
    registry.validate(decoded.claims)
    assert decoded.header["kid"] == h.container.discovery.jwks()["keys"][0]["kid"]
    return dict(decoded.claims)


def test_a_subscriber_with_an_audience_gets_a_token_that_verifies() -> None:
    h, _ = harness()
    h.trigger("tr", subscriber={"uri": SUB, "audience": "orders-api"})
    h.send()
    assert h.deliver_once("tr")["batchItemFailures"] == []
    [sent] = h.sender.sent
    claims = claims_of(h, bearer(sent.headers), "orders-api")
    assert claims["sub"] == "system:serviceaccount:ns:trigger-tr"
    assert 0 < claims["exp"] - claims["iat"] <= 3600


def test_a_token_for_another_audience_is_refused_by_the_verifier() -> None:
    h, _ = harness()
    h.trigger("tr", subscriber={"uri": SUB, "audience": "orders-api"})
    h.send()
    h.deliver_once("tr")
    token = bearer(h.sender.sent[0].headers)
    with pytest.raises(InvalidClaimError):
        claims_of(h, token, "billing-api")


def test_without_an_audience_no_token_is_sent() -> None:
    h, signer = harness()
    h.trigger("tr", uri=SUB)
    h.send()
    h.deliver_once("tr")
    assert "Authorization" not in h.sender.sent[0].headers and signer.signed == 0


def test_a_token_is_reused_per_audience_and_trigger() -> None:
    h, signer = harness()
    h.trigger("a", subscriber={"uri": SUB, "audience": "one"})
    h.trigger("b", subscriber={"uri": SUB, "audience": "one"})
    for i in range(3):
        h.send(id_=str(i))
    h.deliver_once("a")
    h.deliver_once("b")
    tokens = [bearer(s.headers) for s in h.sender.sent]
    assert len(tokens) == 6 and len(set(tokens)) == 2  # one per trigger (its sub)
    assert signer.signed == 2


def test_the_dead_letter_sink_gets_a_token_for_its_own_audience() -> None:
    h, _ = harness(HttpResponse(400, {}, b"no"), HttpResponse(202, {}, b""))
    delivery = {"retry": 0, "deadLetterSink": {"uri": SINK, "audience": "sink-aud"}}
    h.trigger("tr", subscriber={"uri": SUB, "audience": "sub-aud"}, delivery=delivery)
    h.send()
    h.deliver_once("tr")
    h.deliver_once("tr", dead_letter=True)
    to_sub, to_sink = h.sender.sent
    assert to_sink.url == SINK
    assert claims_of(h, bearer(to_sub.headers), "sub-aud")["aud"] == "sub-aud"
    assert claims_of(h, bearer(to_sink.headers), "sink-aud")["aud"] == "sink-aud"


def test_a_broker_dead_letter_sink_audience_applies_to_its_triggers() -> None:
    h, _ = harness(HttpResponse(400, {}, b"no"), HttpResponse(202, {}, b""))
    h.broker(delivery={"retry": 0, "deadLetterSink": {"uri": SINK, "audience": "b-aud"}})
    h.trigger("tr", uri=SUB)
    h.send()
    h.deliver_once("tr")
    h.deliver_once("tr", dead_letter=True)
    to_sub, to_sink = h.sender.sent
    assert "Authorization" not in to_sub.headers
    claims = claims_of(h, bearer(to_sink.headers), "b-aud")
    assert claims["sub"] == "system:serviceaccount:ns:trigger-tr"


def test_no_signature_no_request_the_attempt_is_retried() -> None:
    h, signer = harness()
    signer.fail = True
    h.trigger("tr", subscriber={"uri": SUB, "audience": "orders-api"})
    h.send()
    assert len(h.deliver_once("tr")["batchItemFailures"]) == 1
    assert h.sender.sent == []
    [record] = [r for r in h.archive.decoded() if r["kind"] == "delivery"]
    assert record["outcome"] == "retry"


def test_the_token_is_never_logged_archived_dead_lettered_or_shown(
    caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    """A subscriber that refuses the token (401) gets the event dead-lettered at once (no
    retry, design.md §2.3); the token it was sent is in none of the archive, the DLQ message,
    the dead-letter listing, the trigger as the API shows it, the logs or the output."""
    caplog.set_level(logging.DEBUG)
    h, _ = harness(HttpResponse(401, {}, b"invalid token"))
    use_container(h.container)
    try:
        h.trigger("tr", subscriber={"uri": SUB, "audience": "orders-api"})
        h.send()
        assert h.deliver_once("tr")["batchItemFailures"] == []
        [sent] = h.sender.sent
        token = bearer(sent.headers)
        [dead] = h.messages(h.dlq_of("tr"))
        assert h.queues.depth(h.queue_of("tr")) == 0  # not retried
        with Client(app) as client:
            shown = [
                client.http.get(f"{CP}/ns/triggers/tr").body,
                client.http.get(f"{CP}/ns/triggers/tr/deadletters").body,
                client.http.get("/.well-known/jwks.json").body,
            ]
        places = {
            "archive": b"\n".join(h.archive.records),
            "dlq": json.dumps(dead).encode(),
            "api": b"\n".join(shown),
            "logs": caplog.text.encode(),
            "output": "".join(capsys.readouterr()).encode(),
        }
        signature = token.rsplit(".", 1)[1]
        for where, text in places.items():
            for variant in (token, signature, base64.b64encode(token.encode()).decode()):
                assert variant.encode() not in text, where
        assert b"orders-api" in places["api"]  # the audience is no secret: it is shown
    finally:
        use_container(None)


# ---- the resource: validation and the JSON round trip -----------------------------------------


def test_audiences_round_trip_through_the_api() -> None:
    h, _ = harness()
    delivery = {"deadLetterSink": {"uri": SINK, "audience": "sink-aud"}}
    doc = h.trigger("tr", subscriber={"uri": SUB, "audience": "sub-aud"}, delivery=delivery)
    assert doc["spec"]["subscriber"] == {"uri": SUB, "audience": "sub-aud"}
    assert doc["spec"]["delivery"]["deadLetterSink"] == {"uri": SINK, "audience": "sink-aud"}
    again = h.container.triggers.get("ns", "tr")
    assert again["spec"] == doc["spec"]


@pytest.mark.parametrize(
    ("subscriber", "message"),
    [
        ({"uri": SUB, "audience": ""}, "non-empty string"),
        ({"uri": SUB, "audience": "a" * 1025}, "at most 1024"),
        ({"uri": SUB, "audience": 7}, "non-empty string"),
        ({"uri": SUB, "audience": "a\nb"}, "control characters"),
        ({"uri": "kafka://k:9092/t", "audience": "x"}, "http(s) uri only"),
        (
            {"uri": "arn:aws:sqs:us-east-1:123456789012:q", "audience": "x"},
            "http(s) uri only",
        ),
    ],
)
def test_a_bad_audience_is_a_400_naming_it(subscriber: dict[str, Any], message: str) -> None:
    h, _ = harness()
    with pytest.raises(ValidationError) as caught:
        h.trigger("tr", subscriber=subscriber, delivery={"deadLetterSink": subscriber})
    fields = {p.field: p.message for p in caught.value.problems}
    for path in ("spec.subscriber.audience", "spec.delivery.deadLetterSink.audience"):
        assert message in fields[path], fields


def test_an_audience_of_1024_characters_is_taken() -> None:
    h, _ = harness()
    doc = h.trigger("tr", subscriber={"uri": SUB, "audience": "a" * 1024})
    assert doc["spec"]["subscriber"]["audience"] == "a" * 1024


# ---- discovery ------------------------------------------------------------------------------


@pytest.fixture
def client() -> Iterator[tuple[Harness, Client]]:
    h, _ = harness()
    use_container(h.container)
    with Client(app) as c:
        yield h, c
    use_container(None)


def test_discovery_is_public_and_cacheable(client: tuple[Harness, Client]) -> None:
    h, c = client
    config = c.http.get("/.well-known/openid-configuration")
    assert config.status_code == 200 and "max-age" in config.headers["Cache-Control"]
    doc = config.json_body
    assert doc["issuer"] == h.settings.public_url
    assert doc["jwks_uri"] == f"{h.settings.public_url}/.well-known/jwks.json"
    assert doc["id_token_signing_alg_values_supported"] == ["ES256"]
    found = c.http.get("/.well-known/jwks.json")
    assert found.status_code == 200 and "max-age" in found.headers["Cache-Control"]
    [key] = found.json_body["keys"]
    assert {key["kty"], key["crv"], key["alg"], key["use"]} == {"EC", "P-256", "ES256", "sig"}
    assert set(key) == {"kty", "crv", "x", "y", "kid", "alg", "use"}  # no private member


def test_discovery_without_kms_is_a_503_problem(client: tuple[Harness, Client]) -> None:
    h, c = client
    h.container.signing_key._signer.fail = True  # type: ignore[attr-defined]
    found = c.http.get("/.well-known/jwks.json")
    assert found.status_code == 503
    assert found.headers["Content-Type"] == "application/problem+json"
