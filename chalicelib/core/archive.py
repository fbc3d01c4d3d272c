"""Archive records, schema v1 (design.md §3): what ingress and delivery send to Firehose, and so
what the metrics job reads. ``tests/unit/test_archive.py`` holds each builder to the reader's
fields in ``spark_glue/schema.py``: change the shape only with a version bump."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Final

from chalicelib.core import clock
from chalicelib.core.cloudevents.json_format import dumps_utf8
from chalicelib.core.delivery.outcomes import Outcome
from chalicelib.core.errors import UnavailableError

SCHEMA_VERSION: Final = 1

KINDS: Final = ("accepted", "rejected", "delivery", "duplicate")
REJECT_REASONS: Final = (
    "invalid_event",
    "unknown_broker",
    "too_large",
    "unauthorized",
    "bad_path",
    "method_not_allowed",
    "ttl_exceeded",
    "unavailable",
)
# ``reply`` is a successful delivery whose answer was a CloudEvent (re-ingested into the broker).
OUTCOMES: Final = tuple(outcome.value for outcome in Outcome)

_MAX_DETAIL = 200

Record = dict[str, Any]


class PartlyWrittenError(UnavailableError):
    """An archive write that wrote some records and not ``unwritten``: only those are tried
    again (trying the whole list again would write the others twice)."""

    def __init__(self, detail: str, unwritten: Sequence[bytes]) -> None:
        super().__init__(detail)
        self.unwritten = list(unwritten)


def rfc3339(at: datetime) -> str:
    """UTC, millisecond precision, ``Z``: sortable as text and parsed by Spark and DuckDB alike."""
    return clock.rfc3339(at, "milliseconds")


def accepted_record(
    namespace: str,
    broker: str,
    event_json: Mapping[str, Any],
    triggers: list[str],
    size: int,
    at: datetime,
    dataref: str | None = None,
) -> Record:
    """An event stored for delivery; ``event_json`` is the event in the CloudEvents JSON format
    (with ``knativearrivaltime``), ``triggers`` the matched trigger names (empty: no match).

    A large event (one that travels by claim check) is archived by reference: ``dataref`` is the
    ``s3://`` address of the whole event in the JSON format, and ``event`` keeps its attributes
    only, so that the record stays under Firehose's 1,000 KiB (schema v1: ``dataref`` is an
    optional field, absent for events archived whole)."""
    for name in ("specversion", "id", "source", "type"):
        if not isinstance(event_json.get(name), str) or not event_json[name]:
            raise ValueError(f"event_json.{name} must be a non-empty string")
    if size < 0:
        raise ValueError("size must be >= 0")
    record = {
        **_common("accepted", namespace, broker, at),
        "event": dict(event_json),
        "triggers": list(triggers),
        "size": int(size),
    }
    if dataref is not None:
        attributes, cut = _referenced_attributes(event_json)
        record["event"] = attributes
        record["dataref"] = dataref
        if cut:  # the whole values are in the referenced event
            record["truncated"] = cut
    return record


_DATA_MEMBERS = ("data", "data_base64")
_REQUIRED = ("specversion", "id", "source", "type")
# Firehose's limit on one record. A record built here never exceeds it: an event archived whole
# is under the claim-check threshold (~255 KiB), and one archived by reference keeps attributes
# within MAX_REFERENCED_EVENT_BYTES.
MAX_RECORD_BYTES: Final = 1000 * 1024
# An event archived by reference keeps attribute values up to this length in its record (a 2 MB
# source would otherwise still overflow Firehose's record limit); the whole event is at dataref.
MAX_REFERENCED_ATTRIBUTE_CHARS: Final = 4096
# ... and its attributes up to this many bytes in all, as JSON: a 4 MiB event may carry a thousand
# extensions of 4,000 characters each, or names of a megabyte (nothing else bounds their length).
MAX_REFERENCED_EVENT_BYTES: Final = 128 * 1024
MAX_TRUNCATED_NAMES_BYTES: Final = 32 * 1024  # the names in ``truncated``
_MAX_BYTES_PER_CHAR = 6  # a control character escaped as \u001f


def _referenced_attributes(event_json: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The attributes of an event archived by reference, within MAX_REFERENCED_EVENT_BYTES: the
    required ones first, then the others shortest first (the broker's own among them); values
    over MAX_REFERENCED_ATTRIBUTE_CHARS cut, values cut further or attributes left out once the
    budget is spent. And the names of those cut or left out, within MAX_TRUNCATED_NAMES_BYTES."""
    others = [n for n in event_json if n not in _REQUIRED and n not in _DATA_MEMBERS]
    others.sort(key=lambda n: len(n) + len(str(event_json[n])))
    attributes: dict[str, Any] = {}
    cut: list[str] = []
    left, names_left = MAX_REFERENCED_EVENT_BYTES - 2, MAX_TRUNCATED_NAMES_BYTES  # 2: braces
    for name in [n for n in _REQUIRED if n in event_json] + others:
        whole = value = event_json[name]
        name_bytes = len(dumps_utf8(name)) + 2  # its quotes, then a colon or a comma
        if isinstance(value, str):
            value = value[:MAX_REFERENCED_ATTRIBUTE_CHARS]
            room = left - name_bytes - 2
            if len(dumps_utf8(value)) > room:
                value = value[: max(0, room // _MAX_BYTES_PER_CHAR)]
        size = name_bytes + len(dumps_utf8(value))
        if size <= left:
            attributes[name] = value
            left -= size
        if (name not in attributes or value != whole) and name_bytes <= names_left:
            cut.append(name)
            names_left -= name_bytes
    return attributes, cut


def rejected_record(
    namespace: str,
    broker: str,
    status: int,
    reason: str,
    detail: str,
    at: datetime,
    event_type: str | None = None,
    event_source: str | None = None,
) -> Record:
    """A request refused at ingress. ``detail`` is a short human text that must never carry event
    data (it is cut to 200 characters as a guard)."""
    if reason not in REJECT_REASONS:
        raise ValueError(f"unknown reject reason {reason!r}")
    if not 400 <= status <= 599:
        raise ValueError("a rejection status is 4xx or 5xx")
    return {
        **_common("rejected", namespace, broker, at),
        "status": int(status),
        "reason": reason,
        "detail": detail[:_MAX_DETAIL],
        "event_type": event_type,
        "event_source": event_source,
    }


def delivery_record(
    namespace: str,
    broker: str,
    trigger: str,
    event_id: str,
    event_type: str,
    event_source: str,
    arrival: str | datetime,
    attempt: int,
    status: int | None,
    outcome: str,
    latency_ms: float,
    at: datetime,
) -> Record:
    """One delivery attempt (1-based); ``status`` None means a transport error or a timeout;
    ``arrival`` is the event's ``knativearrivaltime``."""
    if outcome not in OUTCOMES:
        raise ValueError(f"unknown delivery outcome {outcome!r}")
    if attempt < 1:
        raise ValueError("attempt is 1-based")
    return {  # _common's fields spelt out: one of these is built per delivery attempt
        "v": SCHEMA_VERSION,
        "kind": "delivery",
        "at": rfc3339(at),
        "namespace": namespace,
        "broker": broker,
        "trigger": trigger,
        "event_id": event_id,
        "event_type": event_type,
        "event_source": event_source,
        "arrival": rfc3339(arrival) if isinstance(arrival, datetime) else arrival,
        "attempt": int(attempt),
        "status": None if status is None else int(status),
        "outcome": outcome,
        "latency_ms": float(latency_ms),
    }


def duplicate_record(
    namespace: str,
    broker: str,
    event_id: str,
    event_type: str,
    event_source: str,
    at: datetime,
) -> Record:
    """An event answered 202 but stored nowhere: its (source, id) was accepted by this broker
    within its dedup window (docs/dedup.md). A kind of schema v1 added in the second wave; readers
    that predate it count it malformed (``kind: unknown``) and skip it."""
    return {
        **_common("duplicate", namespace, broker, at),
        "event_id": event_id,
        "event_type": event_type,
        "event_source": event_source,
    }


def encode_line(record: Mapping[str, Any]) -> bytes:
    """One record as one newline-terminated line: Firehose concatenates what it is given, so the
    newline is what keeps records apart in the S3 object."""
    return dumps_utf8(record) + b"\n"


def encode_lines(records: Iterable[Mapping[str, Any]]) -> bytes:
    return b"".join(encode_line(r) for r in records)


def archive_key(at: datetime, suffix: str) -> str:
    """``archive/YYYY/MM/DD/HH/<suffix>``, the hour of ``at`` in UTC (Firehose's default prefix)."""
    if not suffix or suffix.startswith("/"):
        raise ValueError("suffix must be a non-empty relative name")
    rfc3339(at)  # the same timezone check
    return f"archive/{at.astimezone(UTC):%Y/%m/%d/%H}/{suffix}"


def _common(kind: str, namespace: str, broker: str, at: datetime) -> Record:
    return {
        "v": SCHEMA_VERSION,
        "kind": kind,
        "at": rfc3339(at),
        "namespace": namespace,
        "broker": broker,
    }
