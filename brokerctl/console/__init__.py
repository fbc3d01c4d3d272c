"""The local console (docs/console.md): static pages under ``/ui`` and the live tail at
``/ui/events`` (server-sent events), served by the local runtime's HTTP server beside the Chalice
app, which cannot stream.

The tail's source is the archive records as they are written (design.md §3): ``TappedArchive``
wraps the archive port and hands every record to a ``TailHub`` before passing them on. The hub
keeps the last ``RING_SIZE`` entries and one bounded queue per browser; a browser that falls
``QUEUE_SIZE`` entries behind is dropped (counted in ``dropped``), never waited for, so a slow
page can neither block the data path nor grow memory."""

from __future__ import annotations

import collections
import json
import logging
import mimetypes
import queue
import secrets
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from importlib import resources
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlsplit

from chalicelib.ports import Archive

if TYPE_CHECKING:
    from brokerctl.http_server import Answer, Request

log = logging.getLogger("broker.console")

RING_SIZE = 500  # entries a newly opened page is shown first
QUEUE_SIZE = 1000  # entries a page may be behind before it is dropped
MAX_SUBSCRIBERS = 32  # open tails; one more is answered 503
KEEPALIVE_SECONDS = 15.0
_MAX_FIELD = 200  # characters of a filter parameter
STATIC = ("index.html", "console.js", "console.css")

# A delivery record's outcome, in the words of the tail.
_KINDS = {
    "delivered": "delivered",
    "reply": "delivered",
    "retry": "retried",
    "dead_lettered": "dead-lettered",
}


def tail_entry(record: dict[str, Any]) -> dict[str, Any] | None:
    """What the tail shows of one archive record, or None for a record it does not describe."""
    kind = record.get("kind")
    if kind == "delivery":
        name = _KINDS.get(str(record.get("outcome")))
        if name is None:
            return None
        return {
            "kind": name,
            "at": record.get("at"),
            "namespace": record.get("namespace"),
            "broker": record.get("broker"),
            "triggers": [record.get("trigger")],
            "id": record.get("event_id"),
            "type": record.get("event_type"),
            "source": record.get("event_source"),
            "attempt": record.get("attempt"),
            "status": record.get("status"),
            "latencyMs": record.get("latency_ms"),
        }
    if kind in ("accepted", "rejected", "duplicate"):
        found = record.get("event")
        event: dict[str, Any] = found if isinstance(found, dict) else {}
        return {
            "kind": kind,
            "at": record.get("at"),
            "namespace": record.get("namespace"),
            "broker": record.get("broker"),
            "triggers": list(record.get("triggers") or []),
            "id": event.get("id", record.get("event_id")),
            "type": event.get("type", record.get("event_type")),
            "source": event.get("source", record.get("event_source")),
            "reason": record.get("reason"),
        }
    return None


@dataclass(eq=False)  # each page is its own subscriber
class Subscriber:
    broker: str | None
    trigger: str | None
    namespace: str | None
    limit: int = QUEUE_SIZE
    dropped: bool = False
    entries: queue.Queue[dict[str, Any] | None] = field(init=False)

    def __post_init__(self) -> None:
        self.entries = queue.Queue(self.limit)

    def wants(self, entry: dict[str, Any]) -> bool:
        return (
            (self.namespace is None or entry.get("namespace") == self.namespace)
            and (self.broker is None or entry.get("broker") == self.broker)
            and (self.trigger is None or self.trigger in entry.get("triggers", ()))
        )


class TailHub:
    def __init__(
        self,
        ring_size: int = RING_SIZE,
        max_subscribers: int = MAX_SUBSCRIBERS,
        queue_size: int = QUEUE_SIZE,
    ) -> None:
        self._queue_size = queue_size
        self._lock = threading.Lock()
        self._ring: collections.deque[dict[str, Any]] = collections.deque(maxlen=ring_size)
        self._subscribers: list[Subscriber] = []
        self.max_subscribers = max_subscribers
        self.dropped = 0  # pages dropped for falling behind
        self.published = 0
        # Per trigger: attempts, summed latency (ms), and counts by kind, for the charts.
        self.stats: dict[str, dict[str, float]] = {}

    def publish(self, entry: dict[str, Any]) -> None:
        with self._lock:
            self.published += 1
            entry["seq"] = self.published  # the SSE id: a reconnecting page resumes after it
            self._ring.append(entry)
            if entry["kind"] in ("delivered", "retried", "dead-lettered"):
                key = f"{entry['namespace']}/{entry['broker']}/{entry['triggers'][0]}"
                s = self.stats.get(key)
                if s is None:
                    if len(self.stats) >= 1000:  # bounded: the oldest trigger goes
                        self.stats.pop(next(iter(self.stats)))
                    s = self.stats[key] = {"attempts": 0.0, "latencyMsSum": 0.0}
                s["attempts"] += 1
                s["latencyMsSum"] += float(entry.get("latencyMs") or 0.0)
                s[entry["kind"]] = s.get(entry["kind"], 0.0) + 1
            for sub in list(self._subscribers):
                if not sub.wants(entry):
                    continue
                try:
                    sub.entries.put_nowait(entry)
                except queue.Full:
                    self._drop(sub)

    def _drop(self, sub: Subscriber) -> None:
        # Called with the lock held. The page is told why by the end of its stream.
        self._subscribers.remove(sub)
        sub.dropped = True
        self.dropped += 1
        log.warning("console: a live tail fell %d entries behind and was dropped", sub.limit)

    def subscribe(
        self, namespace: str | None, broker: str | None, trigger: str | None, after: int = 0
    ) -> tuple[Subscriber, list[dict[str, Any]]] | None:
        """A new subscriber and the ring's entries it wants (those after sequence number
        ``after``), or None when there are too many."""
        with self._lock:
            if len(self._subscribers) >= self.max_subscribers:
                return None
            sub = Subscriber(broker, trigger, namespace, self._queue_size)
            self._subscribers.append(sub)
            return sub, [e for e in self._ring if e["seq"] > after and sub.wants(e)]

    def unsubscribe(self, sub: Subscriber) -> None:
        with self._lock:
            if sub in self._subscribers:
                self._subscribers.remove(sub)

    def close(self) -> None:
        with self._lock:
            subs, self._subscribers = self._subscribers, []
        for sub in subs:
            try:
                sub.entries.put_nowait(None)
            except queue.Full:
                sub.dropped = True

    @property
    def subscribers(self) -> int:
        with self._lock:
            return len(self._subscribers)

    def ring(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self._ring)

    def snapshot(self) -> dict[str, Any]:
        with self._lock:
            return {
                "published": self.published,
                "dropped": self.dropped,
                "subscribers": len(self._subscribers),
                "triggers": {k: dict(v) for k, v in self.stats.items()},
            }


