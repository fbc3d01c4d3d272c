"""Brokers and Triggers as Knative resources: frozen values, validation with defaulting (every
problem reported at once), admission (uid, generation, immutable fields), and the JSON shapes
for the API and for storage.

``parse_*`` turns a request body into a value whose server-owned fields (``uid``, ``generation``,
``creation_timestamp``) are still blank; ``admit_*`` fills them from the stored version, if any.
Time and uid generation are parameters, so everything here is deterministic.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any, Protocol, TypeVar
from urllib.parse import urlsplit

from chalicelib.core.errors import ImmutableFieldError, Problem, ValidationError
from chalicelib.core.names import name_problems, namespace_problems, quote
from chalicelib.core.resources.durations import Duration, DurationError
from chalicelib.core.resources.fields import json_object as _object
from chalicelib.core.resources.fields import string_map as _string_map
from chalicelib.core.resources.fields import unknown_fields as _unknown_fields

API_VERSION = "eventing.knative.dev/v1"
BROKER_CLASS_ANNOTATION = "eventing.knative.dev/broker.class"
DEFAULT_BROKER_CLASS = "ServerlessBroker"
OWN_ANNOTATION_PREFIX = "serverless-broker/"
LEGACY_SPEC_VERSIONS_ANNOTATION = "serverless-broker/legacy-spec-versions"
MAX_EVENT_BYTES_ANNOTATION = "serverless-broker/max-event-bytes"
INGRESS_AUTH_ANNOTATION = "serverless-broker/ingress-auth"
# Under Lambda's 6 MB synchronous request cap once base64 and headers are added (DESIGN §2.1).
DEFAULT_MAX_EVENT_BYTES = 4 * 1024 * 1024
INGRESS_AUTH_MODES = ("none", "token")
BACKOFF_POLICIES = ("linear", "exponential")
DELIVERY_FORMATS = ("json", "binary")
DEFAULT_TRIGGER_BROKER = "default"
# SQS caps maxReceiveCount at 1000, and the queue's redrive (the crash safety net) must sit above
# the retry + 1 attempts the delivery function makes, with a few receives to spare for crashes.
SQS_MAX_RECEIVE_COUNT = 1000
CRASH_RECEIVE_MARGIN = 3
MAX_RETRY = SQS_MAX_RECEIVE_COUNT - 1 - CRASH_RECEIVE_MARGIN


@dataclass(frozen=True, slots=True)
class DeliverySpec:
    """Knative's DeliverySpec. ``None`` means the field is absent (no default applies here)."""

    retry: int | None = None
    backoff_policy: str | None = None
    backoff_delay: Duration | None = None
    timeout: Duration | None = None
    retry_after_max: Duration | None = None
    dead_letter_sink_uri: str | None = None
    format: str | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.dead_letter_sink_uri is not None:
            out["deadLetterSink"] = {"uri": self.dead_letter_sink_uri}
        if self.retry is not None:
            out["retry"] = self.retry
        if self.backoff_policy is not None:
            out["backoffPolicy"] = self.backoff_policy
        for key, value in (
            ("backoffDelay", self.backoff_delay),
            ("timeout", self.timeout),
            ("retryAfterMax", self.retry_after_max),
        ):
            if value is not None:
                out[key] = value.text
        if self.format is not None:
            out["format"] = self.format
        return out


# Knative's config-br-defaults, which its webhook writes into a broker without spec.delivery.
DEFAULT_BROKER_DELIVERY = DeliverySpec(
    retry=10, backoff_policy="exponential", backoff_delay=Duration("PT0.2S", 0.2)
)


@dataclass(frozen=True, slots=True)
class Broker:
    namespace: str
    name: str
    uid: str
    generation: int
    creation_timestamp: str
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    config: Mapping[str, Any] | None = None  # a KReference, kept and shown, not interpreted
    delivery: DeliverySpec = DEFAULT_BROKER_DELIVERY

    @property
    def broker_class(self) -> str:
        return self.annotations.get(BROKER_CLASS_ANNOTATION, DEFAULT_BROKER_CLASS)

    @property
    def legacy_spec_versions(self) -> bool:
        return self.annotations.get(LEGACY_SPEC_VERSIONS_ANNOTATION) == "true"

    @property
    def max_event_bytes(self) -> int:
        value = self.annotations.get(MAX_EVENT_BYTES_ANNOTATION)
        return int(value) if value else DEFAULT_MAX_EVENT_BYTES

    @property
    def ingress_auth(self) -> str:
        return self.annotations.get(INGRESS_AUTH_ANNOTATION, "none")


