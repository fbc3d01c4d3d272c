"""The Trigger kind (eventing.knative.dev/v1): its value, validation with defaults, admission and
JSON shapes, and the delivery that applies to it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from chalicelib.core.errors import ImmutableFieldError, Problem, ValidationError
from chalicelib.core.filtering.filters import validate_filters
from chalicelib.core.names import name_problems
from chalicelib.core.resources import meta, refs
from chalicelib.core.resources.broker import (
    MAX_RATE_ANNOTATION,
    Broker,
    max_concurrency_problems,
    max_rate_problems,
    parse_max_rate,
)
from chalicelib.core.resources.delivery_spec import (
    CONNECTION_ANNOTATION,
    DEAD_LETTER_CONNECTION_ANNOTATION,
    DeliverySpec,
    connection_problems,
    destination_json,
    parse_audience,
    parse_ca_certs,
    parse_delivery,
    parse_destination,
)
from chalicelib.core.resources.fields import json_object as _object
from chalicelib.core.resources.fields import unknown_fields as _unknown_fields
from chalicelib.core.resources.kind import ResourceKind

API_VERSION = "eventing.knative.dev/v1"
KIND = "Trigger"
DEFAULT_TRIGGER_BROKER = "default"
# "ordered": the trigger's queue and DLQ are SQS FIFO, one message group per partitionkey
# (docs/ordering.md). A queue cannot change type, so neither can this annotation.
DELIVERY_ORDER_ANNOTATION = "serverless-broker/delivery-order"
DELIVERY_ORDERS = ("unordered", "ordered")


class DeliveryOrderChangeError(ValidationError):
    """A PUT that would switch a trigger between ordered and unordered delivery: refused as a
    400 (the issue's word), not the 422 of Knative's immutable fields, because it is our own
    annotation and the reason is SQS's (a queue cannot change between standard and FIFO)."""

    title = "Delivery order cannot change"


@dataclass(frozen=True, slots=True)
class Trigger:
    namespace: str
    name: str
    # Set at admission (meta.admitted); a parsed body has none yet.
    uid: str = field(default="", kw_only=True)
    generation: int = field(default=0, kw_only=True)
    creation_timestamp: str = field(default="", kw_only=True)
    broker: str
    subscriber_uri: str
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    filter_attributes: Mapping[str, str] = field(default_factory=dict)
    filters: tuple[Any, ...] = ()  # the raw spec.filters elements, validated by core.filters
    delivery: DeliverySpec | None = None  # None: the broker's delivery applies
    # spec.subscriber.ref to an EventTransform of the namespace (docs/transforms.md); then
    # subscriber_uri is "".
    subscriber_ref: str | None = None
    # spec.subscriber.ref to an IntegrationSink of the namespace (docs/targets.md); then
    # subscriber_uri is "".
    subscriber_sink: str | None = None
    # spec.subscriber.audience: deliveries carry a token for it (design.md §2.5).
    subscriber_audience: str | None = None
    # spec.subscriber.CACerts: a PEM bundle its TLS trusts too (design.md §2.5).
    subscriber_ca_certs: str | None = None

    @property
    def ordered(self) -> bool:
        return self.annotations.get(DELIVERY_ORDER_ANNOTATION) == "ordered"


def effective_delivery(trigger: Trigger, broker: Broker | None) -> DeliverySpec:
    """The trigger's delivery replaces the broker's whole, with no field merge (Knative spec: "If
    a Trigger specifies any delivery options, this field MUST be ignored")."""
    if trigger.delivery is not None:
        return trigger.delivery
    return broker.delivery if broker is not None else DeliverySpec()


def max_rate(trigger: Trigger, broker: Broker | None) -> float | None:
    """Events per second for the trigger's deliveries: its annotation, else its broker's; None
    when neither sets one (no limit)."""
    for own in (trigger.annotations, broker.annotations if broker is not None else {}):
        value = own.get(MAX_RATE_ANNOTATION)
        if value is not None:
            return parse_max_rate(value)
    return None


def parse_trigger(namespace: str, body: object, *, path_name: str | None) -> Trigger:
    """Validate and default a Trigger body; raises ValidationError naming every problem."""
    return _parse_trigger(namespace, body, path_name, check_filters=True)


def _parse_trigger(
    namespace: str, body: object, path_name: str | None, *, check_filters: bool
) -> Trigger:
    problems: list[Problem] = []
    name, labels, annotations, spec = meta.envelope(
        namespace, body, API_VERSION, KIND, path_name, problems
    )
    max_concurrency_problems(annotations, problems)
    max_rate_problems(annotations, problems)
    meta.choice(
        annotations.get(DELIVERY_ORDER_ANNOTATION),
        DELIVERY_ORDERS,
        f"metadata.annotations[{DELIVERY_ORDER_ANNOTATION}]",
        problems,
    )
    _unknown_fields(
        spec, ("broker", "filter", "filters", "subscriber", "delivery"), "spec", problems
    )
    broker = spec.get("broker")
    if broker is None:
        broker = DEFAULT_TRIGGER_BROKER
    else:
        problems += name_problems(broker, "spec.broker", what="broker name")
    attributes, filters = _trigger_filters(spec, problems, check_filters=check_filters)
    subscriber, transform, sink = _parse_subscriber(spec.get("subscriber"), namespace, problems)
    audience = parse_audience(spec.get("subscriber"), "spec.subscriber", problems)
    ca_certs = parse_ca_certs(spec.get("subscriber"), "spec.subscriber", problems)
    raw_delivery = spec.get("delivery")
    delivery = (
        None if raw_delivery is None else parse_delivery(raw_delivery, "spec.delivery", problems)
    )
    problems += connection_problems(
        annotations,
        {
            CONNECTION_ANNOTATION: (subscriber, audience),
            DEAD_LETTER_CONNECTION_ANNOTATION: (
                (delivery.dead_letter_sink_uri, delivery.dead_letter_sink_audience)
                if delivery is not None
                else (None, None)
            ),
        },
    )
    if problems:
        raise ValidationError(problems)
    assert subscriber or transform or sink  # else a problem above
    return Trigger(
        namespace=namespace,
        name=name,
        broker=broker,
        subscriber_uri=subscriber or "",
        labels=labels,
        annotations=annotations,
        filter_attributes=attributes,
        filters=filters,
        delivery=delivery,
        subscriber_ref=transform,
        subscriber_sink=sink,
        subscriber_audience=audience,
        subscriber_ca_certs=ca_certs,
    )


def _parse_subscriber(
    value: object, namespace: str, problems: list[Problem]
) -> tuple[str | None, str | None, str | None]:
    """``(uri, EventTransform name, IntegrationSink name)``: a ``uri``, or a ``ref`` to an
    EventTransform or an IntegrationSink of the trigger's namespace."""
    path = "spec.subscriber"
    if not (isinstance(value, Mapping) and "ref" in value):
        destination = parse_destination(
            value, path, problems, required=True, audience=True, ca_certs=True
        )
        return destination, None, None
    found = refs.parse_ref(value, path, namespace, (refs.TRANSFORM, refs.SINK), problems)
    if found is None:
        return None, None, None
    kind, name = found
    return (None, name, None) if kind == refs.TRANSFORM else (None, None, name)


def subscriber_json(trigger: Trigger) -> dict[str, Any]:
    if trigger.subscriber_ref is not None:
        return refs.ref_json(refs.TRANSFORM, trigger.subscriber_ref)
    if trigger.subscriber_sink is not None:
        return refs.ref_json(refs.SINK, trigger.subscriber_sink)
    return destination_json(
        trigger.subscriber_uri, trigger.subscriber_audience, trigger.subscriber_ca_certs
    )


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


def check_immutable_trigger(old: Trigger, new: Trigger) -> None:
    """Knative: ``spec.broker`` cannot change (delete and re-create the trigger). Ours: neither
    can the delivery order (its queues are standard or FIFO for life)."""
    if old.ordered != new.ordered:
        before, after = ("ordered", "unordered") if old.ordered else ("unordered", "ordered")
        raise DeliveryOrderChangeError(
            [
                Problem(
                    f"metadata.annotations[{DELIVERY_ORDER_ANNOTATION}]",
                    f"the trigger's delivery is {before} and this update makes it {after}: its "
                    "queues are SQS FIFO queues only when ordered, and SQS cannot change a "
                    "queue's type; delete and re-create the trigger to change it",
                )
            ]
        )
    if old.broker != new.broker:
        raise ImmutableFieldError(
            [meta.immutable_problem("spec.broker", old.broker, new.broker, "trigger")]
        )


def admit_trigger(parsed: Trigger, existing: Trigger | None, *, uid: str, now: datetime) -> Trigger:
    """The trigger to store (``meta.admitted``): ``spec.broker`` is immutable; a spec change bumps
    the generation."""
    if existing is not None:
        check_immutable_trigger(existing, parsed)
    return meta.admitted(parsed, existing, uid=uid, now=now, configuration=trigger_spec_json)


def trigger_spec_json(trigger: Trigger) -> dict[str, Any]:
    spec: dict[str, Any] = {"broker": trigger.broker}
    attributes = dict(trigger.filter_attributes)
    spec["filter"] = {"attributes": attributes} if attributes else {}
    if trigger.filters:
        spec["filters"] = list(trigger.filters)
    spec["subscriber"] = subscriber_json(trigger)
    if trigger.delivery is not None:
        spec["delivery"] = trigger.delivery.to_json()
    return spec


TRIGGERS: ResourceKind[Trigger] = ResourceKind(
    store_kind="trigger",
    api_version=API_VERSION,
    kind=KIND,
    plural="triggers",
    parse=lambda namespace, body, name: parse_trigger(namespace, body, path_name=name),
    admit=lambda parsed, old, uid, now: admit_trigger(parsed, old, uid=uid, now=now),
    spec_json=trigger_spec_json,
    # Filters are not validated again: they were on admission, and the filter factory checks
    # them when it builds them.
    reparse=lambda ns, body, name: _parse_trigger(ns, body, name, check_filters=False),
)
