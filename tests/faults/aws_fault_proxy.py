"""A fault-injecting HTTP proxy in front of the embedded AWS endpoint (moto): passes requests
through on kept-alive connections, or, for a chosen share of the requests to chosen services,
answers as an AWS endpoint in trouble does — throttling, 500s — or resets the connection.

The service of a request is read from its SigV4 credential scope (``.../<region>/<service>/
aws4_request``), so one proxy serves every client. Error bodies follow the request's protocol
(JSON for the JSON protocols, XML otherwise), so botocore parses them as it would AWS's, and its
retry logic sees what it would see on AWS.
"""

from __future__ import annotations

import http.client
import json
import random
import re
import socket
import struct
import threading
from collections import Counter
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.fakes.background_server import BackgroundServer

_SCOPE = re.compile(r"Credential=[^/]+/\d{8}/[^/]+/([^/]+)/aws4_request")
_HOP = {"connection", "keep-alive", "transfer-encoding", "proxy-connection", "upgrade", "te"}

KINDS = ("throttle", "error500", "reset")


@dataclass(frozen=True)
class Fault:
    kind: str  # one of KINDS
    share: float  # of the matching requests, 0..1
    services: frozenset[str] | None  # None: every service


def _service(headers: Any) -> str:
    match = _SCOPE.search(headers.get("Authorization", ""))
    return match.group(1) if match else "unknown"


def _error(kind: str, content_type: str) -> tuple[int, dict[str, str], bytes]:
    code, status, message = {
        "throttle": ("ThrottlingException", 400, "Rate exceeded"),
        "error500": ("InternalFailure", 500, "We encountered an internal error."),
    }[kind]
    if "json" in content_type:
        body = json.dumps({"__type": code, "message": message}).encode()
        return status, {"Content-Type": content_type, "x-amzn-ErrorType": code}, body
    if kind == "throttle":  # S3 throttles with 503 SlowDown
        code, status, message = "SlowDown", 503, "Please reduce your request rate."
    body = (
        f"<ErrorResponse><Error><Type>Sender</Type><Code>{code}</Code><Message>{message}"
        f"</Message></Error><RequestId>fault</RequestId></ErrorResponse>"
    ).encode()
    return status, {"Content-Type": "text/xml"}, body


class FaultProxy(BackgroundServer):
    def __init__(self, upstream_host: str, upstream_port: int, seed: int = 16) -> None:
        self._upstream = (upstream_host, upstream_port)
        self._fault: Fault | None = None
        self._rng = random.Random(seed)
        self._lock = threading.Lock()
        self.injected: Counter[tuple[str, str]] = Counter()  # (kind, service) -> count
        self.passed: Counter[str] = Counter()  # service -> count
        self._serve(ThreadingHTTPServer(("127.0.0.1", 0), self._handler()))

    def inject(self, kind: str, share: float = 1.0, services: set[str] | None = None) -> None:
        assert kind in KINDS, kind
        with self._lock:
            self._fault = Fault(kind, share, frozenset(services) if services else None)

    def clear(self) -> None:
        with self._lock:
            self._fault = None

    def _decide(self, service: str) -> str | None:
        with self._lock:
            fault = self._fault
            if fault is None or (fault.services is not None and service not in fault.services):
                self.passed[service] += 1
                return None
            if self._rng.random() >= fault.share:
                self.passed[service] += 1
                return None
            self.injected[(fault.kind, service)] += 1
            return fault.kind

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            upstream: http.client.HTTPConnection | None = None  # one per client connection

            def setup(self) -> None:
                super().setup()
                self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

            def finish(self) -> None:
                super().finish()
                if self.upstream is not None:
                    self.upstream.close()

            def log_message(self, format: str, *args: Any) -> None:
                return None

            def _relay(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                kind = proxy._decide(_service(self.headers))
                if kind == "reset":
                    # An abortive close: the client sees "connection reset by peer".
                    self.connection.setsockopt(
                        socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0)
                    )
                    self.close_connection = True
                    return
                if kind is not None:
                    status, headers, payload = _error(kind, self.headers.get("Content-Type", ""))
                    self._answer(status, headers, payload)
                    return
                try:
                    status, headers, payload = self._forward(body)
                except (OSError, http.client.HTTPException):  # the endpoint itself is gone
                    self.close_connection = True
                    return
                self._answer(status, headers, payload)

            def _forward(self, body: bytes) -> tuple[int, dict[str, str], bytes]:
                headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP}
                for attempt in range(2):  # a kept connection upstream may have gone stale
                    conn = self.upstream
                    if conn is None:
                        conn = self.upstream = http.client.HTTPConnection(
                            *proxy._upstream, timeout=60
                        )
                    try:
                        conn.request(self.command, self.path, body=body, headers=headers)
                        response = conn.getresponse()
                        payload = response.read()
                    except (OSError, http.client.HTTPException):
                        conn.close()
                        self.upstream = None
                        if attempt:
                            raise
                        continue
                    out = {k: v for k, v in response.getheaders() if k.lower() not in _HOP}
                    return response.status, out, payload
                raise AssertionError("unreachable")

            def _answer(self, status: int, headers: dict[str, str], payload: bytes) -> None:
                self.send_response(status)
                for k, v in headers.items():
                    if k.lower() != "content-length" or self.command == "HEAD":
                        self.send_header(k, v)
                if self.command != "HEAD":
                    self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(payload)

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _relay

        return Handler
