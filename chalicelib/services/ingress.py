"""Ingress: decode and validate, match triggers, store in every matching trigger's queue, then
answer (DESIGN.md §2.1). Nothing is acknowledged before it is stored; on a storage failure the
answer is 503 and the producer retries (duplicates are allowed, loss is not)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from chalicelib.core import archive, names, tokens
from chalicelib.core.clock import utcnow
from chalicelib.core.cloudevents import codec
from chalicelib.core.cloudevents.event import CloudEvent
from chalicelib.core.cloudevents.json_format import dumps_utf8
from chalicelib.core.cloudevents.sqs_message import ClaimCheck, passthrough_headers
from chalicelib.core.errors import (
    BrokerError,
    MethodNotAllowedError,
    NotFoundError,
    PayloadTooLargeError,
    Problem,
    UnauthorizedError,
    UnavailableError,
    ValidationError,
)
from chalicelib.core.resources.eventing import DEFAULT_MAX_EVENT_BYTES
from chalicelib.ports import Archive, OutgoingMessage, QueueSender
from chalicelib.problems import PROBLEM_TYPE, problem_of, status_of
from chalicelib.services.archiver import Archiver
from chalicelib.services.claims import INLINE_LIMIT, SQS_MAX_BYTES, Claims, address
from chalicelib.services.metrics import Metrics, status_class
from chalicelib.services.routing import BrokerConfig, ConfigCache, Route

TTL_ATTRIBUTE = "knativebrokerttl"
ARRIVAL_ATTRIBUTE = "knativearrivaltime"
DEFAULT_TTL = 255
ALLOW = "POST, OPTIONS"
SEND_ATTEMPTS = 3


@dataclass(frozen=True)
class HttpResult:
    status: int
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""


class TtlExceededError(ValidationError):
    title = "Event TTL exceeded"


class Ingress:
    def __init__(
        self,
        cache: ConfigCache,
        queues: QueueSender,
        claims: Claims,
        archive_sink: Archive,
        metrics: Metrics,
        clock: Callable[[], datetime] = utcnow,
        log: Callable[[str], None] | None = None,
        observe: Callable[[str, str, Sequence[CloudEvent]], None] | None = None,
        archive_batch_seconds: float = 0.0,
    ) -> None:
        self._cache = cache
        self._queues = queues
        self._claims = claims
        self._archiver = Archiver(
            archive_sink, metrics, "ingress", batch_seconds=archive_batch_seconds
        )
        self._metrics = metrics
        self._clock = clock
        self._log = log or (lambda line: None)
        # The registry's sample of event types (services/event_types.py): kept in memory, written
        # to the store at most once a minute per broker, never once per event.
        self._observe = observe

    # ---- HTTP ---------------------------------------------------------------------------------

    def handle_http(
        self, method: str, namespace: str, broker: str, headers: Mapping[str, str], body: bytes
    ) -> HttpResult:
        try:
            return self._handle_http(method, namespace, broker, headers, body)
        finally:
            self._metrics.flush()

    def _handle_http(
        self, method: str, namespace: str, broker: str, headers: Mapping[str, str], body: bytes
    ) -> HttpResult:
        started = time.perf_counter()
        method = method.upper()
        if method == "OPTIONS":
            return HttpResult(
                200,
                {"Allow": ALLOW, "WebHook-Allowed-Origin": "*", "WebHook-Allowed-Rate": "*"},
            )
        if method != "POST":
            return self._problem(
                namespace,
                broker,
                MethodNotAllowedError(f"{method} is not allowed here; send events with POST"),
                "method_not_allowed",
            )
        path_problems = names.name_problems(namespace, "path.namespace", what="namespace") + (
            names.name_problems(broker, "path.broker", what="broker")
        )
        if path_problems:
            return self._problem(namespace, broker, ValidationError(path_problems), "bad_path")
        try:
            config = self._cache.get(namespace, broker)
        except BrokerError as exc:
            return self._problem(namespace, broker, exc, "unavailable")
        limit = config.max_event_bytes if config else DEFAULT_MAX_EVENT_BYTES
        if len(body) > limit:
            return self._problem(
                namespace,
                broker,
                PayloadTooLargeError(
                    f"the event is {len(body)} bytes; this broker accepts {limit}"
                ),
                "too_large",
            )
        try:
            events = codec.decode_http(
                headers,
                body,
                legacy=bool(config and config.legacy),
                limits=codec.Limits(max_body_bytes=limit),
            )
        except PayloadTooLargeError as exc:
            return self._problem(namespace, broker, exc, "too_large")
        except ValidationError as exc:
            return self._problem(namespace, broker, exc, "invalid_event")
        if config is None:
            return self._problem(
                namespace,
                broker,
                NotFoundError(f'broker "{namespace}/{broker}" does not exist'),
                "unknown_broker",
                events,
            )
        if config.auth == "token" and not tokens.verify(
            tokens.bearer(headers.get("authorization")) or "", config.token_hashes
        ):
            return self._problem(
                namespace,
                broker,
                UnauthorizedError(
                    "this broker requires a bearer token (Authorization: Bearer ...)"
                ),
                "unauthorized",
                events,
                {"WWW-Authenticate": 'Bearer realm="broker"'},
            )
        try:
            self.ingest(config, events, passthrough_headers(headers))
        except TtlExceededError as exc:
            return self._problem(namespace, broker, exc, "ttl_exceeded", events)
        except UnavailableError as exc:
            return self._problem(namespace, broker, exc, "unavailable", events)
        except ValidationError as exc:
            return self._problem(namespace, broker, exc, "invalid_event", events)
        dims = {"namespace": namespace, "broker": broker, "response_code_class": "2xx"}
        self._metrics.count("event_count", dims, len(events) or 1)
        self._metrics.latency(
            "event_dispatch_latency_ms",
            {"namespace": namespace, "broker": broker},
            (time.perf_counter() - started) * 1000,
        )
        return HttpResult(202, {"Allow": ALLOW})

    # ---- the shared path (HTTP, replies, Kafka) ------------------------------------------------

    def ingest(
        self, config: BrokerConfig, events: Sequence[CloudEvent], headers: Mapping[str, str]
    ) -> None:
        """Store every event in the queue of every matching ready trigger, or raise."""
        now = self._clock()
        arrival = archive.rfc3339(now)
        prepared = [self._prepare(e, arrival) for e in events]
        per_queue: dict[str, list[str]] = {}
        records: list[bytes] = []
        claimed: dict[int, ClaimCheck] = {}
        for i, event in enumerate(prepared):
            routes: list[Route] = config.index.match(event)
            event_json = codec.to_json(event)
            try:
                # Sizes the event, and refuses what no JSON encoder can write back (a number that
                # overflowed a double): such an event could be accepted but never delivered.
                size = len(dumps_utf8(event_json))
            except ValueError as exc:
                where = f"[{i}].data" if len(prepared) > 1 else "data"
                raise ValidationError([Problem(where, f"cannot be re-encoded: {exc}")]) from None
            for route in routes:
                body = self._claims.message_body(
                    config.namespace, config.name, route.name, event, headers, claimed
                )
                per_queue.setdefault(route.queue, []).append(body)
            dataref = None
            if size > INLINE_LIMIT:  # archived by reference, as it travels (DESIGN.md §12)
                dataref = address(self._claims.claim(config.namespace, config.name, event, claimed))
            record = archive.accepted_record(
                config.namespace,
                config.name,
                event_json,
                [r.name for r in routes],
                size,
                now,
                dataref,
            )
            records.append(archive.encode_line(record))
        gone = False
        for queue, bodies in per_queue.items():
            try:
                self._send_all(queue, bodies)
            except NotFoundError:
                # A missing queue means its trigger was deleted after this container cached the
                # broker's routes: the trigger is gone, not the broker. Its events are dropped
                # (as after any trigger delete) and the others are stored and answered 202.
                self._log(f"queue {queue} is gone: its trigger was deleted; routes reloaded")
                gone = True
        if gone:
            self._cache.invalidate(config.namespace, config.name)
        self._archive_quietly(records)
        if self._observe is not None:
            self._observe(config.namespace, config.name, prepared)

    def _prepare(self, event: CloudEvent, arrival: str) -> CloudEvent:
        raw = event.get(TTL_ATTRIBUTE)
        if raw is None:
            ttl = DEFAULT_TTL
        else:
            try:
                ttl = int(str(raw)) - 1
            except ValueError:
                raise ValidationError(
                    [Problem(TTL_ATTRIBUTE, f"must be an integer, got {raw!r}")]
                ) from None
            if ttl <= 0:
                raise TtlExceededError(
                    [Problem(TTL_ATTRIBUTE, "the event has been through too many replies (loop?)")]
                )
        return event.replace_attributes({TTL_ATTRIBUTE: ttl, ARRIVAL_ATTRIBUTE: arrival})

    def _send_all(self, queue: str, bodies: list[str]) -> None:
        for batch in _batches(bodies):
            pending = {str(i): b for i, b in enumerate(batch)}
            for _ in range(SEND_ATTEMPTS):
                try:
                    failed = self._queues.send_batch(
                        queue, [OutgoingMessage(i, b) for i, b in pending.items()]
                    )
                except UnavailableError:
                    failed = list(pending)
                pending = {i: pending[i] for i in failed}
                if not pending:
                    break
            if pending:
                raise UnavailableError(
                    f"could not store {len(pending)} event(s) in queue {queue}; retry the request"
                )

    def _archive_quietly(self, records: list[bytes]) -> None:
        # The archive feeds analytics; an outage there must not refuse events already stored.
        # The archiver retries, then counts and logs what it could not write.
        self._archiver.write(records)

    # ---- answers ------------------------------------------------------------------------------

    def _problem(
        self,
        namespace: str,
        broker: str,
        exc: BrokerError,
        reason: str,
        events: Sequence[CloudEvent] = (),
        extra: Mapping[str, str] | None = None,
    ) -> HttpResult:
        status = status_of(exc)
        headers = {"Content-Type": PROBLEM_TYPE, "Allow": ALLOW, **(extra or {})}
        self._record_rejection(namespace, broker, status, reason, exc.detail, events)
        return HttpResult(status, headers, json.dumps(problem_of(exc)).encode())

    def _record_rejection(
        self,
        namespace: str,
        broker: str,
        status: int,
        reason: str,
        detail: str,
        events: Sequence[CloudEvent],
    ) -> None:
        self._metrics.count(
            "event_count",
            {"namespace": namespace, "broker": broker, "response_code_class": status_class(status)},
        )
        first = events[0] if events else None
        record = archive.rejected_record(
            namespace,
            broker,
            status,
            reason,
            detail,
            self._clock(),
            event_type=first.type if first else None,
            event_source=first.source if first else None,
        )
        self._archive_quietly([archive.encode_line(record)])


def _batches(bodies: list[str]) -> list[list[str]]:
    """≤ 10 entries and ≤ 256 KiB per SendMessageBatch call."""
    batches: list[list[str]] = []
    current: list[str] = []
    size = 0
    for body in bodies:
        n = len(body.encode())
        if current and (len(current) == 10 or size + n > SQS_MAX_BYTES):
            batches.append(current)
            current, size = [], 0
        current.append(body)
        size += n
    if current:
        batches.append(current)
    return batches
