"""The local runtime's HTTP servers (docs/local-mode.md). Waitress owns HTTP/1.1: keep-alive,
chunked bodies, ``Expect: 100-continue``, and bodies bounded in bytes however they are framed; it
reads a whole request before any handler runs, so no answer can leave part of a body to be read
as the next request. The app's requests go through Chalice's own API Gateway emulation
(LocalGateway), so handlers see real API Gateway proxy events."""

from __future__ import annotations

import base64
import http.client
import json
import socket
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Self

from waitress import create_server, wasyncore
from waitress.channel import HTTPChannel
from waitress.parser import HTTPRequestParser, ParsingError
from waitress.task import ErrorTask

from brokerctl.request_guard import Guard
from chalicelib.problems import PROBLEM_TYPE, no_route_problem, problem_document

# API Gateway's REST API payload limit.
MAX_BODY_BYTES = 10 * 1024 * 1024
HANDLER_THREADS = 8  # requests served at once, besides open live tails

Answer = tuple[int, dict[str, str], bytes | Iterable[bytes]]
Dispatch = Callable[[str, str, dict[str, str], bytes], tuple[int, dict[str, str], bytes]]
# What WSGI lets the server alone say (PEP 3333): never passed on from an answer.
_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length", "te", "trailer",
        "upgrade", "proxy-authenticate", "proxy-authorization"}  # fmt: skip


@dataclass(frozen=True)
class Request:
    method: str
    target: str  # as sent: the path and query, percent-encoded
    headers: dict[str, str]  # lower-case names
    body: bytes
    disconnected: Callable[[], bool]  # the client went away (a stream ends)

    @property
    def path(self) -> str:
        return self.target.split("?", 1)[0]


def problem(status: int, title: str, detail: str, slug: str, **kw: Any) -> Answer:
    doc = problem_document(status, title, detail, slug, **kw)
    return status, {"Content-Type": PROBLEM_TYPE}, json.dumps(doc).encode()


_ERROR_SLUGS = {413: "payload-too-large", 431: "headers-too-large"}


class _ProblemErrorTask(ErrorTask):  # type: ignore[misc]
    """Waitress's own refusals (a malformed request line or header, a body over the limit,
    headers too large) as problem+json instead of its text/plain; it closes the connection."""

    def execute(self) -> None:
        error = self.request.error
        slug = _ERROR_SLUGS.get(error.code, "bad-request")
        detail = str(error.body)
        if error.code == 413:
            detail = f"the body is over the {MAX_BODY_BYTES} bytes the API accepts"
        doc = problem_document(error.code, error.reason, detail, slug)
        body = json.dumps(doc).encode()
        self.status = f"{error.code} {error.reason}"
        self.response_headers.append(("Content-Type", PROBLEM_TYPE))
        self.set_close_on_finish()
        self.content_length = len(body)
        self.write(body)


class _Parser(HTTPRequestParser):  # type: ignore[misc]
    def parse_header(self, header_plus: bytes) -> None:
        try:
            super().parse_header(header_plus)
        except ValueError as exc:
            # waitress 3.0.2 calls int() on a Content-Length of any length: past Python's
            # 4,300 digits it raises, and the connection was dropped without an answer.
            raise ParsingError(f"a header is malformed ({str(exc)[:80]})") from exc


class _Channel(HTTPChannel):  # type: ignore[misc]
    parser_class = _Parser
    error_task_class = _ProblemErrorTask

    def __init__(self, server: Any, *args: Any, **kw: Any) -> None:
        super().__init__(server, *args, **kw)
        server.owner.connections += 1


def _request_of(environ: dict[str, Any]) -> Request:
    headers = {
        key[5:].lower().replace("_", "-"): value
        for key, value in environ.items()
        if key.startswith("HTTP_")
    }
    for key in ("CONTENT_TYPE", "CONTENT_LENGTH"):
        if environ.get(key):
            headers[key.lower().replace("_", "-")] = environ[key]
    length = int(environ.get("CONTENT_LENGTH") or 0)  # waitress's own count of what it read
    body = environ["wsgi.input"].read(length) if length else b""
    return Request(
        environ["REQUEST_METHOD"],
        environ["REQUEST_URI"],
        headers,
        body,
        environ["waitress.client_disconnected"],
    )


