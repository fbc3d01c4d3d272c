"""``brokerctl event-display``: a small subscriber that prints every CloudEvent it receives
(like Knative's event_display), answering 202. Also used by the tests as a real HTTP subscriber."""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from brokerctl.http_server import Answer, LocalServer, Request

SUBSCRIBER_THREADS = 64


@dataclass
class Received:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class Reply:
    status: int = 202
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""


Responder = Callable[[Received, int], Reply]


def _accept(received: Received, n: int) -> Reply:
    return Reply()


class EventDisplay(LocalServer):
    """A threaded HTTP server recording every request; ``responder(request, n)`` chooses the
    answer for the n-th request (1-based), so tests can fail the first n, reply with events, ..."""

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        responder: Responder = _accept,
        echo: Callable[[str], None] | None = None,
        keep: bool = True,
    ) -> None:
        self.received: list[Received] = []
        self.count = 0
        self._responder = responder
        self._echo = echo
        self._keep = keep
        self._cond = threading.Condition()
        # A subscriber's answers may be slow on purpose (timeouts, backpressure): as many at
        # once as a test sends.
        super().__init__(self._answer, host, port, threads=SUBSCRIBER_THREADS)

    def _answer(self, request: Request) -> Answer:
        if request.method != "POST":
            return 405, {"Allow": "POST"}, b""
        got = Received("POST", request.target, request.headers, request.body)
        with self._cond:
            self.count += 1
            n = self.count
            if self._keep:
                self.received.append(got)
            self._cond.notify_all()
        reply = self._responder(got, n)
        if self._echo:
            self._echo(render(got))
        return reply.status, reply.headers, reply.body

    def wait_for(self, predicate: Callable[[list[Received]], bool], timeout: float) -> bool:
        with self._cond:
            return self._cond.wait_for(lambda: predicate(self.received), timeout=timeout)

    def __enter__(self) -> EventDisplay:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def render(got: Received) -> str:
    lines = ["☁️  cloudevents.Event", "Context Attributes,"]
    ce = {k[3:]: v for k, v in got.headers.items() if k.startswith("ce-")}
    body = got.body
    if got.headers.get("content-type", "").startswith("application/cloudevents+json"):
        try:
            doc = json.loads(body)
            ce = {k: v for k, v in doc.items() if k not in {"data", "data_base64"}}
            body = json.dumps(doc.get("data", doc.get("data_base64")), indent=2).encode()
        except ValueError:
            pass
    else:
        if "content-type" in got.headers:
            ce["datacontenttype"] = got.headers["content-type"]
    for key in sorted(ce):
        lines.append(f"  {key}: {ce[key]}")
    lines.append("Data,")
    try:
        lines.append("  " + body.decode("utf-8"))
    except UnicodeDecodeError:
        lines.append(f"  <{len(body)} bytes of binary data>")
    return "\n".join(lines)


def run_event_display(host: str, port: int, quiet: bool = False) -> int:
    echo = None if quiet else (lambda text: print(text, flush=True))
    display = EventDisplay(host, port, echo=echo, keep=not quiet)
    display.start()
    print(f"event-display listening on {display.url}", flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        pass
    finally:
        display.stop()
    return 0


if __name__ == "__main__":
    sys.exit(run_event_display("127.0.0.1", 8081))
