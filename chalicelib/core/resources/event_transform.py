"""The EventTransform kind (Knative's ``eventing.knative.dev/v1alpha1``; docs/transforms.md): a
JSONata expression that reshapes events, with an optional ``sink`` (the transformed event is
delivered there) and ``reply`` (what happens to the sink's reply). A trigger refers to one with
``spec.subscriber.ref``; without a sink, the transformed event is the trigger's reply."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from chalicelib.core import transforms
from chalicelib.core.errors import Problem, ValidationError
from chalicelib.core.resources import meta
from chalicelib.core.resources.conditions import (
    ADDRESSABLE,
    ConditionSet,
    previous_conditions,
)
from chalicelib.core.resources.delivery_spec import (
    destination_json,
    parse_audience,
    parse_destination,
)
from chalicelib.core.resources.fields import json_object as _object
from chalicelib.core.resources.fields import unknown_fields as _unknown_fields
from chalicelib.core.resources.kind import ResourceKind

API_VERSION = "eventing.knative.dev/v1alpha1"
KIND = "EventTransform"
PLURAL = "eventtransforms"
SINK_RESOLVED = "SinkResolved"
TRANSFORM_CONDITIONS = ConditionSet((ADDRESSABLE, SINK_RESOLVED))


@dataclass(frozen=True, slots=True)
class EventTransform:
    namespace: str
    name: str
    # Set at admission (meta.admitted); a parsed body has none yet.
    uid: str = field(default="", kw_only=True)
    generation: int = field(default=0, kw_only=True)
    creation_timestamp: str = field(default="", kw_only=True)
    expression: str
    sink_uri: str | None = None
    sink_audience: str | None = None  # spec.sink.audience: a token for an http(s) sink (§2.5)
    reply_expression: str | None = None  # spec.reply.jsonata.expression: the sink's reply's
    reply_discard: bool = False  # spec.reply.discard: the sink's reply is dropped
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)


def parse_event_transform(namespace: str, body: object, *, path_name: str | None) -> EventTransform:
    """Validate an EventTransform body; raises ValidationError naming every problem, a JSONata
    syntax error with its code and position."""
    return _parse(namespace, body, path_name, check_expressions=True)


def _parse(
    namespace: str, body: object, path_name: str | None, *, check_expressions: bool
) -> EventTransform:
    problems: list[Problem] = []
    name, labels, annotations, spec = meta.envelope(
        namespace, body, API_VERSION, KIND, path_name, problems
    )
    _unknown_fields(spec, ("jsonata", "sink", "reply"), "spec", problems)
    if spec.get("jsonata") is None:
        problems.append(
            Problem("spec.jsonata", "is required: {expression: <a JSONata expression>}")
        )
    expression = _jsonata(spec.get("jsonata"), "spec.jsonata", problems, check_expressions)
    sink = parse_destination(spec.get("sink"), "spec.sink", problems, audience=True)
    sink_audience = parse_audience(spec.get("sink"), "spec.sink", problems)
    reply_expression, discard = None, False
    raw_reply = spec.get("reply")
    if raw_reply is not None:
        reply = _object(raw_reply, "spec.reply", problems)
        _unknown_fields(reply, ("jsonata", "discard"), "spec.reply", problems)
        if spec.get("sink") is None:
            problems.append(
                Problem(
                    "spec.reply",
                    "applies to the sink's reply, so it needs spec.sink (without a sink the "
                    "transformed event itself is the reply)",
                )
            )
        raw_discard = reply.get("discard")
        if raw_discard is not None and not isinstance(raw_discard, bool):
            problems.append(Problem("spec.reply.discard", "must be true or false"))
        discard = raw_discard is True
        if reply.get("jsonata") is not None:
            reply_expression = _jsonata(
                reply.get("jsonata"), "spec.reply.jsonata", problems, check_expressions
            )
            if discard:
                problems.append(
                    Problem("spec.reply", "set either jsonata or discard: true, not both")
                )
    if problems:
        raise ValidationError(problems)
    assert expression is not None
    return EventTransform(
        namespace=namespace,
        name=name,
        expression=expression,
        sink_uri=sink,
        sink_audience=sink_audience,
        reply_expression=reply_expression,
        reply_discard=discard,
        labels=labels,
        annotations=annotations,
    )


def _jsonata(value: object, path: str, problems: list[Problem], check: bool) -> str | None:
    raw = _object(value, path, problems)
    _unknown_fields(raw, ("expression",), path, problems)
    if value is None:
        return None
    expression = raw.get("expression")
    found = (
        transforms.expression_problems(expression, f"{path}.expression")
        if check or not isinstance(expression, str)
        else []
    )
    problems += found
    return None if found else str(expression)


def admit_event_transform(
    parsed: EventTransform, existing: EventTransform | None, *, uid: str, now: datetime
) -> EventTransform:
    return meta.admitted(parsed, existing, uid=uid, now=now, configuration=spec_json)


def spec_json(transform: EventTransform) -> dict[str, Any]:
    spec: dict[str, Any] = {"jsonata": {"expression": transform.expression}}
    if transform.sink_uri is not None:
        spec["sink"] = destination_json(transform.sink_uri, transform.sink_audience)
    if transform.reply_expression is not None:
        spec["reply"] = {"jsonata": {"expression": transform.reply_expression}}
    elif transform.reply_discard:
        spec["reply"] = {"discard": True}
    return spec


def address_path(namespace: str, name: str) -> str:
    """The transform's own path in the API: what ``status.address.url`` names."""
    return f"/apis/{API_VERSION}/namespaces/{namespace}/{PLURAL}/{name}"


def event_transform_status(
    transform: EventTransform,
    *,
    public_url: str,
    now: datetime,
    previous: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Ready as soon as stored: the expression compiled at admission, and there is nothing to
    deploy (delivery evaluates it in the trigger's delivery function)."""
    manager = TRANSFORM_CONDITIONS.manage(previous_conditions(previous), now)
    manager.mark_true(ADDRESSABLE)
    status: dict[str, Any] = {"observedGeneration": transform.generation}
    if transform.sink_uri is None:
        manager.mark_true(
            SINK_RESOLVED,
            "SinkNotConfigured",
            "No sink: a trigger that refers to this transform gets the transformed event as "
            "its reply.",
        )
    else:
        manager.mark_true(SINK_RESOLVED)
        status["sinkUri"] = transform.sink_uri
        if transform.sink_audience is not None:
            status["sinkAudience"] = transform.sink_audience
    url = public_url.rstrip("/") + address_path(transform.namespace, transform.name)
    status["address"] = {"url": url}
    status["conditions"] = manager.to_json()
    return status


EVENT_TRANSFORMS: ResourceKind[EventTransform] = ResourceKind(
    store_kind="eventtransform",
    api_version=API_VERSION,
    kind=KIND,
    plural=PLURAL,
    parse=lambda namespace, body, name: parse_event_transform(namespace, body, path_name=name),
    admit=lambda parsed, old, uid, now: admit_event_transform(parsed, old, uid=uid, now=now),
    spec_json=spec_json,
    # The stored expressions compiled at admission, so not again here.
    reparse=lambda ns, body, name: _parse(ns, body, name, check_expressions=False),
)