class TappedArchive:
    """The archive port, each record shown to the hub first (an unreadable line is skipped: the
    archive itself is the record of it, and the tail is a view)."""

    def __init__(self, inner: Archive, hub: TailHub) -> None:
        self._inner = inner
        self._hub = hub

    def put(self, records: Sequence[bytes]) -> None:
        self._inner.put(records)  # first: a write the archiver retries is shown once
        for line in records:
            try:
                record = json.loads(line)
            except ValueError:
                continue
            entry = tail_entry(record) if isinstance(record, dict) else None
            if entry is not None:
                self._hub.publish(entry)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def _param(query: dict[str, list[str]], name: str) -> str | None:
    values = query.get(name)
    value = values[0][:_MAX_FIELD] if values else ""
    return value or None


def _text(status: int, text: str) -> Answer:
    return status, {"Content-Type": "text/plain", "Cache-Control": "no-store"}, text.encode()


class Console:
    """Answers ``/ui`` requests on the local runtime's HTTP server (brokerctl/http_server.py).
    ``token`` is this run's: written into the page, which sends it as ``X-Console-Token``
    (brokerctl/request_guard.py says where it is required)."""

    def __init__(self, hub: TailHub | None) -> None:
        self.hub = hub  # None: no tail here (the signing proxy for a deployed API)
        self.token = secrets.token_urlsafe(32)
        self.max_tails = hub.max_subscribers if hub is not None else 0
        self._stopping = threading.Event()

    def handles(self, path: str) -> bool:
        return path == "/ui" or path.startswith("/ui/")

    def answer(self, request: Request) -> Answer:
        parts = urlsplit(request.target)
        name = parts.path.removeprefix("/ui").lstrip("/") or "index.html"
        if request.method not in ("GET", "HEAD"):
            return _text(405, "method not allowed\n")
        if name == "events" and self.hub is None:
            # 204 tells an EventSource not to reconnect: the page says the tail is unavailable.
            return _text(204, "")
        if name == "events":
            return self._tail(request, parse_qs(parts.query))
        if name == "stats":
            snapshot = self.hub.snapshot() if self.hub else {"tail": "unavailable", "triggers": {}}
            return (
                200,
                {"Content-Type": "application/json", "Cache-Control": "no-store"},
                (json.dumps(snapshot).encode()),
            )
        if name not in STATIC:
            return _text(404, "not found\n")
        body = resources.files(__package__).joinpath("static", name).read_bytes()
        if name == "index.html":
            body = body.replace(b"{{console-token}}", self.token.encode())
        kind = mimetypes.guess_type(name)[0] or "application/octet-stream"
        if name.endswith(".js"):
            kind = "text/javascript"
        return 200, {"Content-Type": f"{kind}; charset=utf-8", "Cache-Control": "no-store"}, body

    def stop(self) -> None:
        self._stopping.set()
        if self.hub is not None:
            self.hub.close()

    def _tail(self, request: Request, query: dict[str, list[str]]) -> Answer:
        assert self.hub is not None
        last = (request.headers.get("last-event-id") or "").strip()
        after = int(last) if last.isascii() and last.isdigit() and len(last) < 16 else 0
        got = self.hub.subscribe(
            _param(query, "namespace"), _param(query, "broker"), _param(query, "trigger"), after
        )
        if got is None:
            return _text(503, "too many live tails open\n")
        headers = {"Content-Type": "text/event-stream", "Cache-Control": "no-store"}
        return 200, headers, self._stream(request, self.hub, *got)

    def _stream(
        self, request: Request, hub: TailHub, sub: Subscriber, backlog: list[dict[str, Any]]
    ) -> Iterator[bytes]:
        """The SSE body, streamed by the server (chunked) until the page goes, falls behind or
        the runtime stops; ``: keepalive`` comments keep idle proxies from closing it."""
        try:
            yield b"".join(_sse(old) for old in backlog) or b": tail\n\n"
            idle = 0.0
            while not (self._stopping.is_set() or sub.dropped or request.disconnected()):
                try:
                    entry: dict[str, Any] | None = sub.entries.get(timeout=1.0)
                except queue.Empty:
                    idle += 1.0
                    if idle >= KEEPALIVE_SECONDS:
                        idle = 0.0
                        yield b": keepalive\n\n"
                    continue
                if entry is None:
                    break
                idle = 0.0
                yield _sse(entry)
            if sub.dropped:
                yield b"event: dropped\ndata: {}\n\n"
        finally:
            hub.unsubscribe(sub)


def _sse(entry: dict[str, Any]) -> bytes:
    return b"id: %d\nevent: entry\ndata: %s\n\n" % (entry["seq"], json.dumps(entry).encode())
