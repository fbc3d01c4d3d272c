"""Connections and CACerts on the local runtime (docs/targets.md), against real local subscribers:
an API-key API, a basic-auth API, an API behind an OAuth 2.0 token endpoint served by oauthlib's
own server classes (a library we did not write), an API that verifies AWS SigV4 with botocore, and
a TLS subscriber whose certificate only a destination's CACerts make trusted (its own CA, made
with ``cryptography``). Secrets live in Secrets Manager on the embedded endpoint. Then the planted
secrets are looked for in the runtime's log, the DynamoDB table, the archive, the dead letters,
the API's answers and the metrics: they must be in none of them. One runtime for the module."""

from __future__ import annotations

import base64
import hmac
import json
import os
import threading
import uuid
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import boto3
import httpx
import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
from oauthlib.oauth2 import BackendApplicationServer, RequestValidator
from werkzeug.serving import make_server
from werkzeug.wrappers import Request as WsgiRequest
from werkzeug.wrappers import Response as WsgiResponse

from brokerctl.event_display import EventDisplay, Received, Reply
from tests.e2e.conftest import LocalBroker, start_local_broker, stop_local_broker, wait_until
from tests.tls_ca import LocalCa

pytestmark = pytest.mark.e2e

SB = "/apis/serverless-broker.dev/v1alpha1/namespaces"
PREFIX = "serverless-broker/local/connections/"
RUN = uuid.uuid4().hex[:8]
API_KEY = f"PLANTED-key-{RUN}"
PASSWORD = f"PLANTED-password-{RUN}"
CLIENT_SECRET = f"PLANTED-client-secret-{RUN}"
CLIENT_ID = "broker-client"
PLANTED = (API_KEY, PASSWORD, CLIENT_SECRET)


# ---- the subscribers ----------------------------------------------------------------------------


class Validator(RequestValidator):  # type: ignore[misc]
    """oauthlib's server asks its validator about the client; the grant is oauthlib's own.
    Issued tokens are kept, so the API accepts exactly them."""

    def __init__(self) -> None:
        self.tokens: set[str] = set()
        self.revoked: set[str] = set()
        self.issued = 0

    def authenticate_client(self, request: Any, *args: Any, **kwargs: Any) -> bool:
        scheme, _, value = (request.headers.get("Authorization") or "").partition(" ")
        if scheme != "Basic":
            return False
        client_id, _, secret = base64.b64decode(value).decode().partition(":")
        if client_id != CLIENT_ID or not hmac.compare_digest(secret, CLIENT_SECRET):
            return False
        request.client_id = client_id
        request.client = type("Client", (), {"client_id": client_id})()
        return True

    def validate_grant_type(self, client_id: str, grant_type: str, *args: Any, **kw: Any) -> bool:
        return grant_type == "client_credentials"

    def get_default_scopes(self, client_id: str, request: Any, *args: Any, **kw: Any) -> list[str]:
        return ["events.write"]

    def validate_scopes(self, client_id: str, scopes: list[str], *args: Any, **kw: Any) -> bool:
        return set(scopes) <= {"events.write"}

    def save_bearer_token(self, token: dict[str, Any], request: Any, *args: Any, **kw: Any) -> None:
        self.tokens.add(token["access_token"])
        self.issued += 1


class Apis:
    """The token endpoint and the APIs, each answering by path on one server."""

    def __init__(self) -> None:
        self.validator = Validator()
        self.oauth = BackendApplicationServer(self.validator)
        self.seen: dict[str, list[Received]] = {}
        self.accepted: dict[str, list[bool]] = {}  # per path, whether each request authenticated
        self.lock = threading.Lock()
        self.down = False  # every API answers 500 (the events are dead-lettered)

    def __call__(self, got: Received, n: int) -> Reply:
        path = urlsplit(got.path).path
        headers = {k.lower(): v for k, v in got.headers.items()}
        if path == "/token":
            answer_headers, body, status = self.oauth.create_token_response(
                got.path, "POST", got.body.decode(), dict(got.headers)
            )
            return Reply(status, dict(answer_headers), body.encode())
        with self.lock:
            self.seen.setdefault(path, []).append(got)
        if self.down:
            return Reply(500, body=b"the API is down")
        ok = {
            "/key": lambda: headers.get("x-api-key") == API_KEY,
            "/basic": lambda: (
                headers.get("authorization")
                == "Basic " + base64.b64encode(f"svc:{PASSWORD}".encode()).decode()
            ),
            "/oauth": lambda: self.bearer_ok(headers.get("authorization", "")),
            "/sigv4": lambda: sigv4_ok(got, headers),
        }[path]()
        with self.lock:
            self.accepted.setdefault(path, []).append(ok)
        return Reply(202 if ok else 401)

    def bearer_ok(self, authorization: str) -> bool:
        scheme, _, token = authorization.partition(" ")
        return (
            scheme == "Bearer"
            and token in self.validator.tokens
            and token not in self.validator.revoked
        )


