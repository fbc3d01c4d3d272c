"""The xRegistry endpoint registry as a pure domain (design.md §9): what the broker generates
(every broker and every trigger's subscriber as a producer endpoint, the control plane as a
subscriber endpoint, the event types seen as messages), the ids that cannot collide with
user-defined endpoints, and the epoch/modifiedat bookkeeping ("stamps").

Generated endpoints are derived, not stored. Their ``epoch`` and ``modifiedat`` come from a stamp
per endpoint: a fingerprint of what the endpoint shows (and of the resource's uid and generation)
with the epoch it was given. When the fingerprint changes the epoch goes up by one and
``modifiedat`` becomes the time the change was seen, so the epoch is monotonic whatever the source
(a broker's generation, its triggers' delivery, newly seen event types). Stats that change with
every event (``lastseen``, ``eventcount``) are server-managed read-only values and, as the core
spec asks, do not count as updates.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from chalicelib.core.archive import rfc3339
from chalicelib.core.registry.protocols import DEFAULTS, HTTP
from chalicelib.core.registry.validation import CLOUDEVENTS, GENERATED_PREFIX
from chalicelib.core.resources.broker import Broker
from chalicelib.core.resources.broker import ingress_url as broker_ingress_url
from chalicelib.core.resources.delivery_spec import DeliverySpec
from chalicelib.core.resources.event_transform import address_path
from chalicelib.core.resources.integration_sink import address_path as sink_path
from chalicelib.core.resources.trigger import Trigger, effective_delivery

SPECVERSION = "1.0-rc4"
CONTROL_PLANE_ID = f"{GENERATED_PREFIX}controlplane"
CP_API = "/apis/eventing.knative.dev/v1"
MAX_SOURCES = 50
STRUCTURED = "application/cloudevents+json"
BATCH = "application/cloudevents-batch+json"
DEFAULT_VERSION_ID = "1"
_ID_CHAR = re.compile(r"[^A-Za-z0-9._~:@-]")


# ---- ids ----------------------------------------------------------------------------------------


def broker_endpoint_id(namespace: str, name: str) -> str:
    # DNS-1123 labels have no '.', so the parts split back unambiguously.
    return f"{GENERATED_PREFIX}broker.{namespace}.{name}"


def trigger_endpoint_id(namespace: str, broker: str, name: str) -> str:
    return f"{GENERATED_PREFIX}trigger.{namespace}.{broker}.{name}"


@dataclass(frozen=True)
class GeneratedRef:
    kind: str  # "broker" | "trigger" | "controlplane"
    namespace: str = ""
    broker: str = ""
    trigger: str = ""


def parse_generated_id(endpoint_id: str) -> GeneratedRef | None:
    if endpoint_id == CONTROL_PLANE_ID:
        return GeneratedRef("controlplane")
    parts = endpoint_id.split(".")
    if parts[0] == f"{GENERATED_PREFIX}broker" and len(parts) == 3:
        return GeneratedRef("broker", parts[1], parts[2])
    if parts[0] == f"{GENERATED_PREFIX}trigger" and len(parts) == 4:
        return GeneratedRef("trigger", parts[1], parts[2], parts[3])
    return None


def message_ids(types: Iterable[str]) -> dict[str, str]:
    """A message id per CloudEvents type: the type itself (the Message spec's recommendation)
    when it is a valid id, else a cleaned form with a short hash. Ids are unique
    case-insensitively; on a clash the all-lower-case type keeps the plain id."""
    out: dict[str, str] = {}
    for t in sorted(set(types)):
        clean = _ID_CHAR.sub("_", t)
        if not clean or not (clean[0].isalnum() or clean[0] == "_"):
            clean = "_" + clean
        out[t] = clean[:128] if clean == t and len(t) <= 128 else _hashed(clean, t)
    taken: dict[str, list[str]] = {}
    for t, mid in out.items():
        taken.setdefault(mid.lower(), []).append(t)
    for clash in (ts for ts in taken.values() if len(ts) > 1):
        for t in clash:
            if t != t.lower():
                out[t] = _hashed(out[t], t)
    return out


def _hashed(clean: str, original: str) -> str:
    digest = hashlib.sha256(original.encode()).hexdigest()[:8]
    return f"{clean[:119]}~{digest}"


# ---- event types seen ---------------------------------------------------------------------------


@dataclass(frozen=True)
class ObservedType:
    """One (type, source, datacontenttype) a broker accepted, from the metrics job or from the
    ingress sample. ``count`` is known only from the metrics job."""

    namespace: str
    broker: str
    type: str
    source: str
    datacontenttype: str | None
    first_seen: datetime
    last_seen: datetime
    count: int | None = None


@dataclass(frozen=True)
class SeenType:
    type: str
    sources: tuple[str, ...]
    datacontenttypes: tuple[str, ...]
    first_seen: datetime
    last_seen: datetime
    count: int | None


def summarize(observed: Iterable[ObservedType]) -> dict[tuple[str, str], list[SeenType]]:
    """Per broker, per type: every source and content type seen, first/last seen, and the
    metrics job's event count (the ingress sample has no count)."""
    acc: dict[tuple[str, str, str], dict[str, Any]] = {}
    for o in observed:
        a = acc.setdefault(
            (o.namespace, o.broker, o.type),
            {
                "sources": set(),
                "dcts": set(),
                "first": o.first_seen,
                "last": o.last_seen,
                "count": None,
            },
        )
        a["sources"].add(o.source)
        if o.datacontenttype:
            a["dcts"].add(o.datacontenttype)
        a["first"] = min(a["first"], o.first_seen)
        a["last"] = max(a["last"], o.last_seen)
        if o.count is not None:
            a["count"] = (a["count"] or 0) + o.count
    out: dict[tuple[str, str], list[SeenType]] = {}
    for (ns, broker, t), a in sorted(acc.items()):
        out.setdefault((ns, broker), []).append(
            SeenType(
                t,
                tuple(sorted(a["sources"])),
                tuple(sorted(a["dcts"])),
                a["first"],
                a["last"],
                a["count"],
            )
        )
    return out


# ---- what generated endpoints show --------------------------------------------------------------


@dataclass(frozen=True)
class Definition:
    """An endpoint's own content, before the core attributes (id, self, epoch, times)."""

    id: str
    attributes: Mapping[str, Any]
    created: str
    resource: tuple[str, int] = ("", 0)  # (uid, generation) of the Knative resource, if any
    messages: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    message_created: Mapping[str, str] = field(default_factory=dict)


def _http_options(options: Mapping[str, Any]) -> dict[str, Any]:
    return {**options, **{k: v for k, v in DEFAULTS[HTTP].items() if k not in options}}


def broker_definition(broker: Broker, base_url: str, seen: Sequence[SeenType] = ()) -> Definition:
    ns, name = broker.namespace, broker.name
    options: dict[str, Any] = {
        "endpoints": [{"uri": broker_ingress_url(base_url, ns, name)}],
        "method": "POST",
    }
    if broker.ingress_auth == "token":
        tokens = f"{base_url}{CP_API}/namespaces/{ns}/brokers/{name}/tokens"
        options["authorization"] = [{"type": "Bearer", "authorityuri": tokens}]
    versions = ["1.0", "0.3"] + (["0.2", "0.1"] if broker.legacy_spec_versions else [])
    attributes = {
        "name": name,
        "description": (
            f"Ingress of broker {ns}/{name}: POST CloudEvents in binary, structured or batch mode."
        ),
        "labels": {"kind": "broker", "namespace": ns, "broker": name},
        "usage": ["producer"],
        "channel": f"{ns}/{name}",
        "envelope": CLOUDEVENTS,
        # No "mode": the endpoint accepts either (Endpoint spec); the lists say which exactly.
        "envelopeoptions": {
            "modes": ["binary", "structured"],
            "formats": [STRUCTURED, BATCH],
            "specversions": versions,
        },
        "protocol": HTTP,
        "protocoloptions": _http_options(options),
    }
    ids = message_ids(s.type for s in seen)
    return Definition(
        broker_endpoint_id(ns, name),
        attributes,
        broker.creation_timestamp,
        (broker.uid, broker.generation),
        {ids[s.type]: seen_message(s) for s in seen},
        {ids[s.type]: rfc3339(s.first_seen) for s in seen},
    )


def seen_message(seen: SeenType) -> dict[str, Any]:
    metadata: dict[str, Any] = {
        "specversion": {"type": "string", "value": "1.0", "required": True},
        "id": {"type": "string", "required": True},
        "type": {"type": "string", "value": seen.type, "required": True},
        "source": {"type": "uritemplate", "required": True},
    }
    if len(seen.sources) == 1:
        metadata["source"]["value"] = seen.sources[0]
    if len(seen.datacontenttypes) == 1:
        metadata["datacontenttype"] = {
            "type": "string",
            "value": seen.datacontenttypes[0],
            "required": False,
        }
    message: dict[str, Any] = {
        "name": seen.type,
        "envelope": CLOUDEVENTS,
        "envelopemetadata": metadata,
        "sources": list(seen.sources[:MAX_SOURCES]),
        "firstseen": rfc3339(seen.first_seen),
        "lastseen": rfc3339(seen.last_seen),
    }
    if seen.datacontenttypes:
        message["datacontenttypes"] = list(seen.datacontenttypes)
    if seen.count is not None:
        message["eventcount"] = seen.count
    return message


def _subscriber_uri(trigger: Trigger, base_url: str) -> str:
    """The subscriber's URI; for a ``subscriber.ref`` to an EventTransform or an IntegrationSink,
    its address (docs/transforms.md, docs/targets.md)."""
    if trigger.subscriber_sink is not None:
        return base_url.rstrip("/") + sink_path(trigger.namespace, trigger.subscriber_sink)
    if trigger.subscriber_ref is None:
        return trigger.subscriber_uri
    return base_url.rstrip("/") + address_path(trigger.namespace, trigger.subscriber_ref)


def trigger_definition(trigger: Trigger, broker: Broker | None, base_url: str) -> Definition:
    ns, name, b = trigger.namespace, trigger.name, trigger.broker
    delivery = effective_delivery(trigger, broker)
    structured = delivery.format == "json"
    attributes = {
        "name": name,
        "description": (
            f"Subscriber of trigger {ns}/{name}: broker {ns}/{b} pushes the events that match "
            "the trigger's filter here."
        ),
        "labels": {"kind": "trigger", "namespace": ns, "broker": b, "trigger": name},
        "usage": ["producer"],
        "channel": f"{ns}/{b}/{name}",
        "envelope": CLOUDEVENTS,
        "envelopeoptions": (
            {"mode": "structured", "format": STRUCTURED} if structured else {"mode": "binary"}
        ),
        "protocol": HTTP,
        "protocoloptions": _http_options(
            {
                "endpoints": [{"uri": _subscriber_uri(trigger, base_url)}],
                "method": "POST",
                "headers": [
                    {"name": "Prefer", "value": "reply"},
                    {"name": "Kn-Namespace", "value": ns},
                ],
            }
        ),
        "delivery": _trigger_delivery(delivery, ns, base_url),
    }
    return Definition(
        trigger_endpoint_id(ns, b, name),
        attributes,
        trigger.creation_timestamp,
        (trigger.uid, trigger.generation),
    )


def _trigger_delivery(delivery: DeliverySpec, namespace: str, base_url: str) -> dict[str, Any]:
    out = delivery_extension(delivery)
    if delivery.dead_letter_sink_ref is not None:  # an IntegrationSink: its address
        address = sink_path(namespace, delivery.dead_letter_sink_ref)
        out["deadlettersink"] = base_url.rstrip("/") + address
    return out


def delivery_extension(delivery: DeliverySpec) -> dict[str, Any]:
    """Knative's DeliverySpec with xRegistry attribute names (lower-case, no camelCase)."""
    out: dict[str, Any] = {}
    if delivery.retry is not None:
        out["retry"] = delivery.retry
    if delivery.backoff_policy is not None:
        out["backoffpolicy"] = delivery.backoff_policy
    for key, value in (
        ("backoffdelay", delivery.backoff_delay),
        ("timeout", delivery.timeout),
        ("retryaftermax", delivery.retry_after_max),
    ):
        if value is not None:
            out[key] = value.text
    if delivery.dead_letter_sink_uri is not None:
        out["deadlettersink"] = delivery.dead_letter_sink_uri
    out["format"] = delivery.format or "binary"
    return out


def control_plane_definition(base_url: str, signed: bool, first_seen: str) -> Definition:
    options: dict[str, Any] = {"endpoints": [{"uri": f"{base_url}{CP_API}"}], "method": "POST"}
    if signed:
        options["authorization"] = [{"type": "AWSSigV4"}]
    attributes = {
        "name": "control plane",
        "description": (
            "Knative Eventing API (eventing.knative.dev/v1). Subscribe a URL to a broker's events "
            "by creating a Trigger: POST namespaces/{namespace}/triggers under this URL."
        ),
        "labels": {"kind": "controlplane"},
        "usage": ["subscriber"],
        "protocol": HTTP,
        "protocoloptions": _http_options(options),
    }
    return Definition(CONTROL_PLANE_ID, attributes, first_seen)


# ---- stamps: epoch and modifiedat of what is derived --------------------------------------------


@dataclass(frozen=True)
class Stamp:
    fingerprint: str
    epoch: int
    createdat: str
    modifiedat: str

    def to_json(self) -> dict[str, Any]:
        return {
            "fingerprint": self.fingerprint,
            "epoch": self.epoch,
            "createdat": self.createdat,
            "modifiedat": self.modifiedat,
        }

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> Stamp:
        return cls(
            str(doc["fingerprint"]),
            int(doc["epoch"]),
            str(doc["createdat"]),
            str(doc["modifiedat"]),
        )


_STATS = ("firstseen", "lastseen", "eventcount")


def fingerprint(value: object) -> str:
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def definition_fingerprint(d: Definition) -> str:
    return fingerprint([d.attributes, sorted(d.messages), list(d.resource)])


def message_fingerprint(attributes: Mapping[str, Any]) -> str:
    return fingerprint({k: v for k, v in attributes.items() if k not in _STATS})


def advance(old: Stamp | None, print_: str, created: str, now: str) -> Stamp:
    """The stamp after seeing content with fingerprint ``print_``. First sight: epoch 1 and
    modifiedat = createdat (nothing was seen changing). A change: epoch + 1, modifiedat now."""
    if old is None:
        return Stamp(print_, 1, created, created)
    if old.fingerprint == print_ and old.createdat == created:
        return old
    return Stamp(print_, old.epoch + 1, created, max(now, created))


@dataclass(frozen=True)
class EndpointStamps:
    endpoint: Stamp
    messages: Mapping[str, Stamp]

    def to_json(self) -> dict[str, Any]:
        return {
            **self.endpoint.to_json(),
            "messages": {k: v.to_json() for k, v in sorted(self.messages.items())},
        }

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> EndpointStamps:
        messages = doc.get("messages") or {}
        return cls(Stamp.from_json(doc), {k: Stamp.from_json(v) for k, v in messages.items()})


def stamp_definition(d: Definition, old: EndpointStamps | None, now: str) -> EndpointStamps:
    """Advance an endpoint's stamp and its messages' stamps. Stamps of messages no longer shown
    are kept, so an event type that disappears and comes back keeps counting up."""
    messages = dict(old.messages) if old else {}
    for mid, attributes in d.messages.items():
        created = d.message_created.get(mid, d.created)
        messages[mid] = advance(messages.get(mid), message_fingerprint(attributes), created, now)
    endpoint = advance(old.endpoint if old else None, definition_fingerprint(d), d.created, now)
    return EndpointStamps(endpoint, messages)
