"""ConnectionAuth (services/connection_auth.py) on fakes and a clock of its own: secrets kept for
their TTL only, tokens until shortly before they expire, every token-endpoint answer that is not a
bearer token refused with a reason that repeats no secret, the address guard on the token URL, and
bounded caches."""

from __future__ import annotations

import json
from contextlib import closing

import pytest

from brokerctl.event_display import EventDisplay
from chalicelib.adapters.http_sender import Urllib3Sender
from chalicelib.core.resources.connection import ApiKey, Connection, OAuthClientCredentials
from chalicelib.ports import HttpResponse
from chalicelib.services import connection_auth
from chalicelib.services.connection_auth import ConnectionAuth, ConnectionAuthError, ExpiringCache
from tests.fakes import ScriptedSender
from tests.fakes.secrets import MemorySecrets

ARN = "arn:aws:secretsmanager:us-east-1:123456789012:secret:serverless-broker/local/connections/s"
SECRET = "PLANTED-secret-value"


class Clock:
    now = 1000.0

    def __call__(self) -> float:
        return self.now


def oauth(token_url: str = "https://auth.example/token") -> Connection:
    auth = OAuthClientCredentials(token_url, "client", ARN, None)
    return Connection("ns", "c", auth, uid="uid", generation=1)


def token(value: str = "tok", **extra: object) -> HttpResponse:
    doc = {"access_token": value, "token_type": "bearer", **extra}
    return HttpResponse(200, {}, json.dumps(doc).encode())


def world(*answers: HttpResponse) -> tuple[ConnectionAuth, MemorySecrets, ScriptedSender, Clock]:
    secrets, sender, clock = MemorySecrets(), ScriptedSender(*answers), Clock()
    secrets.values[ARN] = SECRET
    auth = ConnectionAuth(lambda ns, name: None, secrets, sender, None, clock=clock)
    return auth, secrets, sender, clock


def test_a_secret_is_read_again_once_its_ttl_has_passed() -> None:
    auth, secrets, _, clock = world()
    key = Connection("ns", "k", ApiKey("X-Key", ARN), uid="u", generation=1)
    for _ in range(3):
        assert auth.authorize(key, "https://api/", {}, b"")["X-Key"] == SECRET
    assert secrets.reads == 1
    clock.now += connection_auth.SECRET_TTL_SECONDS + 1
    auth.authorize(key, "https://api/", {}, b"")
    assert secrets.reads == 2


def test_a_token_is_kept_until_shortly_before_it_expires() -> None:
    auth, _, sender, clock = world(token("one", expires_in=600), token("two", expires_in=600))
    connection = oauth()
    assert auth.authorize(connection, "u", {}, b"")["Authorization"] == "Bearer one"
    clock.now += 600 - 31  # 30 s margin (a tenth of 600 is more)
    assert auth.authorize(connection, "u", {}, b"")["Authorization"] == "Bearer one"
    clock.now += 2
    assert auth.authorize(connection, "u", {}, b"")["Authorization"] == "Bearer two"
    assert len(sender.sent) == 2
    assert sender.sent[0].headers["Content-Type"] == "application/x-www-form-urlencoded"
    assert sender.sent[0].body == b"grant_type=client_credentials"


@pytest.mark.parametrize(
    ("answer", "reason"),
    [
        (HttpResponse(400, {}, b'{"error": "invalid_scope"}'), "answered 400 (invalid_scope)"),
        (HttpResponse(401, {}, b'{"error": "' + SECRET.encode() + b'"}'), "answered 401"),
        (HttpResponse(200, {}, b"not json"), "without an access_token"),
        (HttpResponse(200, {}, b'{"access_token": "t"}'), "not a bearer token"),
        (token("a b"), "cannot be sent in a header"),
        (token("x" * 9000), "without an access_token"),
        (HttpResponse(None, {}, b"", "NewConnectionError: refused"), "could not be reached"),
    ],
)
def test_answers_that_are_not_a_bearer_token_are_refused(answer: HttpResponse, reason: str) -> None:
    auth, *_ = world(answer)
    with pytest.raises(ConnectionAuthError) as raised:
        auth.authorize(oauth(), "u", {}, b"")
    assert reason in raised.value.detail
    assert SECRET not in raised.value.detail
    assert auth.problem(oauth()) == ("TokenNotFetched", raised.value.detail)


def test_a_secret_longer_than_the_limit_is_refused_without_repeating_it() -> None:
    auth, secrets, *_ = world()
    secrets.values[ARN] = SECRET * 1000
    reason, message = auth.problem(oauth()) or ("", "")
    assert reason == "SecretNotReadable" and "longer than" in message
    assert SECRET not in message


def test_the_token_url_goes_through_the_address_guard() -> None:
    secrets = MemorySecrets()
    secrets.values[ARN] = SECRET
    with EventDisplay() as endpoint, closing(Urllib3Sender(guard=True)) as guarded:
        auth = ConnectionAuth(lambda ns, n: None, secrets, guarded, None)
        reason, message = auth.problem(oauth(endpoint.url)) or ("", "")
    assert reason == "TokenNotFetched" and "blocked" in message
    assert endpoint.count == 0


def test_the_caches_are_bounded() -> None:
    cache: ExpiringCache[int, str] = ExpiringCache(Clock(), max_entries=3)
    for i in range(10):
        cache.put(i, "v", 60)
    assert [cache.get(i) for i in range(10)] == [None] * 7 + ["v"] * 3