@dataclass(frozen=True, slots=True)
class Trigger:
    namespace: str
    name: str
    uid: str
    generation: int
    creation_timestamp: str
    broker: str
    subscriber_uri: str
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    filter_attributes: Mapping[str, str] = field(default_factory=dict)
    filters: tuple[Any, ...] = ()  # the raw spec.filters elements, validated by core.filters
    delivery: DeliverySpec | None = None  # None: the broker's delivery applies


def effective_delivery(trigger: Trigger, broker: Broker | None) -> DeliverySpec:
    """The trigger's delivery replaces the broker's whole, with no field merge (Knative spec: "If
    a Trigger specifies any delivery options, this field MUST be ignored")."""
    if trigger.delivery is not None:
        return trigger.delivery
    return broker.delivery if broker is not None else DeliverySpec()


def ingress_url(base_url: str, namespace: str, name: str) -> str:
    return f"{base_url.rstrip('/')}/{namespace}/{name}"


def format_timestamp(moment: datetime) -> str:
    """RFC 3339 in UTC to the second, as Kubernetes writes ``creationTimestamp``."""
    if moment.tzinfo is None:
        raise ValueError("timestamps must be timezone-aware")
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


# --- parsing -------------------------------------------------------------------------------------


def parse_broker(namespace: str, body: object, *, path_name: str | None) -> Broker:
    """Validate and default a Broker body; raises ValidationError naming every problem."""
    problems: list[Problem] = []
    meta, spec = _envelope(namespace, body, "Broker", problems)
    name = _resource_name(meta, path_name, problems)
    labels = _string_map(meta.get("labels"), "metadata.labels", problems)
    annotations = _broker_annotations(
        _string_map(meta.get("annotations"), "metadata.annotations", problems), problems
    )
    _unknown_fields(spec, ("config", "delivery"), "spec", problems)
    config = _kreference(spec.get("config"), "spec.config", problems)
    raw_delivery = spec.get("delivery")
    delivery = (
        DEFAULT_BROKER_DELIVERY
        if raw_delivery is None
        else _delivery(raw_delivery, "spec.delivery", problems)
    )
    if problems:
        raise ValidationError(problems)
    return Broker(
        namespace=namespace,
        name=name,
        uid="",
        generation=0,
        creation_timestamp="",
        labels=labels,
        annotations=annotations,
        config=config,
        delivery=delivery,
    )


def parse_trigger(namespace: str, body: object, *, path_name: str | None) -> Trigger:
    """Validate and default a Trigger body; raises ValidationError naming every problem."""
    return _parse_trigger(namespace, body, path_name, check_filters=True)


def _parse_trigger(
    namespace: str, body: object, path_name: str | None, *, check_filters: bool
) -> Trigger:
    problems: list[Problem] = []
    meta, spec = _envelope(namespace, body, "Trigger", problems)
    name = _resource_name(meta, path_name, problems)
    labels = _string_map(meta.get("labels"), "metadata.labels", problems)
    annotations = _string_map(meta.get("annotations"), "metadata.annotations", problems)
    _unknown_fields(
        spec, ("broker", "filter", "filters", "subscriber", "delivery"), "spec", problems
    )
    broker = spec.get("broker")
    if broker is None:
        broker = DEFAULT_TRIGGER_BROKER
    else:
        problems += name_problems(broker, "spec.broker", what="broker name")
    attributes, filters = _trigger_filters(spec, problems, check_filters=check_filters)
    subscriber = _destination(spec.get("subscriber"), "spec.subscriber", problems, required=True)
    raw_delivery = spec.get("delivery")
    delivery = None if raw_delivery is None else _delivery(raw_delivery, "spec.delivery", problems)
    if problems:
        raise ValidationError(problems)
    assert subscriber is not None  # a missing subscriber is a problem above
    return Trigger(
        namespace=namespace,
        name=name,
        uid="",
        generation=0,
        creation_timestamp="",
        broker=broker,
        subscriber_uri=subscriber,
        labels=labels,
        annotations=annotations,
        filter_attributes=attributes,
        filters=filters,
        delivery=delivery,
    )


