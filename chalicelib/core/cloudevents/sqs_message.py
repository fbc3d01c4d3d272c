"""The SQS message between ingress and delivery: the one place that defines its shape.

    {"v": 1, "namespace": ..., "broker": ..., "trigger": ...,
     "event": <codec.to_json(event)>            (inline), or
     "claim": {"bucket": ..., "key": ..., "size": N}   (claim check: the event is in S3),
     "headers": {lower-case name: value}}       (pass-through headers, see ``passthrough_headers``)

An SQS message is at most 256 KiB; ``fits_inline`` tells the ingress when to use a claim check.
The claim-checked object holds ``encode_event_blob(event)`` (the same JSON form).
A new shape gets a new ``v``; ``decode_message`` refuses versions it does not know.

A **pack** (docs/replay.md) carries several inline events of one trigger in one message, so that
a replay sends many events per SQS message:

    {"v": 1, "namespace": ..., "broker": ..., "trigger": ..., "headers": {...},
     "pack": [<codec.to_json(event)>, ...]}  (1 to PACK_MAX_EVENTS events, PACK_MAX_BYTES at most)

Only the replay runner writes packs, only to standard queues; ``decode_messages`` reads either
shape. Two message attributes go with a single message that delivery sent back to its queue
(a retried event of a pack): ``ATTEMPTS_ATTRIBUTE``, the attempts already made, and
``NOT_BEFORE_ATTRIBUTE``, the epoch second before which it must not be tried (a backoff longer
than SQS's 900 s DelaySeconds).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from chalicelib.core.cloudevents.codec import from_json, to_json
from chalicelib.core.cloudevents.event import CloudEvent
from chalicelib.core.cloudevents.json_format import dumps_compact, dumps_utf8, parse_json
from chalicelib.core.errors import Problem, ValidationError

MESSAGE_VERSION = 1
SQS_MAX_MESSAGE_BYTES = 256 * 1024
# A SendMessageBatch call's whole payload: 1 MiB on SQS since August 2025 (and on moto and
# LocalStack); should an endpoint still refuse more than 256 KiB per call (the former limit), the
# replay runner's sends then split a refused call (``ingress.send_in_batches``).
SQS_MAX_BATCH_BYTES = 1024 * 1024
# A pack's bounds: ten of them fit one SendMessageBatch call (1 MiB in all, with room for the
# entries' own overhead), each alone fits any queue's 256 KiB; a Lambda batch of ten packs is
# at most 500 deliveries, whatever their size.
PACK_MAX_BYTES = 96 * 1024
PACK_MAX_EVENTS = 50
ATTEMPTS_ATTRIBUTE = "sb-attempts"
NOT_BEFORE_ATTRIBUTE = "sb-not-before"
_MAX_ATTRIBUTE_DIGITS = 12

_PASSTHROUGH_EXACT = frozenset({"x-request-id", "retry-after", "traceparent", "tracestate"})
_PASSTHROUGH_PREFIXES = ("knative-", "x-b3-")
# SQS accepts only XML 1.0 characters; JSON escapes the C0 controls but not these.
_NOT_XML_CHAR = re.compile("[\ud800-\udfff\ufffe\uffff]")


@dataclass(frozen=True)
class ClaimCheck:
    bucket: str
    key: str
    size: int


@dataclass(slots=True)
class QueuedEvent:
    """One event queued for one trigger; exactly one of ``event`` and ``claim`` is set. Treat it
    as a value: not frozen only because one is built for every delivery attempt, and a frozen
    dataclass costs three times as much to build."""

    namespace: str
    broker: str
    trigger: str
    event: CloudEvent | None
    claim: ClaimCheck | None
    headers: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if (self.event is None) == (self.claim is None):
            raise ValueError("a QueuedEvent holds exactly one of event and claim")


def passthrough_headers(headers: Mapping[str, str]) -> dict[str, str]:
    """The request headers the broker forwards to subscribers (Knative ``PassThroughHeaders``:
    ``knative-*``, ``x-b3-*``, ``x-request-id``, ``retry-after``; plus W3C ``traceparent`` and
    ``tracestate``), with lower-case names. ``ce-*`` headers are not copied: they are the event."""
    out: dict[str, str] = {}
    for name, value in headers.items():
        key = name.lower()
        if key in _PASSTHROUGH_EXACT or key.startswith(_PASSTHROUGH_PREFIXES):
            out[key] = value
    return out


def encode_message(q: QueuedEvent) -> str:
    doc: dict[str, Any] = {
        "v": MESSAGE_VERSION,
        "namespace": q.namespace,
        "broker": q.broker,
        "trigger": q.trigger,
    }
    if q.event is not None:
        doc["event"] = to_json(q.event)
    if q.claim is not None:
        doc["claim"] = {"bucket": q.claim.bucket, "key": q.claim.key, "size": q.claim.size}
    doc["headers"] = dict(q.headers)
    text = dumps_compact(doc)
    if not text.isascii() and _NOT_XML_CHAR.search(text) is not None:
        text = json.dumps(doc, separators=(",", ":"))  # \u-escape everything outside ASCII
    return text


def encoded_size(q: QueuedEvent) -> int:
    """Bytes of ``encode_message(q)`` as SQS counts them (UTF-8)."""
    return len(encode_message(q).encode("utf-8"))


def fits_inline(q: QueuedEvent, limit: int = SQS_MAX_MESSAGE_BYTES) -> bool:
    return encoded_size(q) <= limit


def decode_message(body: str) -> QueuedEvent:
    """Parse a message; ``ValidationError`` on an unknown version or any malformed part (a pack
    is refused: see ``decode_messages``).

    The event inside was validated by the ingress before it was queued: its required attributes
    are checked again, not every attribute's syntax."""
    doc = _parse(body)
    if "pack" in doc:
        raise ValidationError([Problem("pack", "a pack where one event was expected")])
    return _decode_doc(doc)


