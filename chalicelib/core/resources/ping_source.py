"""PingSource (Knative's ``sources.knative.dev/v1``; docs/sources.md): an event with a fixed
payload on a cron schedule, to a Broker of its namespace or a URI. Parsing (Knative's defaults and
checks, and what EventBridge Scheduler cannot run, each a problem), admission, JSON, the status,
and the schedule it needs (core/schedules.py). Pure.

    spec.schedule:     5-field cron, default "* * * * *"; "CRON_TZ=Europe/Paris " prefix allowed
    spec.timezone:     IANA time zone (or the prefix; not both)
    spec.contentType:  the data's media type
    spec.data | spec.dataBase64: the payload (one or none; JSON when contentType says so)
    spec.ceOverrides.extensions: extension attributes every event carries
    spec.sink:         ref to a Broker of the namespace, or uri

Events as Knative's PingSource sends them: type ``dev.knative.sources.ping``, source
``/apis/v1/namespaces/{ns}/pingsources/{name}``, a fresh id, ``time`` the scheduled time, and
``datacontenttype`` = ``contentType`` when there is data.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from chalicelib.core import senders
from chalicelib.core.cloudevents.context_attributes import is_media_type
from chalicelib.core.cron import Cron, parse_cron
from chalicelib.core.errors import Problem, ValidationError
from chalicelib.core.names import quote
from chalicelib.core.resources import meta
from chalicelib.core.resources.fields import json_object as _object
from chalicelib.core.resources.fields import unknown_fields as _unknown
from chalicelib.core.resources.kind import ResourceKind
from chalicelib.core.resources.source_sink import SourceSink, parse_sink, source_status
from chalicelib.core.schedules import EventTemplate, Schedule, Sink

API_VERSION = "sources.knative.dev/v1"
KIND = "PingSource"
PLURAL = "pingsources"
EVENT_TYPE = "dev.knative.sources.ping"
DEFAULT_SCHEDULE = "* * * * *"  # Knative's default
SCHEDULE_OWNER = "pingsource/"  # the key prefix of its schedules (services/schedules.py)
# Bounds: the payload travels in the schedule's input (Scheduler, then Lambda's asynchronous
# invocation) and in every event; 64 KiB keeps both far from their limits.
MAX_DATA_CHARS = 65_536
MAX_CONTENT_TYPE_CHARS = 256
MAX_EXTENSIONS = 32
MAX_EXTENSION_VALUE_CHARS = 4_096
# Attributes the source sets itself: an override would make its events something else.
_OWN_ATTRIBUTES = frozenset(
    {"specversion", "id", "source", "type", "time", "datacontenttype", "dataschema", "data"}
)
_EXTENSION_NAME = re.compile(r"^[a-z0-9]{1,20}$")


@dataclass(frozen=True, slots=True)
class PingSource:
    namespace: str
    name: str
    # Set at admission (meta.admitted); a parsed body has none yet.
    uid: str = field(default="", kw_only=True)
    generation: int = field(default=0, kw_only=True)
    creation_timestamp: str = field(default="", kw_only=True)
    schedule: str
    cron: Cron = field(compare=False)
    sink: SourceSink
    timezone: str | None = None
    content_type: str | None = None
    data: str | None = None
    data_base64: str | None = None
    extensions: Mapping[str, str] = field(default_factory=dict)
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)

    @property
    def event_source(self) -> str:
        return event_source(self.namespace, self.name)

    @property
    def key(self) -> str:
        return f"{SCHEDULE_OWNER}{self.namespace}/{self.name}"


def event_source(namespace: str, name: str) -> str:
    """The ``source`` of its events (Knative's ``PingSourceSource``)."""
    return f"/apis/v1/namespaces/{namespace}/pingsources/{name}"


def parse_ping_source(namespace: str, body: object, *, path_name: str | None) -> PingSource:
    """Validate and default a PingSource body; raises ValidationError naming every problem."""
    problems: list[Problem] = []
    name, labels, annotations, spec = meta.envelope(
        namespace, body, API_VERSION, KIND, path_name, problems
    )
    _unknown(
        spec,
        ("schedule", "timezone", "contentType", "data", "dataBase64", "ceOverrides", "sink"),
        "spec",
        problems,
    )
    given = _given(spec.get("schedule"))
    schedule = DEFAULT_SCHEDULE if given is None else given
    timezone = spec.get("timezone")
    cron, found = parse_cron(schedule, timezone, "spec.schedule", "spec.timezone")
    problems += found
    content_type = _content_type(spec.get("contentType"), problems)
    data, data_base64 = _payload(spec, content_type, problems)
    extensions = _extensions(spec.get("ceOverrides"), problems)
    sink = parse_sink(spec.get("sink"), namespace, problems)
    if problems:
        raise ValidationError(problems)
    assert cron is not None
    return PingSource(
        namespace=namespace,
        name=name,
        schedule=str(schedule),
        cron=cron,
        sink=sink,
        timezone=timezone or None,
        content_type=content_type,
        data=data,
        data_base64=data_base64,
        extensions=extensions,
        labels=labels,
        annotations=annotations,
    )


def _given(value: object) -> object:
    """``value``, or None when absent or empty (Knative's empty string is its default)."""
    return None if value is None or value == "" else value


def _content_type(value: object, problems: list[Problem]) -> str | None:
    if value is None or value == "":
        return None
    if (
        not isinstance(value, str)
        or len(value) > MAX_CONTENT_TYPE_CHARS
        or not is_media_type(value)
    ):
        problems.append(
            Problem(
                "spec.contentType",
                f"must be a media type such as application/json, of at most "
                f"{MAX_CONTENT_TYPE_CHARS} characters",
            )
        )
        return None
    return value


def _payload(
    spec: Mapping[str, Any], content_type: str | None, problems: list[Problem]
) -> tuple[str | None, str | None]:
    data, encoded = _given(spec.get("data")), _given(spec.get("dataBase64"))
    if data is not None and encoded is not None:
        problems.append(Problem("spec", "set data or dataBase64, not both"))
        return None, None
    path, value = ("spec.data", data) if data is not None else ("spec.dataBase64", encoded)
    if value is None:
        return None, None
    if not isinstance(value, str):
        problems.append(Problem(path, "must be a string"))
        return None, None
    if len(value) > MAX_DATA_CHARS:
        problems.append(Problem(path, f"is {len(value)} characters, over {MAX_DATA_CHARS}"))
        return None, None
    text = value
    if encoded is not None:
        try:
            raw = base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError):
            problems.append(Problem(path, "is not valid base64"))
            return None, None
        text = raw.decode("utf-8", errors="replace")
    if (
        content_type is not None
        and content_type.split(";")[0].strip().lower() == "application/json"
    ):
        try:
            is_object = isinstance(json.loads(text), dict)
        except ValueError:
            is_object = False
        if not is_object:  # as Knative checks it
            problems.append(Problem(path, "must be a JSON object, as contentType says JSON"))
            return None, None
    return (value, None) if data is not None else (None, value)