def _envelope(
    namespace: str, body: object, kind: str, problems: list[Problem]
) -> tuple[Mapping[str, Any], Mapping[str, Any]]:
    problems += namespace_problems(namespace, "metadata.namespace")
    if not isinstance(body, Mapping):
        problems.append(Problem("body", f"a {kind} must be a JSON object"))
        return {}, {}
    _unknown_fields(body, ("apiVersion", "kind", "metadata", "spec", "status"), "", problems)
    if body.get("apiVersion", API_VERSION) != API_VERSION:
        problems.append(Problem("apiVersion", f'must be "{API_VERSION}"'))
    if body.get("kind", kind) != kind:
        problems.append(Problem("kind", f'must be "{kind}"'))
    meta = _object(body.get("metadata"), "metadata", problems)
    body_namespace = meta.get("namespace")
    if body_namespace is not None and body_namespace != namespace:
        problems.append(
            Problem(
                "metadata.namespace",
                f"{quote(body_namespace)} does not match the namespace in the path "
                f"({quote(namespace)})",
            )
        )
    return meta, _object(body.get("spec"), "spec", problems)


def _resource_name(meta: Mapping[str, Any], path_name: str | None, problems: list[Problem]) -> str:
    body_name = meta.get("name")
    if path_name is None:
        problems += name_problems(body_name, "metadata.name")
        return body_name if isinstance(body_name, str) else ""
    problems += name_problems(path_name, "metadata.name")
    if body_name is not None and body_name != path_name:
        problems.append(
            Problem(
                "metadata.name",
                f"{quote(body_name)} does not match the name in the path ({quote(path_name)})",
            )
        )
    return path_name


def _broker_annotations(annotations: dict[str, str], problems: list[Problem]) -> dict[str, str]:
    def where(key: str) -> str:
        return f"metadata.annotations[{key}]"

    broker_class = annotations.setdefault(BROKER_CLASS_ANNOTATION, DEFAULT_BROKER_CLASS)
    if broker_class != DEFAULT_BROKER_CLASS:
        problems.append(
            Problem(
                where(BROKER_CLASS_ANNOTATION),
                f"broker class {quote(broker_class)} is not served here; only "
                f"{quote(DEFAULT_BROKER_CLASS)} is (omit the annotation to get it)",
            )
        )
    legacy = annotations.get(LEGACY_SPEC_VERSIONS_ANNOTATION)
    if legacy is not None and legacy not in ("true", "false"):
        problems.append(
            Problem(where(LEGACY_SPEC_VERSIONS_ANNOTATION), 'must be "true" or "false"')
        )
    max_bytes = annotations.get(MAX_EVENT_BYTES_ANNOTATION)
    if max_bytes is not None and not (
        max_bytes.isascii()
        and max_bytes.isdigit()
        and len(max_bytes) <= 10  # int() refuses very long digit strings
        and 1 <= int(max_bytes) <= DEFAULT_MAX_EVENT_BYTES
    ):
        problems.append(
            Problem(
                where(MAX_EVENT_BYTES_ANNOTATION),
                f"must be a whole number of bytes from 1 to {DEFAULT_MAX_EVENT_BYTES}, "
                f"got {quote(max_bytes)}",
            )
        )
    auth = annotations.get(INGRESS_AUTH_ANNOTATION)
    if auth is not None and auth not in INGRESS_AUTH_MODES:
        problems.append(
            Problem(where(INGRESS_AUTH_ANNOTATION), f'must be "none" or "token", got {quote(auth)}')
        )
    known = (LEGACY_SPEC_VERSIONS_ANNOTATION, MAX_EVENT_BYTES_ANNOTATION, INGRESS_AUTH_ANNOTATION)
    for key in annotations:
        if key.startswith(OWN_ANNOTATION_PREFIX) and key not in known:
            problems.append(Problem(where(key), f"unknown annotation; known: {', '.join(known)}"))
    return annotations