def decode_messages(body: str) -> tuple[list[QueuedEvent], bool]:
    """The events of a message, single or pack, and whether it was a pack. ``ValidationError``
    when any part is malformed: a pack with a bad entry, or more entries than ``PACK_MAX_EVENTS``,
    is refused whole, as one unreadable message."""
    doc = _parse(body)
    if "pack" not in doc:
        return [_decode_doc(doc)], False
    if len(body) > SQS_MAX_MESSAGE_BYTES:
        raise ValidationError([Problem("message", "a pack larger than an SQS message")])
    entries = doc.pop("pack")
    if type(entries) is not list or not 1 <= len(entries) <= PACK_MAX_EVENTS:
        raise ValidationError([Problem("pack", f"must be a list of 1 to {PACK_MAX_EVENTS} events")])
    if "event" in doc or "claim" in doc:
        raise ValidationError([Problem("pack", "a pack holds neither event nor claim")])
    first = _decode_doc({**doc, "event": entries[0]}, "pack[0]")
    out = [first]
    for i in range(1, len(entries)):
        entry = entries[i]
        if type(entry) is not dict:
            raise ValidationError([Problem(f"pack[{i}]", "must be a JSON object")])
        out.append(
            QueuedEvent(
                first.namespace,
                first.broker,
                first.trigger,
                _entry_event(entry, f"pack[{i}]"),
                None,
                first.headers,
            )
        )
    return out, True


@dataclass(frozen=True, slots=True)
class BadEntry:
    """An unreadable event of a pack whose envelope is sound: ``body`` is it alone, as a single
    message (unreadable there too: kept for inspection), ``why`` the problems."""

    index: int
    body: str
    why: str


def split_pack(body: str) -> tuple[list[QueuedEvent], list[BadEntry]]:
    """A pack that ``decode_messages`` refused because of some of its entries: the readable
    events, and each unreadable entry on its own. ValidationError when the message is not a pack
    or its envelope (version, names, headers, size, entry count) is unsound: then nothing in it
    can be trusted, and it stays whole."""
    doc = _parse(body)
    entries = doc.pop("pack", None)
    if entries is None:
        raise ValidationError([Problem("pack", "not a pack")])
    if len(body) > SQS_MAX_MESSAGE_BYTES:
        raise ValidationError([Problem("message", "a pack larger than an SQS message")])
    if type(entries) is not list or not 1 <= len(entries) <= PACK_MAX_EVENTS:
        raise ValidationError([Problem("pack", f"must be a list of 1 to {PACK_MAX_EVENTS} events")])
    if doc.get("v") != MESSAGE_VERSION or "event" in doc or "claim" in doc:
        raise ValidationError([Problem("pack", "not a pack of this message version")])
    problems: list[Problem] = []
    namespace, broker, trigger = (
        _text(doc, key, problems) for key in ("namespace", "broker", "trigger")
    )
    headers = doc.get("headers", {})
    if type(headers) is not dict or not all(
        type(k) is str and type(v) is str for k, v in headers.items()
    ):
        problems.append(Problem("headers", "must map header names to strings"))
    if problems:
        raise ValidationError(problems)
    good: list[QueuedEvent] = []
    bad: list[BadEntry] = []
    for i, entry in enumerate(entries):
        try:
            if type(entry) is not dict:
                raise ValidationError([Problem(f"pack[{i}]", "must be a JSON object")])
            event = _entry_event(dict(entry), f"pack[{i}]")  # a copy: decoding consumes it
        except ValidationError as exc:
            alone = dumps_compact({**doc, "event": entry})
            bad.append(BadEntry(i, alone, str(exc)))
        else:
            good.append(QueuedEvent(namespace, broker, trigger, event, None, headers))
    return good, bad


