"""Connections (docs/targets.md, Connections) through the control plane and delivery, on the
in-memory fakes: validation names every problem; a connection is Ready once its secret reads (and,
for OAuth, a token was fetched); a trigger naming a missing or not-Ready connection is not Ready
(ConnectionNotReady); delivery adds an API key, basic auth, an OAuth bearer token (cached, one
refresh and retry on a 401) or a SigV4 signature; a destination's CACerts reach the sender; and a
planted secret shows up in none of the store, the logs, the queues, the archive, the metrics or
the API's answers."""

from __future__ import annotations

import base64
import json
import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs

import pytest
from chalice.test import Client

from app import app
from chalicelib.container import use_container
from chalicelib.core.errors import ValidationError
from chalicelib.ports import HttpResponse
from tests.fakes.secrets import MemorySecrets
from tests.functional.harness import Harness

SB = "/apis/serverless-broker.dev/v1alpha1/namespaces"
PREFIX = "serverless-broker/local/connections/"
SUB = "http://api.example/hook"
SINK = "http://sink.example/dead"
TOKEN_URL = "http://auth.example/token"
API_KEY = "PLANTED-api-key-7f3a9c"
PASSWORD = "PLANTED-password-2b8e41"
CLIENT_SECRET = "PLANTED-client-secret-c0ffee"
ACCESS_TOKEN = "PLANTED-access-token-"
PLANTED = (API_KEY, PASSWORD, CLIENT_SECRET, ACCESS_TOKEN)


def arn(name: str) -> str:
    return f"arn:aws:secretsmanager:us-east-1:123456789012:secret:{PREFIX}{name}-AbCdEf"


@dataclass
class Request:
    url: str
    headers: dict[str, str]
    body: bytes


Answer = Callable[[Request], HttpResponse]


class RoutedSender:
    """An HttpSender answering per URL (a subscriber, a token endpoint), recording requests and
    the CA bundles it was asked to trust."""

    def __init__(self) -> None:
        self.sent: list[Request] = []
        self.trusted: list[str] = []
        self.routes: dict[str, Answer] = {}

    def post(self, url: str, headers: dict[str, str], body: bytes, timeout: float) -> HttpResponse:
        request = Request(url, dict(headers), body)
        self.sent.append(request)
        return self.routes.get(url, lambda r: HttpResponse(202, {}, b""))(request)

    def trusting(self, ca_certs: str) -> RoutedSender:
        self.trusted.append(ca_certs)
        return self

    def to(self, url: str) -> list[Request]:
        return [r for r in self.sent if r.url == url]


class TokenEndpoint:
    """An OAuth token endpoint for client credentials: checks the grant and the client's basic
    credentials, issues numbered tokens."""

    def __init__(self, client_id: str = "broker", secret: str = CLIENT_SECRET) -> None:
        self.client_id, self.secret = client_id, secret
        self.issued: list[str] = []

    def __call__(self, request: Request) -> HttpResponse:
        form = parse_qs(request.body.decode())
        basic = request.headers.get("Authorization", "").removeprefix("Basic ")
        expected = base64.b64encode(f"{self.client_id}:{self.secret}".encode()).decode()
        if form.get("grant_type") != ["client_credentials"] or basic != expected:
            return HttpResponse(401, {}, b'{"error": "invalid_client"}')
        token = f"{ACCESS_TOKEN}{len(self.issued)}"
        self.issued.append(token)
        answer = {"access_token": token, "token_type": "Bearer", "expires_in": 3600}
        return HttpResponse(200, {}, json.dumps(answer).encode())