def _trigger_filters(
    spec: Mapping[str, Any], problems: list[Problem], *, check_filters: bool
) -> tuple[dict[str, str], tuple[Any, ...]]:
    raw_filter = _object(spec.get("filter"), "spec.filter", problems)
    _unknown_fields(raw_filter, ("attributes",), "spec.filter", problems)
    attributes = _object(raw_filter.get("attributes"), "spec.filter.attributes", problems)
    raw_filters = spec.get("filters")
    if raw_filters is None:
        raw_filters = []
    elif not isinstance(raw_filters, list):
        problems.append(Problem("spec.filters", "must be a list of filter objects"))
        raw_filters = []
    found: list[Problem] = []
    if check_filters:
        # Imported here: core.filters may import this module for the Trigger type.
        from chalicelib.core.filtering.filters import validate_filters

        found = validate_filters(attributes, raw_filters, path="spec")
        problems += [p for p in found if p not in problems]
    reported = any(p.field.startswith("spec.filter.attributes") for p in found)
    strings: dict[str, str] = {}
    for key, value in attributes.items():
        if isinstance(key, str) and isinstance(value, str):
            strings[key] = value
        elif not reported:
            problems.append(Problem(f"spec.filter.attributes.{key}", "value must be a string"))
    return strings, tuple(raw_filters)


_DELIVERY_FIELDS = (
    "deadLetterSink",
    "retry",
    "backoffPolicy",
    "backoffDelay",
    "timeout",
    "retryAfterMax",
    "format",
)


def _delivery(value: object, path: str, problems: list[Problem]) -> DeliverySpec:
    raw = _object(value, path, problems)
    _unknown_fields(raw, _DELIVERY_FIELDS, path, problems)
    retry = raw.get("retry")
    if retry is not None and (
        isinstance(retry, bool) or not isinstance(retry, int) or not 0 <= retry <= MAX_RETRY
    ):
        problems.append(
            Problem(
                f"{path}.retry",
                f"must be a whole number from 0 to {MAX_RETRY} "
                f"(SQS allows {SQS_MAX_RECEIVE_COUNT} receives), got {quote(retry)}",
            )
        )
        retry = None
    policy = _choice(raw.get("backoffPolicy"), BACKOFF_POLICIES, f"{path}.backoffPolicy", problems)
    delay = _duration(raw.get("backoffDelay"), f"{path}.backoffDelay", problems, allow_zero=True)
    timeout = _duration(raw.get("timeout"), f"{path}.timeout", problems, allow_zero=False)
    retry_after_max = _duration(
        raw.get("retryAfterMax"), f"{path}.retryAfterMax", problems, allow_zero=True
    )
    sink = _destination(raw.get("deadLetterSink"), f"{path}.deadLetterSink", problems)
    fmt = _choice(raw.get("format"), DELIVERY_FORMATS, f"{path}.format", problems)
    return DeliverySpec(retry, policy, delay, timeout, retry_after_max, sink, fmt)


def _duration(
    value: object, path: str, problems: list[Problem], *, allow_zero: bool
) -> Duration | None:
    if value is None:
        return None
    if not isinstance(value, str):
        problems.append(Problem(path, "must be an ISO-8601 duration string such as PT0.2S"))
        return None
    try:
        duration = Duration.parse(value)
    except DurationError as err:
        problems.append(Problem(path, str(err)))
        return None
    if duration.seconds < 0 or (duration.seconds == 0 and not allow_zero):
        need = "not be negative" if allow_zero else "be greater than zero"
        problems.append(Problem(path, f"must {need}, got {quote(value)}"))
        return None
    return duration


