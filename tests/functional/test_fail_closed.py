"""Fail closed (issue 16, defect 10) and one error shape for every route: through Chalice's test
client and through the local runtime's HTTP server, both of which run the app's middleware."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from chalice.test import Client

import app as chalice_app
from app import app
from brokerctl.embedded_aws import free_port
from brokerctl.http_server import AppServer
from chalicelib import container as container_module
from chalicelib.config import ConfigurationError
from chalicelib.container import use_container
from chalicelib.core.errors import ConflictError, NotFoundError
from chalicelib.core.names import RESERVED_NAMESPACES
from chalicelib.services.tokens import MAX_TOKENS_PER_BROKER
from tests.fakes import MemoryStore
from tests.functional.harness import CP, Harness

PROBLEM = "application/problem+json"
BINARY = {
    "ce-specversion": "1.0",
    "ce-id": "1",
    "ce-source": "/s",
    "ce-type": "t",
    "content-type": "text/plain",
}


class BrokenStore(MemoryStore):
    """A store whose listing fails the way no code path anticipates (the seam the container
    offers: its ports), with internals in the message that must not reach the client."""

    def list(self, kind: str, namespace: str | None = None) -> list[Any]:
        raise RuntimeError("arn:aws:dynamodb:us-east-1:123456789012:table/secret exploded")


@pytest.fixture
def h() -> Iterator[Harness]:
    h = Harness()
    use_container(h.container)
    yield h
    use_container(None)


@pytest.fixture
def server(h: Harness) -> Iterator[str]:
    srv = AppServer(app, "127.0.0.1", free_port(), lambda line: None)
    srv.start()
    yield srv.url
    srv.stop()


# ---- a function without its stage refuses to start ---------------------------------------------


@pytest.fixture
def no_stage(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.delenv("BROKER_STAGE")
    monkeypatch.delenv("BROKER_LOCAL_MODE")
    container_module._from_env.cache_clear()
    yield
    container_module._from_env.cache_clear()


@pytest.mark.usefixtures("no_stage")
def test_a_route_without_its_stage_answers_an_opaque_500(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.ERROR, "broker.http"), Client(app) as client:
        r = client.http.get(f"{CP}/ns/brokers")
    assert r.status_code == 500 and r.headers["Content-Type"] == PROBLEM
    doc = json.loads(r.body)
    assert doc["type"].endswith("/internal") and "BROKER_STAGE" not in r.body.decode()
    logged = [rec for rec in caplog.records if doc["correlationId"] in rec.getMessage()]
    assert logged and isinstance(logged[0].exc_info and logged[0].exc_info[1], ConfigurationError)
    assert "BROKER_STAGE is not set" in str(logged[0].exc_info[1])  # type: ignore[index]


@pytest.mark.usefixtures("no_stage")
def test_an_event_source_function_without_its_stage_raises() -> None:
    # Lambda then retries the batch: the messages stay in their queue, nothing is lost.
    with pytest.raises(ConfigurationError, match="BROKER_STAGE is not set"):
        chalice_app.delivery({"Records": []}, None)


# ---- tokens die with their broker ----------------------------------------------------------------


def test_a_recreated_broker_refuses_its_predecessors_tokens(h: Harness) -> None:
    auth = {"serverless-broker/ingress-auth": "token"}
    h.broker(annotations=auth)
    h.trigger("all")
    old = h.container.tokens.create("ns", "default")["token"]
    h.container.brokers.delete("ns", "default")
    h.broker(annotations=auth)
    assert h.post({**BINARY, "authorization": f"Bearer {old}"}, b"x").status == 401
    assert h.container.tokens.list("ns", "default") == {"items": []}
    assert h.store.list("token", "ns") == []


class DeletingStore(MemoryStore):
    """A broker delete that runs, whole, between a token's broker check and its write."""

    def put(self, kind: str, namespace: str, name: str, doc: Any, expected: int | None) -> Any:
        if kind == "token":
            self.delete("broker", namespace, str(doc["broker"]))
        return super().put(kind, namespace, name, doc, expected)


def test_a_token_written_while_its_broker_is_deleted_is_taken_back() -> None:
    h = Harness()
    h.container.store = store = DeletingStore()  # type: ignore[misc]
    h.broker()
    with pytest.raises(NotFoundError, match="deleted meanwhile"):
        h.container.tokens.create("ns", "default")
    assert store.list("token", "ns") == []


# ---- reserved namespaces ------------------------------------------------------------------------


