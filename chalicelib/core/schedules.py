"""A schedule as the sources use it (services/schedules.py): a key, an expression (core/cron.py)
and a target, which is an event template and a sink. The deployed schedule's name, the input
Scheduler hands the ``pings`` function, and the event one firing makes. Pure.

The input carries everything a firing needs, so the function reads nothing else: the template and
sink, base64-encoded JSON (Scheduler substitutes ``<aws.scheduler.*>`` keywords anywhere in the
input text, and the user's data must reach the sink byte for byte), next to the one keyword we
want substituted, ``<aws.scheduler.scheduled-time>``.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from chalicelib.core.cloudevents.event import CloudEvent
from chalicelib.core.cron import Expression

SCHEDULED_TIME = "<aws.scheduler.scheduled-time>"  # Scheduler's context attribute
INPUT_VERSION = 1
MAX_NAME_LENGTH = 64  # Scheduler's schedule names: [0-9a-zA-Z-_.]{1,64}
_HASH_LENGTH = 16
_UNSAFE = re.compile(r"[^0-9A-Za-z_.-]")


@dataclass(frozen=True, slots=True)
class Sink:
    """Where a firing's event goes: a broker of the schedule's namespace (stored through
    ingress's own path), or a URI (POSTed in binary mode)."""

    namespace: str
    broker: str | None = None
    uri: str | None = None

    def __post_init__(self) -> None:
        if (self.broker is None) == (self.uri is None):
            raise ValueError("a sink is a broker or a uri")

    def to_json(self) -> dict[str, str]:
        if self.broker is not None:
            return {"namespace": self.namespace, "broker": self.broker}
        assert self.uri is not None
        return {"namespace": self.namespace, "uri": self.uri}

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> Sink:
        return cls(str(raw["namespace"]), raw.get("broker"), raw.get("uri"))


@dataclass(frozen=True, slots=True)
class EventTemplate:
    """The event without ``id`` and ``time``, which each firing sets."""

    attributes: Mapping[str, str]
    data: bytes | None = None

    def event(self, event_id: str, time: str) -> CloudEvent:
        attributes = {"specversion": "1.0", **self.attributes, "id": event_id, "time": time}
        return CloudEvent(attributes, data=self.data)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"attributes": dict(self.attributes)}
        if self.data is not None:
            out["data"] = base64.b64encode(self.data).decode("ascii")
        return out

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> EventTemplate:
        data = raw.get("data")
        attributes = {str(k): str(v) for k, v in dict(raw["attributes"]).items()}
        return cls(attributes, None if data is None else base64.b64decode(data, validate=True))


@dataclass(frozen=True, slots=True)
class Schedule:
    """``key``: unique per owner (``pingsource/{ns}/{name}``), names the deployed schedule.
    ``sender``: who the events come from (core/senders.py), for the broker's EventPolicies."""

    key: str
    expression: Expression
    template: EventTemplate
    sink: Sink
    sender: str | None = None

    def input(self) -> str:
        """The target's Input: what ``pings`` receives, with the scheduled time substituted."""
        target = {
            "key": self.key,
            "sink": self.sink.to_json(),
            "sender": self.sender,
            "event": self.template.to_json(),
        }
        packed = base64.b64encode(json.dumps(target, sort_keys=True).encode()).decode("ascii")
        return json.dumps({"v": INPUT_VERSION, "target": packed, "time": SCHEDULED_TIME})


@dataclass(frozen=True, slots=True)
class Firing:
    """One invocation of ``pings``: the schedule's target and the time it was due."""

    key: str
    sink: Sink
    sender: str | None
    template: EventTemplate
    time: str  # RFC 3339, as Scheduler substitutes it

    def event(self, event_id: str) -> CloudEvent:
        return self.template.event(event_id, self.time)


def read_firing(payload: object) -> Firing:
    """The firing a ``pings`` event describes; ValueError naming what is wrong."""
    if not isinstance(payload, Mapping) or payload.get("v") != INPUT_VERSION:
        raise ValueError(f"not a schedule input of version {INPUT_VERSION}")
    time = payload.get("time")
    if not isinstance(time, str) or not _is_time(time):
        raise ValueError(f"time {str(time)[:40]!r} is not an RFC 3339 time (substituted?)")
    try:
        target = json.loads(base64.b64decode(str(payload.get("target")), validate=True))
        return Firing(
            key=str(target["key"]),
            sink=Sink.from_json(target["sink"]),
            sender=None if target.get("sender") is None else str(target["sender"]),
            template=EventTemplate.from_json(target["event"]),
            time=time,
        )
    except (binascii.Error, ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"unreadable schedule target: {type(exc).__name__}") from exc


def scheduled_input(input_text: str, due: datetime) -> dict[str, Any]:
    """What Scheduler hands the function for ``input_text`` due at ``due`` (the local runtime
    substitutes as Scheduler does: the time in UTC, to the second, with ``Z``)."""
    from chalicelib.core.clock import rfc3339

    substituted = input_text.replace(SCHEDULED_TIME, rfc3339(due, "seconds"))
    parsed: dict[str, Any] = json.loads(substituted)
    return parsed


def schedule_name(prefix: str, key: str) -> str:
    """``{prefix}{readable key}-{hash}``, at most 64 characters of Scheduler's alphabet."""
    digest = hashlib.sha256(key.encode()).hexdigest()[:_HASH_LENGTH]
    room = MAX_NAME_LENGTH - len(prefix) - 1 - _HASH_LENGTH
    if room < 1 or _UNSAFE.search(prefix):
        raise ValueError(f"schedule prefix {prefix!r} leaves no room or is not Scheduler's")
    readable = _UNSAFE.sub("-", key)[:room].strip("-.") or "s"
    return f"{prefix}{readable}-{digest}"


def owner_prefix(prefix: str, owner: str) -> str:
    """The name prefix of every schedule whose key starts with ``owner`` (``pingsource/``; kind
    words are short enough never to be cut from a name)."""
    return prefix + _UNSAFE.sub("-", owner)


def _is_time(text: str) -> bool:
    try:
        datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return False
    return "T" in text