def _extensions(value: object, problems: list[Problem]) -> dict[str, str]:
    raw = _object(value, "spec.ceOverrides", problems)
    _unknown(raw, ("extensions",), "spec.ceOverrides", problems)
    found = _object(raw.get("extensions"), "spec.ceOverrides.extensions", problems)
    if len(found) > MAX_EXTENSIONS:
        problems.append(Problem("spec.ceOverrides.extensions", f"at most {MAX_EXTENSIONS}"))
        return {}
    out: dict[str, str] = {}
    for key, item in found.items():
        path = f"spec.ceOverrides.extensions.{key}"
        if not isinstance(key, str) or not _EXTENSION_NAME.fullmatch(key):
            problems.append(
                Problem(path, f"{quote(key)} is not an attribute name ([a-z0-9]{{1,20}})")
            )
        elif key in _OWN_ATTRIBUTES:
            problems.append(Problem(path, "is set by the source itself"))
        elif not isinstance(item, str) or len(item) > MAX_EXTENSION_VALUE_CHARS:
            problems.append(
                Problem(path, f"must be a string of at most {MAX_EXTENSION_VALUE_CHARS} characters")
            )
        else:
            out[key] = item
    return out


def admit_ping_source(
    parsed: PingSource, existing: PingSource | None, *, uid: str, now: datetime
) -> PingSource:
    return meta.admitted(parsed, existing, uid=uid, now=now, configuration=spec_json)


def spec_json(source: PingSource) -> dict[str, Any]:
    spec: dict[str, Any] = {"schedule": source.schedule}
    if source.timezone is not None:
        spec["timezone"] = source.timezone
    if source.content_type is not None:
        spec["contentType"] = source.content_type
    if source.data is not None:
        spec["data"] = source.data
    if source.data_base64 is not None:
        spec["dataBase64"] = source.data_base64
    if source.extensions:
        spec["ceOverrides"] = {"extensions": dict(source.extensions)}
    spec["sink"] = source.sink.to_json()
    return spec


def schedule_of(source: PingSource) -> Schedule:
    """The schedule that sends its events: the cron, the event template and the sink."""
    payload: bytes | None = None
    if source.data_base64 is not None:
        payload = base64.b64decode(source.data_base64)
    elif source.data is not None:
        payload = source.data.encode()
    attributes = {**source.extensions, "type": EVENT_TYPE, "source": source.event_source}
    if payload is not None and source.content_type is not None:
        attributes["datacontenttype"] = source.content_type
    sink = Sink(source.namespace, broker=source.sink.broker, uri=source.sink.uri)
    return Schedule(
        key=source.key,
        expression=source.cron,
        template=EventTemplate(attributes, payload),
        sink=sink,
        sender=senders.source(source.namespace, KIND, source.name),
    )


def ping_source_status(
    source: PingSource,
    *,
    sink_uri: str | None,
    deployed: bool,
    deploy_message: str,
    now: datetime,
    previous: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """``sink_uri``: where its events go, None when its broker does not exist (its
    status says so); ``deployed``: its schedule exists as wanted (else ``deploy_message``)."""
    return source_status(
        source.generation,
        source.sink,
        sink_uri=sink_uri,
        deployed=deployed,
        deploy_reason="ScheduleNotDeployed",
        deploy_message=deploy_message,
        ce_attributes={"type": EVENT_TYPE, "source": source.event_source},
        now=now,
        previous=previous,
    )


PING_SOURCES: ResourceKind[PingSource] = ResourceKind(
    store_kind="pingsource",
    api_version=API_VERSION,
    kind=KIND,
    plural=PLURAL,
    parse=lambda namespace, body, name: parse_ping_source(namespace, body, path_name=name),
    admit=lambda parsed, old, uid, now: admit_ping_source(parsed, old, uid=uid, now=now),
    spec_json=spec_json,
)