_T = TypeVar("_T")


def utf8_size(text: str) -> int:
    """The UTF-8 size of ``text``, without encoding it when it is ASCII (most event texts)."""
    return len(text) if text.isascii() else len(text.encode("utf-8"))


def call_chunks(
    items: Sequence[_T], body: Callable[[_T], str], max_bytes: int = SQS_MAX_MESSAGE_BYTES
) -> list[list[_T]]:
    """``items`` in order, in chunks that one SendMessageBatch call takes: at most 10 entries
    and ``max_bytes`` of bodies (one larger entry alone)."""
    out: list[list[_T]] = []
    size = 0
    for item in items:
        n = utf8_size(body(item))
        if not out or len(out[-1]) == 10 or size + n > max_bytes:
            out.append([])
            size = 0
        out[-1].append(item)
        size += n
    return out


def pack_fields(
    namespace: str, broker: str, trigger: str, headers: Mapping[str, str]
) -> dict[str, Any]:
    """A pack's fields besides its events: ``pack_head`` is their JSON, open for the events."""
    return {
        "v": MESSAGE_VERSION,
        "namespace": namespace,
        "broker": broker,
        "trigger": trigger,
        "headers": dict(headers),
    }


def pack_head(namespace: str, broker: str, trigger: str, headers: Mapping[str, str]) -> str:
    """The text a pack's events follow: ``pack_head(...) + ",".join(events) + "]}"``."""
    head = dumps_compact(pack_fields(namespace, broker, trigger, headers))
    return head[:-1] + ',"pack":['


def encode_pack(head: str, events: list[str]) -> str:
    """A pack from ``pack_head`` and the compact JSON texts of its events (``to_json`` form),
    which the caller keeps within the bounds (``pack_overhead``)."""
    if not 1 <= len(events) <= PACK_MAX_EVENTS:
        raise ValueError(f"a pack holds 1 to {PACK_MAX_EVENTS} events")
    text = head + ",".join(events) + "]}"
    if not text.isascii() and _NOT_XML_CHAR.search(text) is not None:
        text = json.dumps(json.loads(text), separators=(",", ":"))
    return text


def sqs_text(text: str) -> str:
    """A compact JSON text as an SQS body may hold it: unchanged, or (when it has a character
    SQS refuses) re-encoded with every non-ASCII character escaped. A packer measures each event
    after this, so that ``encode_pack`` never has to escape a whole pack past its bound."""
    if text.isascii() or _NOT_XML_CHAR.search(text) is None:
        return text
    return json.dumps(json.loads(text), separators=(",", ":"))


def pack_overhead(head: str) -> int:
    """UTF-8 bytes of a pack besides its events' texts and their separating commas."""
    return len(head.encode("utf-8")) + 2


def attempts_made(attributes: Mapping[str, Any]) -> int:
    """The attempts a message's ``ATTEMPTS_ATTRIBUTE`` says were made before it was sent (0 when
    absent or malformed), from Lambda's SQS record shape (``{"stringValue": "3", ...}``)."""
    return _number(attributes, ATTEMPTS_ATTRIBUTE)


def not_before(attributes: Mapping[str, Any]) -> int:
    """The epoch second in ``NOT_BEFORE_ATTRIBUTE`` (0 when absent or malformed)."""
    return _number(attributes, NOT_BEFORE_ATTRIBUTE)