@pytest.mark.parametrize("namespace", sorted(RESERVED_NAMESPACES))
def test_reserved_namespaces_are_refused_at_ingress(h: Harness, namespace: str) -> None:
    h.broker()  # a broker exists elsewhere: the refusal is about the name, not a lookup
    result = h.post(BINARY, b"x", ns=namespace)
    assert result.status == 400
    errors = json.loads(result.body)["errors"]
    assert (
        errors == [{"field": "path.namespace", "message": errors[0]["message"]}]
        and "reserved" in errors[0]["message"]
    )


def test_reserved_namespace_over_http(h: Harness, server: str) -> None:
    r = httpx.post(f"{server}/apis/default", headers=BINARY, content=b"x")
    assert r.status_code == 400 and r.headers["content-type"] == PROBLEM
    assert r.json()["errors"][0]["field"] == "path.namespace"


# ---- one middleware: every error is problem+json ------------------------------------------------


def _broken(h: Harness) -> None:
    h.container.store = BrokenStore()  # type: ignore[misc]


def test_unexpected_errors_are_opaque_problems_in_the_test_client(
    h: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    _broken(h)
    with caplog.at_level(logging.ERROR, "broker.http"), Client(app) as client:
        r = client.http.get(f"{CP}/ns/triggers")
    assert r.status_code == 500 and r.headers["Content-Type"] == PROBLEM
    doc = json.loads(r.body)
    assert set(doc) == {"type", "title", "status", "detail", "correlationId"}
    assert "secret" not in r.body.decode() and "RuntimeError" not in r.body.decode()
    record = next(rec for rec in caplog.records if doc["correlationId"] in rec.getMessage())
    assert record.exc_info is not None and "exploded" in str(record.exc_info[1])


def test_unexpected_errors_are_opaque_problems_over_http(h: Harness, server: str) -> None:
    _broken(h)
    r = httpx.get(f"{server}{CP}/ns/brokers")
    assert r.status_code == 500 and r.headers["content-type"] == PROBLEM
    assert "secret" not in r.text and r.json()["correlationId"]


def test_domain_errors_keep_their_problem(h: Harness, server: str) -> None:
    r = httpx.get(f"{server}{CP}/ns/brokers/nope")
    assert r.status_code == 404 and r.headers["content-type"] == PROBLEM
    assert r.json()["type"].endswith("/not-found")


def test_chalice_own_405_is_a_problem_with_allow(h: Harness, server: str) -> None:
    r = httpx.patch(f"{server}{CP}/ns/brokers", json={})
    assert r.status_code == 405 and r.headers["content-type"] == PROBLEM
    assert set(r.headers["allow"].replace(" ", "").split(",")) == {"GET", "POST"}
    assert r.json()["type"].endswith("/method-not-allowed")


@pytest.mark.parametrize("path", ["/", "/a/b/c", "/apis", "/registry/endpoints/e/x"])
def test_unknown_paths_are_404_problems_naming_the_ingress_shape(server: str, path: str) -> None:
    for method in ("GET", "POST"):
        r = httpx.request(method, f"{server}{path}", headers={"authorization": "x"})
        assert r.status_code == 404 and r.headers["content-type"] == PROBLEM, (method, path)
        assert "POST /{namespace}/{broker}" in r.json()["detail"]


@pytest.mark.parametrize(("length", "status"), [("abc", 400), ("-1", 400), ("99999999999", 413)])
def test_unreadable_content_length_is_refused(server: str, length: str, status: int) -> None:
    import socket

    host, port = server.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(f"POST /ns/b HTTP/1.1\r\nHost: x\r\nContent-Length: {length}\r\n\r\n".encode())
        head = sock.recv(65536).decode()
    assert head.startswith(f"HTTP/1.1 {status} ") and PROBLEM in head


def test_a_broker_holds_a_bounded_number_of_tokens(h: Harness) -> None:
    h.broker(annotations={"serverless-broker/ingress-auth": "token"})
    created = [
        h.container.tokens.create("ns", "default")["id"] for _ in range(MAX_TOKENS_PER_BROKER)
    ]
    with pytest.raises(ConflictError, match="revoke one"):
        h.container.tokens.create("ns", "default")
    assert len(h.container.tokens.list("ns", "default")["items"]) == MAX_TOKENS_PER_BROKER
    h.container.tokens.revoke("ns", "default", created[0])
    assert h.container.tokens.create("ns", "default")["token"]  # room again
