"""Ingress: decode a request's events, then store each in the queue of every matching ready
trigger (design.md §2.1). Nothing is accepted before it is stored; the producer retries a refusal
(duplicates are allowed, loss is not)."""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from operator import itemgetter
from typing import Concatenate, ParamSpec, TypeVar

from chalicelib.core import archive, authorization, names, senders, tokens
from chalicelib.core.clock import utcnow
from chalicelib.core.cloudevents import codec
from chalicelib.core.cloudevents.event import CloudEvent
from chalicelib.core.cloudevents.json_format import dumps_utf8
from chalicelib.core.cloudevents.sqs_message import (
    ClaimCheck,
    call_chunks,
    passthrough_headers,
    utf8_size,
)
from chalicelib.core.delivery import ordering
from chalicelib.core.errors import (
    BrokerError,
    CallTooLargeError,
    ForbiddenError,
    NotFoundError,
    PayloadTooLargeError,
    Problem,
    UnauthorizedError,
    UnavailableError,
    ValidationError,
)
from chalicelib.core.filtering import event_pattern
from chalicelib.core.resources.broker import DEFAULT_MAX_EVENT_BYTES
from chalicelib.ports import Archive, OutgoingMessage, QueueSender, SeenEvents
from chalicelib.problems import status_of
from chalicelib.services.archiver import Archiver
from chalicelib.services.claims import INLINE_LIMIT, SQS_MAX_BYTES, Claims, address
from chalicelib.services.dedup import HOLD_SECONDS, Dedup
from chalicelib.services.metrics import Metrics, status_class
from chalicelib.services.routing import BrokerConfig, ConfigCache, Route

log = logging.getLogger(__name__)

TTL_ATTRIBUTE = "knativebrokerttl"
ARRIVAL_ATTRIBUTE = "knativearrivaltime"
DEFAULT_TTL = 255
SEND_ATTEMPTS = 3
P = ParamSpec("P")
T = TypeVar("T")


@dataclass(frozen=True)
class Accepted:
    """A request whose events are all stored: their ids, in the request's order."""

    ids: tuple[str, ...]


class TtlExceededError(ValidationError):
    title = "Event TTL exceeded"


