"""The EventPolicy kind (Knative's ``eventing.knative.dev/v1alpha1``; docs/security.md): which
senders may post to which brokers of the namespace, and what they may post.

``spec.to[]``: a broker by ``ref`` {apiVersion, kind Broker, name}, or a ``selector`` on broker
labels; empty: every broker of the namespace. ``spec.from[]``: a ``sub`` (a sender identity,
core/senders.py, with an optional trailing ``*``) or a ``ref`` to a source or a trigger of the
namespace (its identity). ``spec.filters``: the SubscriptionsAPI dialects, every one of which an
event from those senders must pass. Validation reports every problem at once."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Final

from chalicelib.core import senders
from chalicelib.core.errors import Problem, ValidationError
from chalicelib.core.filtering.filters import validate_filters
from chalicelib.core.names import name_problems, namespace_problems, quote
from chalicelib.core.resources import meta
from chalicelib.core.resources.conditions import ConditionSet, previous_conditions
from chalicelib.core.resources.fields import json_object as _object
from chalicelib.core.resources.fields import unknown_fields as _unknown_fields
from chalicelib.core.resources.kind import ResourceKind
from chalicelib.core.resources.label_selector import LabelSelector, parse_selector

API_VERSION = "eventing.knative.dev/v1alpha1"
KIND = "EventPolicy"
PLURAL = "eventpolicies"
AUTHENTICATION_ENABLED = "AuthenticationEnabled"
SUBJECTS_RESOLVED = "SubjectsResolved"
APPLIED = "Applied"  # ours: every ingress applies this generation (the configuration cache's TTL)
POLICY_CONDITIONS = ConditionSet((AUTHENTICATION_ENABLED, SUBJECTS_RESOLVED, APPLIED))

BROKER_GROUP = "eventing.knative.dev"
BROKER_API_VERSION = "eventing.knative.dev/v1"
# What spec.from[].ref may name: kind -> its API group (any version of it: Knative's own
# KafkaSource is sources.knative.dev/v1beta1, ours v1).
SENDER_KINDS: Final = {
    "KafkaSource": "sources.knative.dev",
    "PingSource": "sources.knative.dev",
    "IntegrationSource": "sources.knative.dev",
    "Trigger": "eventing.knative.dev",
}
MAX_TO: Final = 100
MAX_FROM: Final = 100
MAX_FILTERS: Final = 100
MAX_SUB_CHARS: Final = 2048  # an IAM ARN is at most 2,048 characters


@dataclass(frozen=True, slots=True)
class PolicyTarget:
    """One ``spec.to`` element: a broker by name, or the brokers a selector picks."""

    api_version: str = BROKER_API_VERSION
    name: str | None = None
    selector: LabelSelector | None = None

    def to_json(self) -> dict[str, Any]:
        if self.selector is None:
            return {"ref": {"apiVersion": self.api_version, "kind": "Broker", "name": self.name}}
        doc = {"apiVersion": self.api_version, "kind": "Broker", **self.selector.to_json()}
        return {"selector": doc}


@dataclass(frozen=True, slots=True)
class PolicySender:
    """One ``spec.from`` element: a ``sub`` pattern, or a reference to a source or trigger."""

    sub: str | None = None
    api_version: str = ""
    kind: str = ""
    name: str = ""
    namespace: str | None = None  # of the reference; None: the policy's

    def identity(self, policy_namespace: str) -> str:
        """The identity (or pattern) this element admits."""
        if self.sub is not None:
            return self.sub
        namespace = self.namespace or policy_namespace
        if self.kind == "Trigger":
            return senders.trigger(namespace, self.name)
        return senders.source(namespace, self.kind, self.name)

    def to_json(self) -> dict[str, Any]:
        if self.sub is not None:
            return {"sub": self.sub}
        ref = {"apiVersion": self.api_version, "kind": self.kind, "name": self.name}
        if self.namespace is not None:
            ref["namespace"] = self.namespace
        return {"ref": ref}


@dataclass(frozen=True, slots=True)
class EventPolicy:
    namespace: str
    name: str
    # Set at admission (meta.admitted); a parsed body has none yet.
    uid: str = field(default="", kw_only=True)
    generation: int = field(default=0, kw_only=True)
    creation_timestamp: str = field(default="", kw_only=True)
    to: tuple[PolicyTarget, ...] = ()
    senders: tuple[PolicySender, ...] = ()  # spec.from
    filters: tuple[Any, ...] = ()  # the raw spec.filters elements, validated by core.filters
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)

    def identities(self) -> list[str]:
        """``status.from``: what each ``spec.from`` element admits, as Knative resolves it."""
        return [s.identity(self.namespace) for s in self.senders]


def parse_event_policy(namespace: str, body: object, *, path_name: str | None) -> EventPolicy:
    return _parse(namespace, body, path_name, check_filters=True)


def _parse(
    namespace: str, body: object, path_name: str | None, *, check_filters: bool
) -> EventPolicy:
    problems: list[Problem] = []
    name, labels, annotations, spec = meta.envelope(
        namespace, body, API_VERSION, KIND, path_name, problems
    )
    _unknown_fields(spec, ("to", "from", "filters"), "spec", problems)
    to = [
        _target(raw, f"spec.to[{i}]", problems)
        for i, raw in enumerate(_list(spec.get("to"), "spec.to", MAX_TO, problems))
    ]
    from_ = [
        _sender(raw, f"spec.from[{i}]", problems)
        for i, raw in enumerate(_list(spec.get("from"), "spec.from", MAX_FROM, problems))
    ]
    filters = _list(spec.get("filters"), "spec.filters", MAX_FILTERS, problems)
    if check_filters and filters:
        problems += validate_filters(None, filters, path="spec")
    if problems:
        raise ValidationError(problems)
    return EventPolicy(
        namespace=namespace,
        name=name,
        to=tuple(t for t in to if t is not None),
        senders=tuple(s for s in from_ if s is not None),
        filters=tuple(filters),
        labels=labels,
        annotations=annotations,
    )


def _list(value: object, path: str, most: int, problems: list[Problem]) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        problems.append(Problem(path, "must be a list"))
        return []
    if len(value) > most:
        problems.append(Problem(path, f"has {len(value)} elements; at most {most}"))
        return []
    return value


def _one_of(
    raw: object, keys: tuple[str, str], shape: str, path: str, problems: list[Problem]
) -> tuple[str, Any] | None:
    """The one of ``keys`` a ``to`` or ``from`` entry sets, with its value (other keys are
    problems); None, the problem named, unless it sets exactly one."""
    if not isinstance(raw, Mapping):
        problems.append(Problem(path, f"must be {shape}"))
        return None
    _unknown_fields(raw, keys, path, problems)
    given = [k for k in keys if raw.get(k) is not None]
    if len(given) != 1:
        problems.append(Problem(path, f"set exactly one of {keys[0]} or {keys[1]}"))
        return None
    return given[0], raw[given[0]]


def _group(api_version: object) -> str | None:
    if not isinstance(api_version, str) or not api_version:
        return None
    group, _, version = api_version.rpartition("/")
    return group if group and version else None


def _target(raw: object, path: str, problems: list[Problem]) -> PolicyTarget | None:
    mark = len(problems)
    shape = "{ref: {...}} or {selector: {...}}"
    which, value = _one_of(raw, ("ref", "selector"), shape, path, problems) or (None, None)
    if which == "ref":
        ref = _object(value, f"{path}.ref", problems)
        _unknown_fields(ref, ("apiVersion", "kind", "name"), f"{path}.ref", problems)
        api_version = _broker_type(ref, f"{path}.ref", required=True, problems=problems)
        problems += name_problems(ref.get("name"), f"{path}.ref.name", what="broker name")
        if len(problems) == mark:
            return PolicyTarget(api_version=api_version, name=str(ref["name"]))
    elif which == "selector":
        raw_selector = _object(value, f"{path}.selector", problems)
        _unknown_fields(
            raw_selector,
            ("apiVersion", "kind", "matchLabels", "matchExpressions"),
            f"{path}.selector",
            problems,
        )
        api_version = _broker_type(
            raw_selector, f"{path}.selector", required=False, problems=problems
        )
        selector = parse_selector(raw_selector, f"{path}.selector", problems)
        if len(problems) == mark:
            return PolicyTarget(api_version=api_version, selector=selector)
    return None


def _broker_type(
    raw: Mapping[str, Any], path: str, *, required: bool, problems: list[Problem]
) -> str:
    """A target's apiVersion (any version of the eventing group) and kind (Broker: the only
    addressable this broker has). A selector may leave both out."""
    api_version, kind = raw.get("apiVersion"), raw.get("kind")
    if api_version is None and kind is None and not required:
        return BROKER_API_VERSION
    if _group(api_version) != BROKER_GROUP:
        problems.append(
            Problem(
                f"{path}.apiVersion", f'must be "{BROKER_API_VERSION}", got {quote(api_version)}'
            )
        )
    if kind != "Broker":
        problems.append(
            Problem(
                f"{path}.kind", f'must be "Broker" (policies apply to brokers), got {quote(kind)}'
            )
        )
    return str(api_version) if isinstance(api_version, str) else BROKER_API_VERSION


def _sender(raw: object, path: str, problems: list[Problem]) -> PolicySender | None:
    mark = len(problems)
    shape = "{sub: ...} or {ref: {...}}"
    which, value = _one_of(raw, ("ref", "sub"), shape, path, problems) or (None, None)
    if which == "sub":
        sub = value
        if not isinstance(sub, str) or not sub.strip():
            problems.append(Problem(f"{path}.sub", "must be a non-empty string"))
        elif len(sub) > MAX_SUB_CHARS:
            problems.append(Problem(f"{path}.sub", f"at most {MAX_SUB_CHARS} characters"))
        elif "*" in sub[:-1]:
            problems.append(Problem(f"{path}.sub", "'*' is only allowed as the last character"))
        elif sub != sub.strip():
            problems.append(Problem(f"{path}.sub", "must not begin or end with white space"))
        else:
            return PolicySender(sub=sub)
        return None
    if which != "ref":
        return None
    ref = _object(value, f"{path}.ref", problems)
    _unknown_fields(ref, ("apiVersion", "kind", "name", "namespace"), f"{path}.ref", problems)
    kind, api_version = ref.get("kind"), ref.get("apiVersion")
    group = SENDER_KINDS.get(kind) if isinstance(kind, str) else None
    if group is None:
        problems.append(
            Problem(
                f"{path}.ref.kind", f"must be one of {', '.join(SENDER_KINDS)}, got {quote(kind)}"
            )
        )
    elif _group(api_version) != group:
        problems.append(
            Problem(
                f"{path}.ref.apiVersion",
                f"a {kind} is in the API group {group}: "
                f'"{group}/<version>", got {quote(api_version)}',
            )
        )
    problems += name_problems(ref.get("name"), f"{path}.ref.name")
    namespace = ref.get("namespace")
    if namespace is not None:
        problems += namespace_problems(namespace, f"{path}.ref.namespace")
    if len(problems) > mark:
        return None
    return PolicySender(
        api_version=str(api_version),
        kind=str(kind),
        name=str(ref["name"]),
        namespace=None if namespace is None else str(namespace),
    )


def admit_event_policy(
    parsed: EventPolicy, existing: EventPolicy | None, *, uid: str, now: datetime
) -> EventPolicy:
    return meta.admitted(parsed, existing, uid=uid, now=now, configuration=spec_json)


def spec_json(policy: EventPolicy) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if policy.to:
        spec["to"] = [t.to_json() for t in policy.to]
    if policy.senders:
        spec["from"] = [s.to_json() for s in policy.senders]
    if policy.filters:
        spec["filters"] = list(policy.filters)
    return spec


def applies_to(policy: EventPolicy, namespace: str, broker: str, labels: Mapping[str, str]) -> bool:
    """Whether the policy applies to the broker (Knative ``GetEventPoliciesForResource``): same
    namespace, and no ``spec.to`` (every broker), or a ``ref`` naming it, or a selector matching
    its labels."""
    if policy.namespace != namespace:
        return False
    if not policy.to:
        return True
    return any(
        t.name == broker if t.selector is None else t.selector.matches(labels) for t in policy.to
    )


def event_policy_status(
    policy: EventPolicy,
    *,
    now: datetime,
    propagation_ttl_s: float,
    changed_at: datetime | None = None,
    previous: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Ready once every ingress applies it: ``propagation_ttl_s`` (the configuration cache's
    TTL) after ``changed_at`` (when this generation was stored; None: long enough ago). Every
    ``spec.from`` element resolves to an identity by its name (a source not created yet already
    has its identity, as a Knative service account's name is known before its pods run)."""
    manager = POLICY_CONDITIONS.manage(previous_conditions(previous), now)
    manager.mark_true(
        AUTHENTICATION_ENABLED,
        "SenderIdentities",
        "Senders are known by their ingress tokens, IAM principals, sources and triggers.",
    )
    manager.mark_true(SUBJECTS_RESOLVED)
    until = changed_at + timedelta(seconds=propagation_ttl_s) if changed_at else None
    if until is not None and now < until:
        manager.mark_unknown(
            APPLIED,
            "Propagating",
            f"Ingresses apply the policy within {propagation_ttl_s:g}s of its change; applied "
            f"at {meta.format_timestamp(until)}.",
        )
    else:
        manager.mark_true(APPLIED)
    status: dict[str, Any] = {"observedGeneration": policy.generation}
    identities = policy.identities()
    if identities:
        status["from"] = identities
    status["conditions"] = manager.to_json()
    return status


EVENT_POLICIES: ResourceKind[EventPolicy] = ResourceKind(
    store_kind="eventpolicy",
    api_version=API_VERSION,
    kind=KIND,
    plural=PLURAL,
    parse=lambda namespace, body, name: parse_event_policy(namespace, body, path_name=name),
    admit=lambda parsed, old, uid, now: admit_event_policy(parsed, old, uid=uid, now=now),
    spec_json=spec_json,
    # The stored filters were validated at admission, so not again on every read.
    reparse=lambda ns, body, name: _parse(ns, body, name, check_filters=False),
)