def _destination(
    value: object, path: str, problems: list[Problem], *, required: bool = False
) -> str | None:
    """A Knative Destination, of which only the ``uri`` form is supported (no Kubernetes here to
    resolve a ``ref``)."""
    if value is None:
        if required:
            problems.append(Problem(path, "is required: give it a uri (an absolute http(s) URL)"))
        return None
    raw = _object(value, path, problems)
    if "ref" in raw:
        problems.append(
            Problem(
                f"{path}.ref",
                "only uri is supported here (there is no Kubernetes to resolve a ref): "
                "put the absolute http(s) URL of the service in uri",
            )
        )
    for unsupported in ("CACerts", "audience"):
        if unsupported in raw:
            problems.append(Problem(f"{path}.{unsupported}", "is not supported here"))
    _unknown_fields(raw, ("uri", "ref", "CACerts", "audience"), path, problems)
    uri = raw.get("uri")
    if uri is None:
        if isinstance(value, Mapping) and "ref" not in raw:
            problems.append(Problem(f"{path}.uri", "is required (an absolute http or https URL)"))
        return None
    found = uri_problems(uri, f"{path}.uri")
    problems += found
    return None if found else str(uri)


def uri_problems(value: object, path: str) -> list[Problem]:
    """Problems with ``value`` as a subscriber or dead-letter sink URL: absolute ``http``/``https``
    with a host, and no userinfo (credentials in a URL end up in status, logs and events)."""
    if not isinstance(value, str) or not value:
        return [Problem(path, "must be a non-empty absolute http or https URL")]
    if any(c.isspace() or ord(c) < 0x20 or ord(c) == 0x7F for c in value):
        return [Problem(path, f"{quote(value)} must not contain spaces or control characters")]
    try:
        parts = urlsplit(value)
        _ = parts.port  # raises ValueError on a bad port
    except ValueError:
        return [Problem(path, f"{quote(value)} is not a valid URL (check the host and port)")]
    if parts.scheme.lower() == "kafka":
        return kafka_uri_problems(value, path)
    if parts.scheme.lower() not in ("http", "https"):
        return [
            Problem(path, f"{quote(value)} must use http or https (or kafka://host:port/topic)")
        ]
    if "@" in parts.netloc:
        return [Problem(path, f"{quote(value)} must not contain user information (user:password@)")]
    if not parts.hostname:
        return [Problem(path, f"{quote(value)} must be absolute, with a host")]
    return []


_KAFKA_TOPIC = re.compile(r"^[A-Za-z0-9._-]{1,249}$")


def kafka_uri_problems(value: str, path: str) -> list[Problem]:
    """``kafka://host[:port]/topic`` (port 9092 when omitted): the subscriber is a Kafka topic,
    written through a producer (DESIGN.md §10). No userinfo, query or fragment: credentials do
    not travel in URIs, and a topic name is the whole path."""
    parts = urlsplit(value)
    topic = parts.path[1:]
    if "@" in parts.netloc:
        return [Problem(path, f"{quote(value)} must not contain user information (user:password@)")]
    if not parts.hostname:
        return [
            Problem(path, f"{quote(value)} must name a bootstrap server: kafka://host:port/topic")
        ]
    if parts.query or parts.fragment or not _KAFKA_TOPIC.match(topic) or topic in (".", ".."):
        return [
            Problem(
                path,
                f"{quote(value)} must be kafka://host:port/topic with a Kafka topic name "
                "(1 to 249 of letters, digits, ._-) and no query or fragment",
            )
        ]
    return []


def kafka_target(uri: str) -> tuple[str, str] | None:
    """``(bootstrap "host:port", topic)`` of a valid ``kafka://`` URI; None for other schemes."""
    parts = urlsplit(uri)
    if parts.scheme.lower() != "kafka" or not parts.hostname:
        return None
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    return f"{host}:{parts.port or 9092}", parts.path[1:]


def _kreference(value: object, path: str, problems: list[Problem]) -> dict[str, Any] | None:
    if value is None:
        return None
    raw = _object(value, path, problems)
    for key in ("kind", "name"):
        if not isinstance(raw.get(key), str) or not raw.get(key):
            problems.append(Problem(f"{path}.{key}", "is required and must be a non-empty string"))
    for key in ("apiVersion", "namespace"):
        if key in raw and not isinstance(raw[key], str):
            problems.append(Problem(f"{path}.{key}", "must be a string"))
    return dict(raw)