def _flushing_metrics(
    method: Callable[Concatenate[Ingress, P], T],
) -> Callable[Concatenate[Ingress, P], T]:
    """An answer's measurements are emitted with it, however the call ends."""

    @functools.wraps(method)
    def flushing(self: Ingress, /, *args: P.args, **kwargs: P.kwargs) -> T:
        try:
            return method(self, *args, **kwargs)
        finally:
            self._metrics.flush()

    return flushing


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
        archive_carry_seconds: float = 0.0,
        seen: SeenEvents | None = None,
        dedup_hold_seconds: float = HOLD_SECONDS,
        authorization_mode: str = senders.ALLOW_SAME_NAMESPACE,
    ) -> None:
        self._cache = cache
        self._queues = queues
        self._claims = claims
        self._archiver = Archiver(
            archive_sink,
            metrics,
            "ingress",
            batch_seconds=archive_batch_seconds,
            carry_seconds=archive_carry_seconds,
        )
        self._metrics = metrics
        self._clock = clock
        self._log = log or (lambda line: None)
        # Deduplication (brokers with a dedup window; docs/dedup.md).
        self._dedup = Dedup(seen, metrics, self._log, dedup_hold_seconds)
        # The registry's sample of event types (services/event_types.py): kept in memory, written
        # to the store at most once a minute per broker, never once per event.
        self._observe = observe
        # Who may send when no EventPolicy applies to a guarded broker (docs/security.md).
        self._mode = authorization_mode

    # ---- a producer's request -----------------------------------------------------------------

    @_flushing_metrics
    def accept(
        self,
        namespace: str,
        broker: str,
        headers: Mapping[str, str],
        body: bytes,
        principal: str | None = None,
    ) -> Accepted:
        """Store the events of one request (headers with lower-case names, the body's bytes), or
        raise the BrokerError that refuses it, after recording the refusal. ``principal``: the
        IAM principal's ARN when AWS authenticated the request (an AWS_IAM Function URL)."""
        started = time.perf_counter()
        path_problems = names.name_problems(namespace, "path.namespace", what="namespace") + (
            names.name_problems(broker, "path.broker", what="broker")
        )
        if path_problems:
            raise self.refuse(namespace, broker, "bad_path", ValidationError(path_problems))
        try:
            config = self._cache.get(namespace, broker)
        except BrokerError as exc:
            raise self.refuse(namespace, broker, "unavailable", exc) from None
        limit = config.max_event_bytes if config else DEFAULT_MAX_EVENT_BYTES
        if len(body) > limit:
            too_large = PayloadTooLargeError(
                f"the event is {len(body)} bytes; this broker accepts {limit}"
            )
            raise self.refuse(namespace, broker, "too_large", too_large)
        try:
            events = codec.decode_http(
                headers,
                body,
                legacy=bool(config and config.legacy),
                limits=codec.Limits(max_body_bytes=limit),
            )
        except PayloadTooLargeError as exc:
            raise self.refuse(namespace, broker, "too_large", exc) from None
        except ValidationError as exc:
            raise self.refuse(namespace, broker, "invalid_event", exc) from None
        if config is None:
            unknown = NotFoundError(f'broker "{namespace}/{broker}" does not exist')
            raise self.refuse(namespace, broker, "unknown_broker", unknown, events)
        sender = None
        if authorization.guarded(config.policies, config.auth):
            try:
                sender = _sender(config, headers, principal)
            except UnauthorizedError as exc:
                raise self.refuse(namespace, broker, "unauthorized", exc, events) from None
        try:
            self.ingest(config, events, passthrough_headers(headers), sender)
        except ForbiddenError as exc:
            raise self.refuse(namespace, broker, "unauthorized", exc, events) from None
        except TtlExceededError as exc:
            raise self.refuse(namespace, broker, "ttl_exceeded", exc, events) from None
        except UnavailableError as exc:
            raise self.refuse(namespace, broker, "unavailable", exc, events) from None
        except ValidationError as exc:
            raise self.refuse(namespace, broker, "invalid_event", exc, events) from None
        dims = {"namespace": namespace, "broker": broker, "response_code_class": "2xx"}
        self._metrics.count("event_count", dims, len(events) or 1)
        self._metrics.latency(
            "event_dispatch_latency_ms",
            {"namespace": namespace, "broker": broker},
            (time.perf_counter() - started) * 1000,
        )
        return Accepted(tuple(e.id for e in events))

    # ---- the shared path (HTTP, replies, Kafka) ------------------------------------------------

    def ingest(
        self,
        config: BrokerConfig,
        events: Sequence[CloudEvent],
        headers: Mapping[str, str],
        sender: str | None = None,
    ) -> None:
        """Store every event in the queue of every matching ready trigger, or raise. With a dedup
        window, a (source, id) the broker accepted within it is dropped (docs/dedup.md).
        ``sender`` is who the events come from (core/senders.py; None: anonymous), the identity
        the broker's EventPolicies admit or refuse (docs/security.md): ForbiddenError, nothing
        stored, when they refuse."""
        if authorization.guarded(config.policies, config.auth):
            decision = authorization.decide(
                config.policies, self._mode, config.namespace, config.name, sender, events
            )
            if not decision.allowed:
                raise decision.error()
        now = self._clock()
        arrival = archive.rfc3339(now)
        prepared = [self._prepare(e, arrival) for e in events]
        window = config.broker.dedup_window_seconds
        if window is None or not prepared:
            self._store(config, prepared, headers, now)
            return
        claimed = self._dedup.claim(config, prepared, now)
        try:
            self._store(config, claimed.kept, headers, now, claimed.duplicates)
        except BaseException:
            # Not stored, so not accepted: the producer's retry must find the keys free again.
            self._dedup.release(config, claimed.keys)
            raise
        self._dedup.confirm(config, claimed.keys, now.timestamp() + window)
        if claimed.duplicates:
            dims = {"namespace": config.namespace, "broker": config.name}
            self._metrics.count("duplicate_count", dims, len(claimed.duplicates))
        if claimed.held:  # the rest is stored; these are not, yet: never a 202 for them
            raise claimed.in_flight(_scope(config))

    def _store(
        self,
        config: BrokerConfig,
        prepared: list[CloudEvent],
        headers: Mapping[str, str],
        now: datetime,
        extra_records: Sequence[bytes] = (),
    ) -> None:
        per_queue: dict[str, list[tuple[str, str | None]]] = {}  # (body, FIFO group)
        records: list[bytes] = []
        claimed: dict[int, ClaimCheck] = {}
        overran = 0  # events whose eventPattern matching ran out of its work budget
        for i, event in enumerate(prepared):
            routes: list[Route] = config.index.match(event)
            overran += event_pattern.over_budget(event)
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
                group = ordering.group_for(
                    names.is_fifo(route.queue), event.get(ordering.PARTITION_KEY)
                )
                per_queue.setdefault(route.queue, []).append((body, group))
            dataref = None
            if size > INLINE_LIMIT:  # archived by reference, as it travels (design.md §12)
                kept = self._claims.archived(config.namespace, config.name, event, claimed)
                dataref = address(kept)
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
                self.send_all(queue, bodies)
            except NotFoundError:
                # A missing queue means its trigger was deleted after this container cached the
                # broker's routes: the trigger is gone, not the broker. Its events are dropped
                # (as after any trigger delete) and the others are stored and answered 202.
                self._log(f"queue {queue} is gone: its trigger was deleted; routes reloaded")
                gone = True
        if gone:
            self._cache.invalidate(config.namespace, config.name)
        if overran:
            dims = {"namespace": config.namespace, "broker": config.name}
            self._metrics.count("pattern_budget_exceeded_count", dims, overran)
        # The archive feeds analytics; an outage there must not refuse events already stored:
        # the archiver retries, then counts and logs what it could not write.
        self._archiver.write([*records, *extra_records])
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

    def send_all(self, queue: str, items: list[tuple[str, str | None]]) -> None:
        """What ingress does with one queue's messages (body, FIFO group), for replays
        (services/replays.py): the same batches, deduplication ids, retries, and
        UnavailableError when some could not be stored."""
        send_in_batches(self._queues, queue, items)

    # ---- refusals -----------------------------------------------------------------------------

    @_flushing_metrics
    def refuse(
        self,
        namespace: str,
        broker: str,
        reason: str,
        error: BrokerError,
        events: Sequence[CloudEvent] = (),
    ) -> BrokerError:
        """Record a refusal (``accept``'s own, a method other than POST, a reply the broker's
        policies refuse), and return ``error`` to answer it with."""
        # The metric and the archive name the status the producer is answered with (Knative's
        # response_code_class), so they ask the one error-to-HTTP mapping for it.
        status = status_of(error)
        self._metrics.count(
            "event_count",
            {"namespace": namespace, "broker": broker, "response_code_class": status_class(status)},
        )
        if reason == "unauthorized":  # no identity (401), or one the broker refuses (403)
            dims = {"namespace": namespace, "broker": broker}
            self._metrics.count("unauthorized_count", dims, len(events) or 1)
        first = events[0] if events else None
        record = archive.rejected_record(
            namespace,
            broker,
            status,
            reason,
            error.detail,
            self._clock(),
            event_type=first.type if first else None,
            event_source=first.source if first else None,
        )
        self._archiver.write([archive.encode_line(record)])
        return error


