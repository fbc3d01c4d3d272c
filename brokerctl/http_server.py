"""Serves the Chalice app over real HTTP, one thread per connection, through Chalice's own
API Gateway emulation (LocalGateway), so handlers see real API Gateway proxy events."""

from __future__ import annotations

import base64
import json
import socket
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self

from chalicelib.problems import PROBLEM_TYPE, no_route_problem, problem_document


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def setup(self) -> None:
        super().setup()
        # Headers and body leave in two writes: on a kept-alive connection Nagle's algorithm
        # would hold the body until the client's delayed ACK (~40 ms an answer).
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def _handle(self) -> None:
        started = time.perf_counter()
        console = self.server.console
        if console is not None and console.handles(self.path):
            console.handle(self)  # local mode only: static pages and the live tail (SSE)
            return
        length = content_length(self.headers.get("content-length"))
        if isinstance(length, tuple):
            # What API Gateway refuses before any Lambda runs; the connection cannot be reused.
            status, out_headers, out_body = length
            self.close_connection = True
        else:
            body = self.rfile.read(length) if length else b""
            headers = {k.lower(): v for k, v in self.headers.items()}
            status, out_headers, out_body = self.server.dispatch(
                self.command, self.path, headers, body
            )
        self.send_response(status)
        for name, value in out_headers.items():
            if name.lower() in {"content-length", "connection", "transfer-encoding"}:
                continue
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(out_body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(out_body)
        elapsed = (time.perf_counter() - started) * 1000
        self.server.log_line(f"{self.command} {self.path} -> {status} ({elapsed:.1f} ms)")

    do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = do_OPTIONS = do_HEAD = _handle

    def __getattr__(self, name: str) -> Any:
        # Any other method (TRACE, PROPFIND, ...) goes to the app as well, which answers 405
        # problem+json as API Gateway's routes do, instead of http.server's HTML 501.
        if name.startswith("do_"):
            return self._handle
        raise AttributeError(name)

    def log_message(self, format: str, *args: Any) -> None:
        return None


# API Gateway's REST API payload limit.
MAX_BODY_BYTES = 10 * 1024 * 1024


def content_length(value: str | None) -> int | tuple[int, dict[str, str], bytes]:
    """The body's length, or the answer when it cannot be read: 400 for a Content-Length that is
    not a number, 413 over API Gateway's 10 MiB."""
    text = (value or "0").strip()
    if not (text.isascii() and text.isdigit() and len(text) <= 12):
        doc = problem_document(400, "Bad request", "Content-Length is not a number", "bad-request")
    elif int(text) > MAX_BODY_BYTES:
        doc = problem_document(
            413,
            "Payload too large",
            f"the body is {text} bytes; the API accepts {MAX_BODY_BYTES}",
            "payload-too-large",
        )
    else:
        return int(text)
    return doc["status"], {"Content-Type": PROBLEM_TYPE}, json.dumps(doc).encode()


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(
        self,
        address: tuple[str, int],
        dispatch: Callable[[str, str, dict[str, str], bytes], tuple[int, dict[str, str], bytes]],
        log_line: Callable[[str], None],
    ) -> None:
        super().__init__(address, _Handler)
        self.dispatch = dispatch
        self.log_line = log_line
        self.console: Any = None  # brokerctl.console.Console, when the runtime serves /ui


def _requests_per_thread(app: Any) -> None:
    """Chalice keeps the request being handled on the app object (``app.current_request``), one
    for the whole process: enough in Lambda, which runs one request at a time, but here a thread
    per connection would read another thread's method, headers or body (a PUT answered as a GET;
    an event stored twice and its neighbour never, both answered 202). As ``chalice local`` does,
    the app's class gains Chalice's thread-local request."""
    from chalice.local import LocalChalice

    if not isinstance(app, LocalChalice):
        app.__class__ = type("ThreadLocalChalice", (LocalChalice, type(app)), {})


def chalice_dispatcher(
    app: Any, stage: str = "local"
) -> Callable[[str, str, dict[str, str], bytes], tuple[int, dict[str, str], bytes]]:
    from chalice.config import Config
    from chalice.local import LocalGateway, LocalGatewayException, RouteMatcher

    _requests_per_thread(app)
    gateway = LocalGateway(app, Config(chalice_stage=stage, config_from_disk={}))
    routes = RouteMatcher(list(app.routes))
    no_route = json.dumps(no_route_problem()).encode()

    def dispatch(
        method: str, path: str, headers: dict[str, str], body: bytes
    ) -> tuple[int, dict[str, str], bytes]:
        try:
            routes.match_route(path)
        except ValueError:
            # API Gateway (and LocalGateway) answer 403 Missing Authentication Token here; the
            # deployed API maps that to this same 404 (infra/gateway_responses.py).
            return 404, {"Content-Type": PROBLEM_TYPE}, no_route
        try:
            response = gateway.handle_request(method, path, headers, body or None)
        except LocalGatewayException as exc:
            return exc.CODE, dict(exc.headers), exc.body or b""
        out_headers = {k: str(v) for k, v in response.get("headers", {}).items()}
        for name, values in (response.get("multiValueHeaders") or {}).items():
            out_headers[name] = ",".join(str(v) for v in values)
        raw = response.get("body") or b""
        if response.get("isBase64Encoded"):
            raw = base64.b64decode(raw)
        elif isinstance(raw, str):
            raw = raw.encode("utf-8")
        return int(response["statusCode"]), out_headers, raw

    return dispatch


class BackgroundServer:
    """A threaded HTTP server served from a daemon thread: the lifecycle the local runtime's
    servers share (the app, the event display, the console's proxy)."""

    def _serve(self, server: ThreadingHTTPServer) -> None:
        server.daemon_threads = True
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def start(self) -> Self:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()


class AppServer(BackgroundServer):
    def __init__(
        self,
        app: Any,
        host: str,
        port: int,
        log_line: Callable[[str], None],
        console: Any = None,
    ) -> None:
        server = _Server((host, port), chalice_dispatcher(app), log_line)
        server.console = console
        self._serve(server)