def sigv4_ok(got: Received, headers: dict[str, str]) -> bool:
    """The signature recomputed with botocore from what was received and the credentials the
    runtime runs with (the environment's), compared in constant time."""
    authorization = headers.get("authorization", "")
    if not authorization.startswith("AWS4-HMAC-SHA256 "):
        return False
    fields = dict(p.strip().split("=", 1) for p in authorization[17:].split(","))
    key, _date, region, service, _ = fields["Credential"].split("/")
    signed = fields["SignedHeaders"].split(";")
    url = f"http://{headers['host']}{got.path}"
    request = AWSRequest(
        method="POST",
        url=url,
        data=got.body,
        headers={h: headers[h] for h in signed if h != "host"},
    )
    request.context["timestamp"] = headers["x-amz-date"]
    credentials = Credentials(os.environ["AWS_ACCESS_KEY_ID"], os.environ["AWS_SECRET_ACCESS_KEY"])
    auth = SigV4Auth(credentials, service, region)
    expected = auth.signature(
        auth.string_to_sign(request, auth.canonical_request(request)), request
    )
    return (
        key == credentials.access_key
        and (service, region) == ("lambda", "eu-west-1")
        and hmac.compare_digest(expected, fields["Signature"])
    )


class TlsSubscriber:
    """An HTTPS subscriber (werkzeug's server) with a certificate of the tests' own CA."""

    def __init__(self, ca: LocalCa) -> None:
        self.received: list[bytes] = []

        @WsgiRequest.application  # type: ignore[misc]
        def app(request: WsgiRequest) -> WsgiResponse:
            self.received.append(request.get_data())
            return WsgiResponse(status=202)

        self._server = make_server(
            "127.0.0.1", 0, app, threaded=True, ssl_context=ca.server_context()
        )
        self.url = f"https://127.0.0.1:{self._server.server_port}/"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._server.shutdown()
        self._thread.join(5)


# ---- the world ----------------------------------------------------------------------------------


class World:
    def __init__(self, broker: LocalBroker, apis: Apis, api_url: str) -> None:
        self.broker, self.apis, self.api_url = broker, apis, api_url
        self.ns = f"c-{RUN}"
        self.aws = {
            "endpoint_url": broker.aws_url,
            "region_name": "us-east-1",
        }
        secrets = boto3.client("secretsmanager", **self.aws)
        self.arns = {
            name: secrets.create_secret(Name=f"{PREFIX}{name}-{RUN}", SecretString=value)["ARN"]
            for name, value in (
                ("key", API_KEY),
                ("basic", json.dumps({"username": "svc", "password": PASSWORD})),
                ("client", CLIENT_SECRET),
            )
        }
        r = broker.put(self.ns, "brokers", "default", {"metadata": {"name": "default"}})
        assert r.status_code == 201, r.text

    def connection(self, name: str, auth: dict[str, Any]) -> dict[str, Any]:
        url = f"{self.broker.url}{SB}/{self.ns}/connections/{name}"
        body = {"metadata": {"name": name}, "spec": {"auth": auth}}
        r = httpx.put(url, json=body, timeout=30)
        assert r.status_code in (200, 201), r.text
        return dict(r.json())

    def trigger(self, name: str, subscriber: dict[str, Any], connection: str | None) -> None:
        annotations = {"serverless-broker/connection": connection} if connection else {}
        body = {
            "metadata": {"name": name, "annotations": annotations},
            "spec": {
                "broker": "default",
                "filter": {"attributes": {"type": name}},
                "subscriber": subscriber,
                "delivery": {"retry": 0},
            },
        }
        r = self.broker.put(self.ns, "triggers", name, body)
        assert r.status_code in (200, 201), r.text
        self.broker.wait_ready(self.ns, "triggers", name)

    def send(self, type_: str) -> str:
        event_id = uuid.uuid4().hex
        headers = {
            "ce-specversion": "1.0",
            "ce-id": event_id,
            "ce-source": "/e2e",
            "ce-type": type_,
            "content-type": "application/json",
        }
        url = f"{self.broker.url}/{self.ns}/default"
        r = httpx.post(url, content=b'{"n": 1}', headers=headers, timeout=30)
        assert r.status_code == 202, r.text
        return event_id

    def delivered(self, path: str, n: int) -> list[Received]:
        return wait_until(
            lambda: len(self.apis.seen.get(path, [])) >= n and self.apis.seen[path],
            30,
            f"{n} request(s) to {path}",
        )


