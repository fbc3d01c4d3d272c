"""``brokerctl console``: the console's page on this machine for a deployed API (docs/console.md).

A browser cannot sign its own calls with SigV4, and the deployed control plane is behind IAM: this
serves ``/ui`` on loopback and forwards every other request to the API, signed with the caller's
AWS credentials when the target says so (as brokerctl's own calls are). Only the page may use it
(brokerctl/request_guard.py): a forwarded call carries the page's token, and always goes to the
configured API, whatever the request names. No live tail here (the page says so): API Gateway
cannot stream, and the tail's source is the local runtime's archive tap."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx

from brokerctl.client import SigV4Auth, Target, default_credentials
from brokerctl.console import Console
from brokerctl.http_server import Answer, LocalServer, Request, problem
from brokerctl.request_guard import Guard

# Request headers passed on to the API (the signature covers host and content-type).
_FORWARDED = ("content-type", "accept", "if-match", "if-none-match")
_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length", "content-encoding"}


class ConsoleProxy(LocalServer):
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
        self._http = httpx.Client(
            auth=auth, transport=transport, timeout=30.0, follow_redirects=False
        )
        self._api = httpx.URL(target.url)
        self._say = log_line
        self.console = Console(None)
        super().__init__(self._answer, host, port, log_line)
        self.guard = Guard(host, self._server.socket.getsockname()[1], self.console.token)

    def _answer(self, request: Request) -> Answer:
        forwarded = not self.console.handles(request.path)
        refused = self.guard.refusal(request, forwarded=forwarded)
        if refused is not None:
            return refused
        if not forwarded:
            return self.console.answer(request)
        # The API's own path, then the request's (a path: the guard refused any other target).
        base = self._api.raw_path.split(b"?", 1)[0].rstrip(b"/")
        url = self._api.copy_with(raw_path=base + request.target.encode("ascii"))
        headers = {k: v for k, v in request.headers.items() if k in _FORWARDED}
        try:
            r = self._http.request(request.method, url, content=request.body, headers=headers)
        except httpx.HTTPError as exc:
            self._say(f"console proxy: {request.method} {request.path}: {exc}")
            return problem(502, "Bad gateway", f"the API is unreachable: {exc}", "bad-gateway")
        kept = {k: v for k, v in r.headers.items() if k.lower() not in _HOP}
        return r.status_code, kept, r.content

    def stop(self) -> None:
        super().stop()
        self._http.close()