def _sender(config: BrokerConfig, headers: Mapping[str, str], principal: str | None) -> str | None:
    """Who sends to a guarded broker: the broker's ingress token the request carries, else the
    IAM principal AWS authenticated, else nobody (anonymous; then the policies decide). A bearer
    token that is not one of the broker's, or no identity where ``ingress-auth: token`` needs
    one, is UnauthorizedError (401)."""
    presented = tokens.bearer(headers.get("authorization"))
    if presented is not None:
        token_id = tokens.match(presented, config.tokens)
        if token_id is None:
            raise UnauthorizedError(f"the bearer token is not one of {_scope(config)}'s tokens")
        return senders.token(config.namespace, token_id)
    if principal:
        return principal
    if config.auth == "token":
        raise UnauthorizedError("this broker requires a bearer token (Authorization: Bearer ...)")
    return None


def _scope(config: BrokerConfig) -> str:
    return f"{config.namespace}/{config.name}"


def send_in_batches(
    queues: QueueSender,
    queue: str,
    items: list[tuple[str, str | None]],
    max_bytes: int = SQS_MAX_BYTES,
) -> None:
    """Send in order, batch after batch (on a FIFO queue, the order of a group), each call of at
    most 10 entries and ``max_bytes``. A retried entry keeps its deduplication id, so SQS FIFO
    keeps one copy if the first try landed. A call over ``SQS_MAX_BYTES`` that the queue refuses
    as too long (a precaution: an endpoint or queue still at the former 256 KiB) is split into
    calls of at most that.
    UnavailableError when some could not be stored. Ingress sends through SharedSends (256 KiB
    calls); the replay runner calls this over the queues themselves (1 MiB calls of packs), its
    own calls in flight side by side."""
    batches = call_chunks(items, _BODY, max_bytes)
    while batches:
        batch = batches.pop(0)
        pending = {
            str(i): OutgoingMessage(
                str(i),
                body,
                group_id=group,
                dedup_id=None if group is None else ordering.body_dedup_id(body),
            )
            for i, (body, group) in enumerate(batch)
        }
        for _ in range(SEND_ATTEMPTS):
            try:
                failed = queues.send_batch(queue, list(pending.values()))
            except CallTooLargeError:
                size = sum(utf8_size(body) for body, _ in batch)
                if len(pending) == len(batch) > 1 and size > SQS_MAX_BYTES:
                    log.info("queue %s refused a call of %d bytes: split", queue, size)
                    batches[:0] = call_chunks(batch, _BODY, SQS_MAX_BYTES)
                    break
                failed = list(pending)
            except UnavailableError:
                failed = list(pending)
            pending = {i: pending[i] for i in failed}
            if not pending:
                break
        else:
            raise UnavailableError(
                f"could not store {len(pending)} event(s) in queue {queue}; retry the request"
            )


_BODY = itemgetter(0)  # of an item (body, FIFO group)