@pytest.fixture(scope="module")
def world() -> Iterator[World]:
    broker = start_local_broker()
    apis = Apis()
    server = EventDisplay(responder=apis).start()
    try:
        yield World(broker, apis, server.url.rstrip("/"))
    finally:
        server.stop()
        stop_local_broker(broker)


def auth_of(world: World, kind: str) -> dict[str, Any]:
    arns = world.arns
    return {
        "key": {"apiKey": {"header": "X-Api-Key", "secretRef": {"arn": arns["key"]}}},
        "basic": {"basic": {"secretRef": {"arn": arns["basic"]}}},
        "oauth": {
            "oauthClientCredentials": {
                "tokenUrl": f"{world.api_url}/token",
                "clientId": CLIENT_ID,
                "clientSecretRef": {"arn": arns["client"]},
                "scope": "events.write",
            }
        },
        "sigv4": {"awsSigV4": {"service": "lambda", "region": "eu-west-1"}},
    }[kind]


def condition(doc: dict[str, Any], type_: str) -> dict[str, Any]:
    return next(c for c in doc["status"]["conditions"] if c["type"] == type_)


# ---- each kind of connection --------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["key", "basic", "oauth", "sigv4"])
def test_each_connection_authenticates_to_a_real_api(world: World, kind: str) -> None:
    doc = world.connection(kind, auth_of(world, kind))
    assert condition(doc, "Ready")["status"] == "True", doc["status"]
    world.trigger(kind, {"uri": f"{world.api_url}/{kind}"}, kind)
    world.send(kind)
    world.delivered(f"/{kind}", 1)
    assert world.apis.accepted[f"/{kind}"] == [True], f"{kind}: the API refused the request"


def test_a_revoked_oauth_token_is_refreshed_once_on_a_401(world: World) -> None:
    world.connection("oauth", auth_of(world, "oauth"))
    world.trigger("oauth", {"uri": f"{world.api_url}/oauth"}, "oauth")
    first = len(world.apis.seen.get("/oauth", []))  # an earlier test may have sent some
    world.send("oauth")
    world.delivered("/oauth", first + 1)
    issued = world.apis.validator.issued
    world.apis.validator.revoked |= set(world.apis.validator.tokens)  # revoked before expiry
    before = len(world.apis.seen["/oauth"])
    world.send("oauth")
    sent = world.delivered("/oauth", before + 2)  # refused once, then accepted
    assert world.apis.validator.issued == issued + 1
    assert world.apis.accepted["/oauth"][-2:] == [False, True]
    tokens = [s.headers.get("Authorization") or s.headers.get("authorization") for s in sent]
    assert tokens[-2] != tokens[-1]
    r = httpx.get(f"{world.broker.cp(world.ns)}/triggers/oauth/deadletters", timeout=10)
    assert r.json()["items"] == []


def test_a_trigger_whose_connection_is_missing_is_not_ready(world: World) -> None:
    body = {
        "metadata": {"name": "orphan", "annotations": {"serverless-broker/connection": "nope"}},
        "spec": {"broker": "default", "subscriber": {"uri": f"{world.api_url}/key"}},
    }
    r = world.broker.put(world.ns, "triggers", "orphan", body)
    assert r.status_code == 201, r.text
    resolved = condition(r.json(), "SubscriberResolved")
    assert (resolved["status"], resolved["reason"]) == ("False", "ConnectionNotReady")