class World:
    def __init__(self) -> None:
        self.h = Harness()
        self.sender = RoutedSender()
        self.secrets = MemorySecrets()
        c = self.h.container
        c.sender = self.sender  # type: ignore[misc]
        c.secrets = self.secrets  # type: ignore[misc]
        self.secrets.values.update(
            {
                arn("key"): API_KEY,
                arn("basic"): json.dumps({"username": "broker", "password": PASSWORD}),
                arn("client"): CLIENT_SECRET,
            }
        )
        self.tokens = TokenEndpoint()
        self.sender.routes[TOKEN_URL] = self.tokens
        self.h.broker()

    def connection(self, name: str, auth: dict[str, Any]) -> dict[str, Any]:
        body = {"metadata": {"name": name}, "spec": {"auth": auth}}
        doc, _ = self.h.container.connections.put("ns", name, body)
        return doc

    def trigger(
        self,
        name: str,
        annotations: dict[str, str],
        subscriber: dict[str, Any] | None = None,
        delivery: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        spec: dict[str, Any] = {"broker": "default", "subscriber": subscriber or {"uri": SUB}}
        if delivery is not None:
            spec["delivery"] = delivery
        body = {"metadata": {"name": name, "annotations": annotations}, "spec": spec}
        doc, _ = self.h.container.triggers.put("ns", name, body)
        return doc


API_KEY_AUTH = {"apiKey": {"header": "X-Api-Key", "secretRef": {"arn": arn("key")}}}
BASIC_AUTH = {"basic": {"secretRef": {"arn": arn("basic")}}}
OAUTH_AUTH = {
    "oauthClientCredentials": {
        "tokenUrl": TOKEN_URL,
        "clientId": "broker",
        "clientSecretRef": {"arn": arn("client")},
        "scope": "events.write",
    }
}
SIGV4_AUTH = {"awsSigV4": {"service": "lambda", "region": "eu-west-1"}}


def condition(doc: dict[str, Any], type_: str) -> dict[str, Any]:
    return next(c for c in doc["status"]["conditions"] if c["type"] == type_)


@pytest.fixture
def world() -> World:
    return World()


# ---- the resource -------------------------------------------------------------------------------


@pytest.mark.parametrize("auth", [API_KEY_AUTH, BASIC_AUTH, OAUTH_AUTH, SIGV4_AUTH])
def test_each_kind_of_connection_is_ready_once_it_can_authenticate(
    world: World, auth: dict[str, Any]
) -> None:
    doc = world.connection("c", auth)
    assert doc["apiVersion"] == "serverless-broker.dev/v1alpha1"
    assert doc["kind"] == "Connection"
    assert doc["spec"] == {"auth": auth}
    assert condition(doc, "Ready")["status"] == "True"


def test_a_connection_whose_secret_cannot_be_read_is_not_ready_and_says_why(world: World) -> None:
    auth = {"apiKey": {"header": "X-Api-Key", "secretRef": {"arn": arn("absent")}}}
    ready = condition(world.connection("c", auth), "Ready")
    assert ready["status"] == "False"
    assert ready["reason"] == "SecretNotReadable"
    assert arn("absent") in ready["message"] and "ResourceNotFoundException" in ready["message"]


def test_an_oauth_connection_whose_token_endpoint_refuses_is_not_ready(world: World) -> None:
    world.tokens.secret = "another"  # the endpoint knows the client by another secret
    ready = condition(world.connection("c", OAUTH_AUTH), "Ready")
    assert (ready["status"], ready["reason"]) == ("False", "TokenNotFetched")
    assert "answered 401 (invalid_client)" in ready["message"]
    assert CLIENT_SECRET not in json.dumps(ready)


def test_a_basic_secret_that_is_not_username_and_password_is_not_ready(world: World) -> None:
    world.secrets.values[arn("basic")] = "just-a-" + PASSWORD
    ready = condition(world.connection("c", BASIC_AUTH), "Ready")
    assert (ready["status"], ready["reason"]) == ("False", "SecretNotReadable")
    assert PASSWORD not in ready["message"]


def test_every_problem_of_a_connection_is_named_at_once(world: World) -> None:
    body = {
        "metadata": {"name": "c"},
        "spec": {
            "auth": {
                "oauthClientCredentials": {
                    "tokenUrl": "ftp://auth.example/token",
                    "clientSecretRef": {"arn": "arn:aws:s3:::bucket"},
                    "scope": "",
                    "extra": 1,
                }
            }
        },
    }
    with pytest.raises(ValidationError) as raised:
        world.h.container.connections.put("ns", "c", body)
    fields = {p.field for p in raised.value.problems}
    where = "spec.auth.oauthClientCredentials"
    assert fields == {
        f"{where}.extra",
        f"{where}.tokenUrl",
        f"{where}.clientId",
        f"{where}.clientSecretRef.arn",
        f"{where}.scope",
    }


@pytest.mark.parametrize(
    ("auth", "field"),
    [
        ({}, "spec.auth"),
        ({"basic": {"secretRef": {"arn": arn("b")}}, "awsSigV4": SIGV4_AUTH}, "spec.auth"),
        ({"apiKey": {"header": "Content-Type", "secretRef": {"arn": arn("k")}}}, "header"),
        ({"apiKey": {"header": "ce-id", "secretRef": {"arn": arn("k")}}}, "header"),
        ({"apiKey": {"header": "X Key", "secretRef": {"arn": arn("k")}}}, "header"),
        ({"basic": {"secretRef": "arn"}}, "spec.auth.basic.secretRef"),
        ({"awsSigV4": {"service": "Lambda", "region": "eu-west-1"}}, "service"),
    ],
)
def test_bad_connections_are_refused(world: World, auth: dict[str, Any], field: str) -> None:
    body = {"metadata": {"name": "c"}, "spec": {"auth": auth}}
    with pytest.raises(ValidationError) as raised:
        world.h.container.connections.put("ns", "c", body)
    assert any(p.field.endswith(field) for p in raised.value.problems), raised.value.problems


def test_a_secret_outside_the_stage_prefix_is_refused_naming_the_setting(world: World) -> None:
    outside = "arn:aws:secretsmanager:us-east-1:123456789012:secret:other/team/key-AbCdEf"
    auth = {"apiKey": {"header": "X-Api-Key", "secretRef": {"arn": outside}}}
    with pytest.raises(ValidationError) as raised:
        world.connection("c", auth)
    (problem,) = raised.value.problems
    assert problem.field == "spec.auth.apiKey.secretRef.arn"
    assert "serverless-broker/<stage>/connections/" in problem.message and PREFIX in problem.message


def test_outside_local_mode_the_token_url_must_be_https(world: World) -> None:
    from dataclasses import replace

    from chalicelib.services.connections import ConnectionHooks

    hooks = ConnectionHooks(
        world.h.container.connection_checks, replace(world.h.settings, local_mode=False)
    )
    parsed = world.h.container.connections.kind.parse("ns", {"spec": {"auth": OAUTH_AUTH}}, "c")
    with pytest.raises(ValidationError) as raised:
        hooks.check(parsed)
    assert raised.value.problems[0].field == "spec.auth.oauthClientCredentials.tokenUrl"


def test_the_api_serves_connections_with_problem_json_for_bad_bodies(world: World) -> None:
    use_container(world.h.container)
    try:
        with Client(app) as client:
            path = f"{SB}/ns/connections/c"
            body = {"metadata": {"name": "c"}, "spec": {"auth": API_KEY_AUTH}}
            put = client.http.put(
                path, body=json.dumps(body), headers={"content-type": "application/json"}
            )
            assert put.status_code == 201
            listed = json.loads(client.http.get(f"{SB}/ns/connections").body)
            assert listed["kind"] == "ConnectionList" and len(listed["items"]) == 1
            bad = client.http.put(
                path,
                body=json.dumps({"spec": {"auth": {"basic": {}, "apiKey": {}}}}),
                headers={"content-type": "application/json"},
            )
            assert bad.status_code == 400
            assert bad.headers["Content-Type"] == "application/problem+json"
            assert client.http.delete(path).status_code == 200
            assert client.http.get(path).status_code == 404
    finally:
        use_container(None)


# ---- triggers -----------------------------------------------------------------------------------


def test_a_trigger_naming_a_missing_connection_is_not_ready_until_it_exists(world: World) -> None:
    doc = world.trigger("t", {"serverless-broker/connection": "api"})
    resolved = condition(doc, "SubscriberResolved")
    assert (resolved["status"], resolved["reason"]) == ("False", "ConnectionNotReady")
    assert 'Connection "api" does not exist' in resolved["message"]
    assert condition(doc, "Ready")["status"] == "False"
    world.connection("api", API_KEY_AUTH)
    doc = world.h.container.triggers.get("ns", "t")
    assert condition(doc, "SubscriberResolved")["status"] == "True"


def test_a_dead_letter_connection_that_is_not_ready_fails_the_sink(world: World) -> None:
    world.connection("broken", {"basic": {"secretRef": {"arn": arn("absent")}}})
    doc = world.trigger(
        "t",
        {"serverless-broker/dead-letter-connection": "broken"},
        delivery={"deadLetterSink": {"uri": SINK}},
    )
    sink = condition(doc, "DeadLetterSinkResolved")
    assert (sink["status"], sink["reason"]) == ("False", "ConnectionNotReady")
    assert "SecretNotReadable" in sink["message"]
    assert condition(doc, "Ready")["status"] == "False"


def test_a_connection_and_an_audience_on_one_destination_are_refused(world: World) -> None:
    with pytest.raises(ValidationError) as raised:
        world.trigger(
            "t",
            {"serverless-broker/connection": "api", "serverless-broker/dead-letter-connection": ""},
            subscriber={"uri": SUB, "audience": "api"},
        )
    fields = {p.field for p in raised.value.problems}
    assert fields == {
        "metadata.annotations[serverless-broker/connection]",
        "metadata.annotations[serverless-broker/dead-letter-connection]",
    }


# ---- delivery -----------------------------------------------------------------------------------


def deliver(world: World, auth: dict[str, Any], n: int = 1) -> list[Request]:
    world.connection("api", auth)
    world.trigger("t", {"serverless-broker/connection": "api"})
    for i in range(n):
        assert world.h.send(id_=str(i)).status == 202
        world.h.deliver_once("t")
    return world.sender.to(SUB)


def test_an_api_key_connection_sends_its_header(world: World) -> None:
    (sent,) = deliver(world, API_KEY_AUTH)
    assert sent.headers["X-Api-Key"] == API_KEY
    assert sent.headers["ce-id"] == "0"


def test_a_basic_connection_sends_basic_auth(world: World) -> None:
    (sent,) = deliver(world, BASIC_AUTH)
    expected = base64.b64encode(f"broker:{PASSWORD}".encode()).decode()
    assert sent.headers["Authorization"] == f"Basic {expected}"


def test_an_oauth_connection_sends_a_bearer_token_fetched_once(world: World) -> None:
    sent = deliver(world, OAUTH_AUTH, n=3)
    assert [r.headers["Authorization"] for r in sent] == [f"Bearer {ACCESS_TOKEN}0"] * 3
    assert len(world.tokens.issued) == 1
    (fetch,) = world.sender.to(TOKEN_URL)
    assert parse_qs(fetch.body.decode()) == {
        "grant_type": ["client_credentials"],
        "scope": ["events.write"],
    }


def test_a_401_refreshes_the_token_once_and_retries_once(world: World) -> None:
    refused: list[str] = []

    def api(request: Request) -> HttpResponse:
        token = request.headers["Authorization"]
        if token == f"Bearer {ACCESS_TOKEN}0":  # revoked before it expired
            refused.append(token)
            return HttpResponse(401, {}, b"")
        return HttpResponse(202, {}, b"")

    world.sender.routes[SUB] = api
    sent = deliver(world, OAUTH_AUTH)
    assert [r.headers["Authorization"] for r in sent] == [
        f"Bearer {ACCESS_TOKEN}0",
        f"Bearer {ACCESS_TOKEN}1",
    ]
    assert world.h.queues.depth(world.h.queue_of("t")) == 0  # delivered


def test_a_second_401_is_the_attempts_answer_not_another_refresh(world: World) -> None:
    world.sender.routes[SUB] = lambda r: HttpResponse(401, {}, b"")
    sent = deliver(world, OAUTH_AUTH)
    assert len(sent) == 2 and len(world.tokens.issued) == 2


def test_a_sigv4_connection_signs_with_the_functions_credentials(world: World) -> None:
    (sent,) = deliver(world, SIGV4_AUTH)
    authorization = sent.headers["Authorization"]
    assert authorization.startswith("AWS4-HMAC-SHA256 Credential=testing/")
    assert "/eu-west-1/lambda/aws4_request" in authorization
    assert "ce-id" in authorization.split("SignedHeaders=")[1]
    assert "X-Amz-Date" in sent.headers


def test_an_unreadable_secret_fails_the_attempt_as_a_retried_transport_error(
    world: World,
) -> None:
    world.connection("api", API_KEY_AUTH)
    world.trigger("t", {"serverless-broker/connection": "api"})
    del world.secrets.values[arn("key")]
    world.h.container.connection_auth._values.drop(arn("key"))
    assert world.h.send().status == 202
    answer = world.h.deliver_once("t")
    assert answer["batchItemFailures"]  # retried
    assert world.sender.to(SUB) == []


def test_the_dead_letter_connection_authenticates_the_sink(world: World) -> None:
    world.sender.routes[SUB] = lambda r: HttpResponse(500, {}, b"")
    world.connection("sink", BASIC_AUTH)
    world.trigger(
        "t",
        {"serverless-broker/dead-letter-connection": "sink"},
        delivery={"deadLetterSink": {"uri": SINK}, "retry": 0},
    )
    world.h.send()
    world.h.deliver_once("t")
    world.h.deliver_once("t", dead_letter=True)
    (dead,) = world.sender.to(SINK)
    assert dead.headers["Authorization"].startswith("Basic ")
    assert "Authorization" not in world.sender.to(SUB)[0].headers


# ---- CACerts ------------------------------------------------------------------------------------


def test_a_destinations_ca_certs_are_what_its_sender_trusts(world: World, ca_pem: str) -> None:
    https = "https://api.example/hook"
    doc = world.trigger(
        "t",
        {},
        subscriber={"uri": https, "CACerts": ca_pem},
        delivery={"deadLetterSink": {"uri": "https://sink.example/", "CACerts": ca_pem}},
    )
    assert doc["spec"]["subscriber"] == {"uri": https, "CACerts": ca_pem}
    assert doc["spec"]["delivery"]["deadLetterSink"]["CACerts"] == ca_pem
    world.h.send()
    world.h.deliver_once("t")
    assert world.sender.trusted == [ca_pem]
    assert world.sender.to(https)


@pytest.mark.parametrize(
    "bundle",
    [
        "not a certificate",
        "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n",
        "PREFIX\n{pem}",
    ],
)
def test_a_bad_pem_bundle_is_refused(world: World, ca_pem: str, bundle: str) -> None:
    with pytest.raises(ValidationError) as raised:
        world.trigger(
            "t",
            {},
            subscriber={"uri": "https://api.example/", "CACerts": bundle.format(pem=ca_pem)},
        )
    assert [p.field for p in raised.value.problems] == ["spec.subscriber.CACerts"]


def test_ca_certs_on_an_http_uri_are_refused(world: World, ca_pem: str) -> None:
    with pytest.raises(ValidationError) as raised:
        world.trigger("t", {}, subscriber={"uri": SUB, "CACerts": ca_pem})
    assert "https uri only" in raised.value.problems[0].message


@pytest.fixture(scope="module")
def ca_pem() -> str:
    from tests.tls_ca import LocalCa

    return LocalCa().ca_pem


# ---- the planted secret -------------------------------------------------------------------------


def queue_text(h: Harness) -> str:
    """Every message of every queue, with each dead letter's knativeerrordata decoded."""
    bodies = [m.body for q in h.queues._queues.values() for m in q["messages"]]
    decoded = []
    for body in bodies:
        event = json.loads(body).get("event", {})
        decoded.append(base64.b64decode(event.get("knativeerrordata", "")).decode())
    return "\n".join(bodies + decoded)


@pytest.fixture
def all_logs(caplog: pytest.LogCaptureFixture) -> Iterator[pytest.LogCaptureFixture]:
    caplog.set_level(logging.DEBUG)
    yield caplog


def test_secrets_appear_nowhere_but_the_requests(
    world: World, all_logs: pytest.LogCaptureFixture
) -> None:
    h, c = world.h, world.h.container
    world.sender.routes[SUB] = lambda r: HttpResponse(
        500, {}, b"upstream said no to " + r.headers.get("X-Request", "").encode()
    )
    world.sender.routes[SINK] = lambda r: HttpResponse(503, {}, b"down")
    for name, auth in (("key", API_KEY_AUTH), ("basic", BASIC_AUTH), ("oauth", OAUTH_AUTH)):
        world.connection(name, auth)
        world.trigger(
            f"t-{name}",
            {
                "serverless-broker/connection": name,
                "serverless-broker/dead-letter-connection": name,
            },
            delivery={"deadLetterSink": {"uri": SINK}, "retry": 0},
        )
    h.send()
    for name in ("key", "basic", "oauth"):
        h.deliver_once(f"t-{name}")
        h.deliver_once(f"t-{name}", dead_letter=True)
    # an attempt whose token cannot be fetched: its error data is the endpoint's refusal
    world.tokens.secret = "rotated"
    c.connection_auth.forget(c.connection_auth.connection("ns", "oauth"))
    h.send(id_="2")
    h.deliver_once("t-oauth")
    c.metrics.flush()
    seen_by_requests = "".join(json.dumps(r.headers) for r in world.sender.sent)
    assert API_KEY in seen_by_requests and ACCESS_TOKEN in seen_by_requests

    places = {
        "store": json.dumps([i.doc for i in h.store._items.values()], default=str),
        "logs": all_logs.text + "".join(str(r.__dict__) for r in all_logs.records),
        "queues": queue_text(h),
        "archive": json.dumps(h.archive.decoded()),
        "metrics": c.metrics.prometheus_text(),
        "api": json.dumps(
            [
                c.connections.list("ns"),
                c.triggers.list("ns"),
                *[c.dead_letters.list("ns", "default", f"t-{n}", 100) for n in ("key", "oauth")],
            ]
        ),
    }
    for name in ("key", "basic", "oauth"):  # each made a dead letter, kept for its sink failed
        assert c.dead_letters.list("ns", "default", f"t-{name}", 100)["depth"] >= 1
    assert "answered 401 (invalid_client)" in places["queues"]  # the token failure's error data
    for where, text in places.items():
        for secret in PLANTED:
            assert secret not in text, f"{secret} found in {where}"
        assert base64.b64encode(f"broker:{PASSWORD}".encode()).decode() not in text, where


def test_ca_certs_on_an_event_transform_sink_are_refused_not_dropped(
    world: World, ca_pem: str
) -> None:
    body = {
        "metadata": {"name": "tx"},
        "spec": {
            "jsonata": {"expression": "$"},
            "sink": {"uri": "https://sink.example/", "CACerts": ca_pem},
        },
    }
    with pytest.raises(ValidationError) as raised:
        world.h.container.event_transforms.put("ns", "tx", body)
    assert [p.field for p in raised.value.problems] == ["spec.sink.CACerts"]


@pytest.mark.parametrize(
    ("annotation", "spec"),
    [
        ("serverless-broker/connection", {"subscriber": {"uri": "kafka://k:9092/t"}}),
        (
            "serverless-broker/connection",
            {"subscriber": {"uri": "arn:aws:sqs:us-east-1:123456789012:q"}},
        ),
        (
            "serverless-broker/dead-letter-connection",
            {
                "subscriber": {"uri": SUB},
                "delivery": {"deadLetterSink": {"uri": "arn:aws:sqs:us-east-1:123456789012:q"}},
            },
        ),
    ],
)
def test_a_connection_on_a_destination_not_called_over_http_is_refused(
    world: World, annotation: str, spec: dict[str, Any]
) -> None:
    body = {"metadata": {"name": "t", "annotations": {annotation: "api"}}, "spec": spec}
    with pytest.raises(ValidationError) as raised:
        world.h.container.triggers.put("ns", "t", body)
    [problem] = raised.value.problems
    assert problem.field == f"metadata.annotations[{annotation}]"
    assert "http(s)" in problem.message
