"""``brokerctl console``: the console's page on this machine for a deployed API (docs/console.md).

A browser cannot sign its own calls with SigV4, and the deployed control plane is behind IAM: this
serves ``/ui`` on loopback and forwards every other request to the API, signed with the caller's
AWS credentials when the target says so (as brokerctl's own calls are). No live tail here (the
page says so): API Gateway cannot stream, and the tail's source is the local runtime's archive
tap."""

from __future__ import annotations

import socket
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx

from brokerctl.client import SigV4Auth, Target, default_credentials
from brokerctl.console import Console
from brokerctl.http_server import BackgroundServer, content_length

# Request headers passed on to the API (the signature covers host and content-type).
_FORWARDED = ("content-type", "accept", "if-match", "if-none-match")
_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length", "content-encoding"}


class ConsoleProxy(BackgroundServer):
    def __init__(
        self,
        target: Target,
        host: str,
        port: int,
        credentials: Any = None,
        transport: httpx.BaseTransport | None = None,
        log_line: Callable[[str], None] = lambda _: None,
    ) -> None:
        auth: httpx.Auth | None = None
        if target.sigv4:
            assert target.region is not None
            auth = SigV4Auth(credentials or default_credentials(), target.region)
        http = httpx.Client(
            base_url=target.url, auth=auth, transport=transport, timeout=30.0,
            follow_redirects=False,
        )  # fmt: skip
        console = Console(None)
        self._http = http

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def setup(self) -> None:
                super().setup()
                self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

            def _handle(self) -> None:
                if console.handles(self.path):
                    console.handle(self)
                    return
                length = content_length(self.headers.get("content-length"))
                if isinstance(length, tuple):  # 400 or 413, as the API's own server answers
                    status, kind, problem = length
                    self.close_connection = True
                    Console._send(self, status, kind["Content-Type"], problem)
                    return
                body = self.rfile.read(length) if length else b""
                headers = {k: v for k, v in self.headers.items() if k.lower() in _FORWARDED}
                try:
                    r = http.request(self.command, self.path, content=body, headers=headers)
                except httpx.HTTPError as exc:
                    log_line(f"console proxy: {self.command} {self.path}: {exc}")
                    Console._send(self, 502, "text/plain", f"API unreachable: {exc}\n".encode())
                    return
                self.send_response(r.status_code)
                for name, value in r.headers.items():
                    if name.lower() not in _HOP:
                        self.send_header(name, value)
                self.send_header("Content-Length", str(len(r.content)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(r.content)
                log_line(f"{self.command} {self.path} -> {r.status_code}")

            do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = do_HEAD = _handle

            def log_message(self, format: str, *args: Any) -> None:
                return None

        self._serve(ThreadingHTTPServer((host, port), Handler))

    def stop(self) -> None:
        super().stop()
        self._http.close()