# ---- CACerts ------------------------------------------------------------------------------------


def test_ca_certs_make_a_subscriber_with_its_own_ca_trusted(world: World) -> None:
    ca = LocalCa()
    subscriber = TlsSubscriber(ca)
    try:
        world.trigger("tls", {"uri": subscriber.url, "CACerts": ca.ca_pem}, None)
        world.trigger("untrusted", {"uri": subscriber.url}, None)
        world.send("tls")
        wait_until(lambda: subscriber.received, 30, "the TLS subscriber's event")
        world.send("untrusted")

        def dead() -> list[dict[str, Any]]:
            url = f"{world.broker.cp(world.ns)}/triggers/untrusted/deadletters"
            return list(httpx.get(url, timeout=10).json()["items"])

        [letter] = wait_until(dead, 30, "the untrusted delivery dead-lettered")
        data = base64.b64decode(letter["event"].get("knativeerrordata", "")).decode()
        assert "CERTIFICATE_VERIFY_FAILED" in data or "certificate verify failed" in data
        assert len(subscriber.received) == 1
    finally:
        subscriber.stop()
    bad = {"uri": subscriber.url, "CACerts": "-----BEGIN CERTIFICATE-----\nAA==\n"}
    r = world.broker.put(world.ns, "triggers", "bad", {"spec": {"subscriber": bad}})
    assert r.status_code == 400 and "spec.subscriber.CACerts" in r.text


# ---- the planted secrets ------------------------------------------------------------------------


def test_planted_secrets_appear_nowhere_but_the_requests(world: World) -> None:
    for kind in ("key", "basic", "oauth"):
        world.connection(kind, auth_of(world, kind))
        world.trigger(f"{kind}-down", {"uri": f"{world.api_url}/{kind}"}, kind)
    world.apis.down = True
    try:
        for kind in ("key", "basic", "oauth"):
            world.send(f"{kind}-down")
        cp = world.broker.cp(world.ns)

        def letters() -> list[dict[str, Any]]:
            found = []
            for kind in ("key", "basic", "oauth"):
                url = f"{cp}/triggers/{kind}-down/deadletters"
                found += httpx.get(url, timeout=10).json()["items"]
            return found if len(found) == 3 else []

        dead = wait_until(letters, 30, "three dead letters")
    finally:
        world.apis.down = False
    sent = json.dumps([dict(r.headers) for rs in world.apis.seen.values() for r in rs])
    assert API_KEY in sent  # planted where it belongs: the requests

    places = {
        "dead letters": json.dumps(dead)
        + "".join(base64.b64decode(d["event"].get("knativeerrordata", "")).decode() for d in dead),
        "api": "".join(
            httpx.get(f"{world.broker.url}{path}", timeout=10).text
            for path in (
                f"{SB}/{world.ns}/connections",
                f"/apis/eventing.knative.dev/v1/namespaces/{world.ns}/triggers",
            )
        ),
        "metrics": httpx.get(f"{world.broker.url}/metrics", timeout=10).text,
        "table": json.dumps(
            boto3.client("dynamodb", **world.aws).scan(TableName="serverless-broker-local")["Items"]
        ),
        "log": "\n".join(world.broker.lines),
    }
    s3 = boto3.client("s3", **world.aws)

    def archive() -> str:
        bucket = "serverless-broker-local-archive"
        keys = [
            o["Key"]
            for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket)
            for o in page.get("Contents", [])
        ]
        text = "".join(s3.get_object(Bucket=bucket, Key=k)["Body"].read().decode() for k in keys)
        return text if all(d["event"]["id"] in text for d in dead) else ""

    places["archive"] = wait_until(archive, 30, "the dead-lettered events archived")
    assert '"kind": "delivery"' in places["archive"] or '"kind":"delivery"' in places["archive"]
    basic = base64.b64encode(f"svc:{PASSWORD}".encode()).decode()
    for where, text in places.items():
        for secret in (*PLANTED, basic, *world.apis.validator.tokens):
            assert secret not in text, f"a secret is in the {where}"