def _choice(
    value: object, choices: tuple[str, ...], path: str, problems: list[Problem]
) -> str | None:
    if value is None:
        return None
    if value not in choices:
        expected = " or ".join(f'"{c}"' for c in choices)
        problems.append(Problem(path, f"must be {expected}, got {quote(value)}"))
        return None
    return str(value)


# --- admission -----------------------------------------------------------------------------------


def check_immutable_broker(old: Broker, new: Broker) -> None:
    """Knative: the broker class and ``spec.config`` cannot change (delete and re-create)."""
    problems = []
    if old.broker_class != new.broker_class:
        problems.append(
            _immutable(
                f"metadata.annotations[{BROKER_CLASS_ANNOTATION}]",
                old.broker_class,
                new.broker_class,
                "broker",
            )
        )
    if old.config != new.config:
        problems.append(_immutable("spec.config", old.config, new.config, "broker"))
    if problems:
        raise ImmutableFieldError(problems)


def check_immutable_trigger(old: Trigger, new: Trigger) -> None:
    """Knative: ``spec.broker`` cannot change (delete and re-create the trigger)."""
    if old.broker != new.broker:
        raise ImmutableFieldError([_immutable("spec.broker", old.broker, new.broker, "trigger")])


def _immutable(path: str, old: object, new: object, kind: str) -> Problem:
    return Problem(
        path,
        f"is immutable: it is {json.dumps(old)} and the update sets {json.dumps(new)}; "
        f"delete and re-create the {kind} to change it",
    )


def admit_broker(
    parsed: Broker, existing: Broker | None, *, uid_factory: Callable[[], str], now: datetime
) -> Broker:
    """The broker to store: a new uid and generation 1 on create; on update the stored uid and
    creationTimestamp, and the generation bumped only when the configuration changed."""
    if existing is None:
        return replace(
            parsed, uid=uid_factory(), generation=1, creation_timestamp=format_timestamp(now)
        )
    check_immutable_broker(existing, parsed)
    changed = _broker_configuration(parsed) != _broker_configuration(existing)
    return replace(
        parsed,
        uid=existing.uid,
        creation_timestamp=existing.creation_timestamp,
        generation=existing.generation + (1 if changed else 0),
    )


def admit_trigger(
    parsed: Trigger, existing: Trigger | None, *, uid_factory: Callable[[], str], now: datetime
) -> Trigger:
    """As ``admit_broker``, for triggers (``spec.broker`` is immutable)."""
    if existing is None:
        return replace(
            parsed, uid=uid_factory(), generation=1, creation_timestamp=format_timestamp(now)
        )
    check_immutable_trigger(existing, parsed)
    changed = trigger_spec_json(parsed) != trigger_spec_json(existing)
    return replace(
        parsed,
        uid=existing.uid,
        creation_timestamp=existing.creation_timestamp,
        generation=existing.generation + (1 if changed else 0),
    )


def _broker_configuration(broker: Broker) -> tuple[dict[str, Any], dict[str, str]]:
    # Our own annotations configure the broker the way Knative's spec.config would, so changing
    # them is a change of configuration (a new generation), unlike labels or foreign annotations.
    own = {k: v for k, v in broker.annotations.items() if k.startswith(OWN_ANNOTATION_PREFIX)}
    return broker_spec_json(broker), own


# --- JSON: the API shape and the storage item ----------------------------------------------------


def broker_spec_json(broker: Broker) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if broker.config is not None:
        spec["config"] = dict(broker.config)
    spec["delivery"] = broker.delivery.to_json()
    return spec


def trigger_spec_json(trigger: Trigger) -> dict[str, Any]:
    spec: dict[str, Any] = {"broker": trigger.broker}
    attributes = dict(trigger.filter_attributes)
    spec["filter"] = {"attributes": attributes} if attributes else {}
    if trigger.filters:
        spec["filters"] = list(trigger.filters)
    spec["subscriber"] = {"uri": trigger.subscriber_uri}
    if trigger.delivery is not None:
        spec["delivery"] = trigger.delivery.to_json()
    return spec


