"""The Broker kind (eventing.knative.dev/v1): its value, validation with defaults (every problem
reported at once), admission and JSON shapes. ``parse_broker`` leaves the server-owned fields
(uid, generation, creationTimestamp) blank; ``admit_broker`` fills them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from chalicelib.core.delivery.rate import MAX_RATE, MIN_RATE
from chalicelib.core.errors import ImmutableFieldError, Problem, ValidationError
from chalicelib.core.names import quote
from chalicelib.core.resources import meta
from chalicelib.core.resources.delivery_spec import (
    DEFAULT_BROKER_DELIVERY,
    DeliverySpec,
    parse_delivery,
)
from chalicelib.core.resources.durations import DurationError, parse_duration
from chalicelib.core.resources.fields import json_object as _object
from chalicelib.core.resources.fields import unknown_fields as _unknown_fields
from chalicelib.core.resources.kind import ResourceKind

API_VERSION = "eventing.knative.dev/v1"
KIND = "Broker"
BROKER_CLASS_ANNOTATION = "eventing.knative.dev/broker.class"
DEFAULT_BROKER_CLASS = "ServerlessBroker"
OWN_ANNOTATION_PREFIX = "serverless-broker/"
LEGACY_SPEC_VERSIONS_ANNOTATION = "serverless-broker/legacy-spec-versions"
MAX_EVENT_BYTES_ANNOTATION = "serverless-broker/max-event-bytes"
INGRESS_AUTH_ANNOTATION = "serverless-broker/ingress-auth"
# On a broker (for all its triggers) or a trigger: ScalingConfig.MaximumConcurrency of the
# trigger's event source mappings (Lambda's range).
MAX_CONCURRENCY_ANNOTATION = "serverless-broker/max-concurrency"
MAX_CONCURRENCY_RANGE = (2, 1000)
# On a broker (for all its triggers) or a trigger: events per second delivered to the subscriber,
# across every concurrent delivery (docs/flow-control.md).
MAX_RATE_ANNOTATION = "serverless-broker/max-rate"
# Ingress drops a repeat of (source, id) seen within this ISO-8601 duration (docs/dedup.md).
DEDUP_WINDOW_ANNOTATION = "serverless-broker/dedup-window"
MAX_DEDUP_WINDOW_SECONDS = 24 * 3600.0
# Under Lambda's 6 MB synchronous request cap once base64 and headers are added (design.md §2.1).
DEFAULT_MAX_EVENT_BYTES = 4 * 1024 * 1024
INGRESS_AUTH_MODES = ("none", "token")


@dataclass(frozen=True, slots=True)
class Broker:
    namespace: str
    name: str
    # Set at admission (meta.admitted); a parsed body has none yet.
    uid: str = field(default="", kw_only=True)
    generation: int = field(default=0, kw_only=True)
    creation_timestamp: str = field(default="", kw_only=True)
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

    @property
    def dedup_window_seconds(self) -> float | None:
        """None: deduplication is off (the default)."""
        value = self.annotations.get(DEDUP_WINDOW_ANNOTATION)
        return parse_duration(value) if value else None


def ingress_url(base_url: str, namespace: str, name: str) -> str:
    return f"{base_url.rstrip('/')}/{namespace}/{name}"


def parse_broker(namespace: str, body: object, *, path_name: str | None) -> Broker:
    """Validate and default a Broker body; raises ValidationError naming every problem."""
    problems: list[Problem] = []
    name, labels, annotations, spec = meta.envelope(
        namespace, body, API_VERSION, KIND, path_name, problems
    )
    annotations = _broker_annotations(annotations, problems)
    _unknown_fields(spec, ("config", "delivery"), "spec", problems)
    config = _kreference(spec.get("config"), "spec.config", problems)
    raw_delivery = spec.get("delivery")
    delivery = (
        DEFAULT_BROKER_DELIVERY
        if raw_delivery is None
        else parse_delivery(raw_delivery, "spec.delivery", problems)
    )
    if problems:
        raise ValidationError(problems)
    return Broker(
        namespace=namespace,
        name=name,
        labels=labels,
        annotations=annotations,
        config=config,
        delivery=delivery,
    )


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
    max_concurrency_problems(annotations, problems)
    max_rate_problems(annotations, problems)
    _dedup_window_problems(annotations, problems)
    known = (
        LEGACY_SPEC_VERSIONS_ANNOTATION,
        MAX_EVENT_BYTES_ANNOTATION,
        INGRESS_AUTH_ANNOTATION,
        MAX_CONCURRENCY_ANNOTATION,
        MAX_RATE_ANNOTATION,
        DEDUP_WINDOW_ANNOTATION,
    )
    for key in annotations:
        if key.startswith(OWN_ANNOTATION_PREFIX) and key not in known:
            problems.append(Problem(where(key), f"unknown annotation; known: {', '.join(known)}"))
    return annotations


def max_concurrency_problems(annotations: Mapping[str, str], problems: list[Problem]) -> None:
    value = annotations.get(MAX_CONCURRENCY_ANNOTATION)
    low, high = MAX_CONCURRENCY_RANGE
    if value is not None and not (
        value.isascii() and value.isdigit() and len(value) <= 4 and low <= int(value) <= high
    ):
        problems.append(
            Problem(
                f"metadata.annotations[{MAX_CONCURRENCY_ANNOTATION}]",
                f"must be a whole number from {low} to {high} (Lambda's MaximumConcurrency), "
                f"got {quote(value)}",
            )
        )


def parse_max_rate(value: str | None) -> float | None:
    """Events per second from the annotation's text; None when absent or not a rate in range
    (bounded before ``float``: a value is at most 16 characters, plain decimal digits)."""
    if value is None or not 0 < len(value) <= 16 or not value.isascii():
        return None
    if not value.replace(".", "", 1).isdigit():
        return None  # no sign, exponent, inf or nan
    rate = float(value)
    return rate if MIN_RATE <= rate <= MAX_RATE else None


def max_rate_problems(annotations: Mapping[str, str], problems: list[Problem]) -> None:
    value = annotations.get(MAX_RATE_ANNOTATION)
    if value is not None and parse_max_rate(value) is None:
        problems.append(
            Problem(
                f"metadata.annotations[{MAX_RATE_ANNOTATION}]",
                f"must be events per second, a decimal number from {MIN_RATE:g} to "
                f"{MAX_RATE:g}, got {quote(value[:64])}",
            )
        )


def _dedup_window_problems(annotations: Mapping[str, str], problems: list[Problem]) -> None:
    value = annotations.get(DEDUP_WINDOW_ANNOTATION)
    if value is None:
        return
    where = f"metadata.annotations[{DEDUP_WINDOW_ANNOTATION}]"
    try:
        # Bounded before parsing: the duration grammar is linear, but a value is shown back.
        seconds = parse_duration(value) if len(value) <= 64 else None
    except DurationError as exc:
        problems.append(Problem(where, f"{exc} (a window from PT1S to PT24H)"))
        return
    if seconds is None or not 1 <= seconds <= MAX_DEDUP_WINDOW_SECONDS:
        shown = quote(value[:64])
        problems.append(
            Problem(where, f"must be an ISO-8601 duration from PT1S to PT24H, got {shown}")
        )


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


def check_immutable_broker(old: Broker, new: Broker) -> None:
    """Knative: the broker class and ``spec.config`` cannot change (delete and re-create)."""
    problems = []
    if old.broker_class != new.broker_class:
        problems.append(
            meta.immutable_problem(
                f"metadata.annotations[{BROKER_CLASS_ANNOTATION}]",
                old.broker_class,
                new.broker_class,
                "broker",
            )
        )
    if old.config != new.config:
        problems.append(meta.immutable_problem("spec.config", old.config, new.config, "broker"))
    if problems:
        raise ImmutableFieldError(problems)


def admit_broker(parsed: Broker, existing: Broker | None, *, uid: str, now: datetime) -> Broker:
    """The broker to store (``meta.admitted``): the broker class and ``spec.config`` are immutable;
    a change of configuration bumps the generation."""
    if existing is not None:
        check_immutable_broker(existing, parsed)
    return meta.admitted(parsed, existing, uid=uid, now=now, configuration=_broker_configuration)


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


BROKERS: ResourceKind[Broker] = ResourceKind(
    store_kind="broker",
    api_version=API_VERSION,
    kind=KIND,
    plural="brokers",
    parse=lambda namespace, body, name: parse_broker(namespace, body, path_name=name),
    admit=lambda parsed, old, uid, now: admit_broker(parsed, old, uid=uid, now=now),
    spec_json=broker_spec_json,
)
