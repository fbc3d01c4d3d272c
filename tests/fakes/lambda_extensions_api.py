"""A fake of Lambda's Extensions API (the documented paths and headers, over real HTTP), for
running a real external extension as Lambda would: ``AWS_LAMBDA_RUNTIME_API`` is ``host_port``.

- ``POST /2020-01-01/extension/register``, header ``Lambda-Extension-Name``, body
  ``{"events": [...]}`` (INVOKE, SHUTDOWN): 200 with ``Lambda-Extension-Identifier``; 400 without
  a name or with another event; 403 for a name registered twice.
- ``GET /2020-01-01/extension/event/next``, header ``Lambda-Extension-Identifier``: blocks until
  an event is queued (``shutdown``), then answers it with ``Lambda-Extension-Event-Identifier``;
  403 for an unknown identifier.
"""

from __future__ import annotations

import json
import queue
import threading
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.fakes.background_server import BackgroundServer

_REGISTER = "/2020-01-01/extension/register"
_NEXT = "/2020-01-01/extension/event/next"
_EVENTS = {"INVOKE", "SHUTDOWN"}


@dataclass
class Registered:
    name: str
    events: list[str]
    queue: queue.Queue[dict[str, Any]] = field(default_factory=queue.Queue)


class LambdaExtensionsApi(BackgroundServer):
    def __init__(self, function_name: str = "serverless-broker-prod") -> None:
        self.function_name = function_name
        self.extensions: dict[str, Registered] = {}  # identifier -> registration
        self.waiting = threading.Event()  # an extension is blocked in event/next
        self._lock = threading.Lock()
        api = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # http.server's name
                if self.path != _REGISTER:
                    return self._answer(404, {"errorType": "NotFound"})
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                name = self.headers.get("Lambda-Extension-Name")
                events = body.get("events") if isinstance(body, dict) else None
                if not name or not isinstance(events, list) or not set(events) <= _EVENTS:
                    return self._answer(400, {"errorType": "Extension.InvalidRequest"})
                with api._lock:
                    if any(r.name == name for r in api.extensions.values()):
                        return self._answer(403, {"errorType": "Extension.AlreadyRegistered"})
                    identifier = str(uuid.uuid4())
                    api.extensions[identifier] = Registered(name, list(events))
                info = {"functionName": api.function_name, "functionVersion": "$LATEST"}
                return self._answer(200, info, {"Lambda-Extension-Identifier": identifier})

            def do_GET(self) -> None:
                if self.path != _NEXT:
                    return self._answer(404, {"errorType": "NotFound"})
                registered = api.extensions.get(self.headers.get("Lambda-Extension-Identifier", ""))
                if registered is None:
                    return self._answer(403, {"errorType": "Extension.Forbidden"})
                api.waiting.set()
                event = registered.queue.get()
                headers = {"Lambda-Extension-Event-Identifier": str(uuid.uuid4())}
                return self._answer(200, event, headers)

            def _answer(
                self, status: int, body: dict[str, Any], headers: dict[str, str] | None = None
            ) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                pass  # the tests assert on what was registered and sent, not on access logs

        self._serve(ThreadingHTTPServer(("127.0.0.1", 0), Handler))

    @property
    def host_port(self) -> str:
        host, port = self._server.server_address[:2]
        return f"{host!s}:{port}"

    def shutdown(self, reason: str, deadline_ms: int) -> None:
        """Sends SHUTDOWN to every extension registered for it (Lambda's reasons: spindown,
        timeout, failure)."""
        event = {"eventType": "SHUTDOWN", "shutdownReason": reason, "deadlineMs": deadline_ms}
        for registered in list(self.extensions.values()):
            if "SHUTDOWN" in registered.events:
                registered.queue.put(event)