class LocalServer:
    """``handle(request) -> (status, headers, body)`` served over HTTP/1.1 from a thread of its
    own: the lifecycle the local runtime's servers share (the app, the console's proxy, the event
    display). A body given as bytes is sent with its length; an iterable is streamed (chunked)."""

    def __init__(
        self,
        handle: Callable[[Request], Answer],
        host: str,
        port: int,
        log_line: Callable[[str], None] | None = None,
        threads: int = HANDLER_THREADS,
        max_body: int = MAX_BODY_BYTES,
    ) -> None:
        self.connections = 0  # accepted so far
        self._handle = handle
        self._log_line = log_line
        self._map: dict[int, Any] = {}
        # One socket, bound here: a name with several addresses would make waitress open one
        # listener each (and a port in use fails now, not in the serving thread).
        family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
        sock = socket.socket(family, kind, proto)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(address)
        except OSError:
            sock.close()
            raise
        self._server = create_server(
            self._wsgi, map=self._map, sockets=[sock], threads=threads,
            max_request_body_size=max_body, asyncore_use_poll=True, connection_limit=1000,
            # A page that stops reading its stream holds at most this much here; then its
            # handler waits and its tail is dropped (brokerctl/console).
            outbuf_high_watermark=1024 * 1024, ident="brokerctl",
        )  # fmt: skip
        self._server.owner = self
        self._server.channel_class = _Channel  # TCP_NODELAY is waitress's default socket option
        self._thread = threading.Thread(target=self._server.run, name="http-server", daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.socket.getsockname()[:2]
        return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"

    def start(self) -> Self:
        self._thread.start()
        return self

    def stop(self) -> None:
        """Closes the listener and every connection (an open stream sees its client gone), then
        waits for the handlers."""
        server, trigger = self._server, self._server.trigger

        def close_all() -> None:  # in the serving thread, as waitress's own closes are
            for dispatcher in list(self._map.values()):
                if dispatcher is trigger:
                    # Out of the loop, which then ends; its pipe stays open until no handler
                    # can pull it (closed here, a pull racing this thunk would write to a
                    # closed, or reused, descriptor).
                    trigger.del_channel()
                elif dispatcher is server:
                    wasyncore.dispatcher.close(server)  # waitress's close also shuts the pipe
                else:
                    dispatcher.handle_close()

        if self._thread.is_alive():
            trigger.pull_trigger(close_all)
            self._thread.join(10)
        else:
            close_all()
        server.task_dispatcher.shutdown(timeout=10)
        trigger.close()

    def _wsgi(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        started = time.perf_counter()
        request = _request_of(environ)
        status, headers, body = self._handle(request)
        out = [(k, v) for k, v in headers.items() if k.lower() not in _HOP]
        if isinstance(body, bytes):
            out.append(("Content-Length", str(len(body))))
        start_response(f"{status} {http.client.responses.get(status, 'Status')}", out)
        if self._log_line is not None:
            elapsed = (time.perf_counter() - started) * 1000
            self._log_line(f"{request.method} {request.target} -> {status} ({elapsed:.1f} ms)")
        return [body] if isinstance(body, bytes) else body


def _requests_per_thread(app: Any) -> None:
    """Chalice keeps the request being handled on the app object (``app.current_request``), one
    for the whole process: enough in Lambda, which runs one request at a time, but here a thread
    per connection would read another thread's method, headers or body (a PUT answered as a GET;
    an event stored twice and its neighbour never, both answered 202). As ``chalice local`` does,
    the app's class gains Chalice's thread-local request."""
    from chalice.local import LocalChalice

    if not isinstance(app, LocalChalice):
        app.__class__ = type("ThreadLocalChalice", (LocalChalice, type(app)), {})


def chalice_dispatcher(app: Any, stage: str = "local") -> Dispatch:
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


class AppServer(LocalServer):
    """The Chalice app, and the console's ``/ui`` when the runtime serves one; every request
    first passes the guard (brokerctl/request_guard.py: no web page may drive the runtime)."""

    def __init__(
        self,
        app: Any,
        host: str,
        port: int,
        log_line: Callable[[str], None],
        console: Any = None,
    ) -> None:
        dispatch = chalice_dispatcher(app)
        token = console.token if console is not None else None

        def handle(request: Request) -> Answer:
            refused = self.guard.refusal(request)
            if refused is not None:
                return refused
            if console is not None and console.handles(request.path):
                answer: Answer = console.answer(request)
                return answer  # static pages and the live tail (SSE)
            return dispatch(request.method, request.target, request.headers, request.body)

        tails = console.max_tails if console is not None else 0
        super().__init__(handle, host, port, log_line, threads=HANDLER_THREADS + tails)
        self.guard = Guard(host, self._server.socket.getsockname()[1], token)