def _number(attributes: Mapping[str, Any], name: str) -> int:
    value = attributes.get(name)
    text = value.get("stringValue") if isinstance(value, Mapping) else None
    if type(text) is not str or not text.isascii() or not text.isdigit():
        return 0
    if len(text) > _MAX_ATTRIBUTE_DIGITS:
        return 0
    return int(text)


def _parse(body: str) -> dict[str, Any]:
    try:
        doc = parse_json(body.encode("utf-8"))
    except ValueError as exc:
        raise ValidationError([Problem("message", str(exc))]) from None
    if type(doc) is not dict:
        raise ValidationError([Problem("message", "must be a JSON object")])
    return doc


def _entry_event(entry: dict[str, Any], where: str) -> CloudEvent:
    try:
        return from_json(entry, legacy=True, checked=False, owned=True)
    except ValidationError as exc:
        raise ValidationError(
            [Problem(f"{where}.{p.field}", p.message) for p in exc.problems]
        ) from None


def _decode_doc(doc: dict[str, Any], where: str = "event") -> QueuedEvent:
    if doc.get("v") != MESSAGE_VERSION:
        raise ValidationError([Problem("v", f"unknown message version {doc.get('v')!r}")])
    namespace, broker, trigger = doc.get("namespace"), doc.get("broker"), doc.get("trigger")
    headers = doc.get("headers", {})
    event_obj, claim_obj = doc.get("event"), doc.get("claim")
    if (
        type(namespace) is str
        and namespace
        and type(broker) is str
        and broker
        and type(trigger) is str
        and trigger
        and type(headers) is dict
        and type(event_obj) is dict
        and claim_obj is None
        and all(type(k) is str and type(v) is str for k, v in headers.items())
    ):  # the common shape: read it without collecting problems
        event = _entry_event(event_obj, where)
        return QueuedEvent(namespace, broker, trigger, event, None, headers)
    return _decode_with_problems(doc)


def _decode_with_problems(doc: dict[str, Any]) -> QueuedEvent:
    problems: list[Problem] = []
    names = [_text(doc, key, problems) for key in ("namespace", "broker", "trigger")]
    headers = doc.get("headers", {})
    if type(headers) is not dict or not all(
        type(k) is str and type(v) is str for k, v in headers.items()
    ):
        problems.append(Problem("headers", "must map header names to strings"))
    event = _event(doc.get("event"), problems)
    claim = _claim(doc.get("claim"), problems)
    if (event is None) == (claim is None) and not problems:
        problems.append(Problem("event", "exactly one of event and claim must be present"))
    if problems:
        raise ValidationError(problems)
    return QueuedEvent(names[0], names[1], names[2], event, claim, headers)


def encode_event_blob(event: CloudEvent) -> bytes:
    """The content of a claim-checked S3 object."""
    return dumps_utf8(to_json(event))


def decode_event_blob(blob: bytes) -> CloudEvent:
    try:
        obj = parse_json(blob)
    except ValueError as exc:
        raise ValidationError([Problem("event", str(exc))]) from None
    problems: list[Problem] = []
    event = _event(obj, problems)
    if event is None:
        raise ValidationError(problems or [Problem("event", "missing")])
    return event


def _text(doc: dict[str, Any], key: str, problems: list[Problem]) -> str:
    value = doc.get(key)
    if type(value) is not str or not value:
        problems.append(Problem(key, "must be a non-empty string"))
        return ""
    return value


def _event(obj: object, problems: list[Problem]) -> CloudEvent | None:
    if obj is None:
        return None
    if type(obj) is not dict:
        problems.append(Problem("event", "must be a JSON object"))
        return None
    try:
        # Queued events were accepted already, possibly by a broker that allows legacy versions.
        return from_json(obj, legacy=True, checked=False)
    except ValidationError as exc:
        problems.extend(Problem(f"event.{p.field}", p.message) for p in exc.problems)
        return None


def _claim(obj: object, problems: list[Problem]) -> ClaimCheck | None:
    if obj is None:
        return None
    if (
        type(obj) is not dict
        or type(obj.get("bucket")) is not str
        or type(obj.get("key")) is not str
        or type(obj.get("size")) is not int
        or obj["size"] < 0
    ):
        problems.append(Problem("claim", "needs bucket, key (strings) and size (integer >= 0)"))
        return None
    return ClaimCheck(obj["bucket"], obj["key"], obj["size"])