def broker_to_json(broker: Broker, status: Mapping[str, Any]) -> dict[str, Any]:
    return _resource_json("Broker", broker, broker_spec_json(broker), status)


def trigger_to_json(trigger: Trigger, status: Mapping[str, Any]) -> dict[str, Any]:
    return _resource_json("Trigger", trigger, trigger_spec_json(trigger), status)


class ResourceMeta(Protocol):
    """What every stored resource carries in its ``metadata``."""

    @property
    def name(self) -> str: ...
    @property
    def namespace(self) -> str: ...
    @property
    def uid(self) -> str: ...
    @property
    def generation(self) -> int: ...
    @property
    def creation_timestamp(self) -> str: ...
    @property
    def labels(self) -> Mapping[str, str]: ...
    @property
    def annotations(self) -> Mapping[str, str]: ...


def _resource_json(
    kind: str, res: Broker | Trigger, spec: dict[str, Any], status: Mapping[str, Any]
) -> dict[str, Any]:
    return resource_json(API_VERSION, kind, res, spec, status)


def resource_json(
    api_version: str,
    kind: str,
    res: ResourceMeta,
    spec: Mapping[str, Any],
    status: Mapping[str, Any],
) -> dict[str, Any]:
    """A resource in the Kubernetes shape: apiVersion, kind, metadata, spec, status."""
    metadata: dict[str, Any] = {
        "name": res.name,
        "namespace": res.namespace,
        "uid": res.uid,
        "generation": res.generation,
        "creationTimestamp": res.creation_timestamp,
    }
    if res.labels:
        metadata["labels"] = dict(res.labels)
    if res.annotations:
        metadata["annotations"] = dict(res.annotations)
    return {
        "apiVersion": api_version,
        "kind": kind,
        "metadata": metadata,
        "spec": dict(spec),
        "status": dict(status),
    }


def broker_to_item(broker: Broker) -> dict[str, Any]:
    """A plain JSON-able document to store (strings, ints, lists and dicts only: no floats, so
    DynamoDB takes it as is)."""
    return _item("Broker", broker, broker_spec_json(broker))


def trigger_to_item(trigger: Trigger) -> dict[str, Any]:
    return _item("Trigger", trigger, trigger_spec_json(trigger))


def broker_from_item(item: Mapping[str, Any]) -> Broker:
    """The broker ``broker_to_item`` stored; ValueError if the document does not validate."""
    namespace, name, body = _item_body(item)
    try:
        parsed = parse_broker(namespace, body, path_name=name)
    except ValidationError as err:
        raise ValueError(f"stored broker {namespace}/{name} is invalid: {err.detail}") from err
    return _restore(parsed, item)


def trigger_from_item(item: Mapping[str, Any]) -> Trigger:
    """The trigger ``trigger_to_item`` stored. Filters are not validated again here: they were on
    admission, and the filter factory checks them when it builds them."""
    namespace, name, body = _item_body(item)
    try:
        parsed = _parse_trigger(namespace, body, name, check_filters=False)
    except ValidationError as err:
        raise ValueError(f"stored trigger {namespace}/{name} is invalid: {err.detail}") from err
    return _restore(parsed, item)


_R = TypeVar("_R", Broker, Trigger)


def _item(kind: str, res: Broker | Trigger, spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "kind": kind,
        "namespace": res.namespace,
        "name": res.name,
        "uid": res.uid,
        "generation": res.generation,
        "creationTimestamp": res.creation_timestamp,
        "labels": dict(res.labels),
        "annotations": dict(res.annotations),
        "spec": spec,
    }


def _item_body(item: Mapping[str, Any]) -> tuple[str, str, dict[str, Any]]:
    metadata = {"labels": item.get("labels") or {}, "annotations": item.get("annotations") or {}}
    return str(item["namespace"]), str(item["name"]), {"metadata": metadata, "spec": item["spec"]}


def _restore(parsed: _R, item: Mapping[str, Any]) -> _R:
    return replace(
        parsed,
        uid=str(item["uid"]),
        generation=int(item["generation"]),
        creation_timestamp=str(item["creationTimestamp"]),
    )
