"""EventPolicies (docs/security.md) as a resource kind of the generic service, what a broker's
configuration carries of them (the compiled rules of the policies that apply to it, cached with
its routes: no store read per event), ``status.policies`` of a broker, and the test call
``POST .../eventpolicies-test``.

A policy change reaches every ingress within the configuration cache's bound, as a trigger
does: a write of a policy moves the namespace's epoch (routing.ROUTING_KINDS), and this
container's cache is dropped at once."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any

from chalicelib.core import authorization
from chalicelib.core.authorization import Decision, Rule, compile_rule
from chalicelib.core.clock import utcnow
from chalicelib.core.cloudevents.json_format import event_from_object
from chalicelib.core.errors import ConflictError, Problem, ValidationError
from chalicelib.core.names import name_problems
from chalicelib.core.resources.broker import BROKERS, Broker
from chalicelib.core.resources.event_policy import (
    API_VERSION,
    EVENT_POLICIES,
    MAX_SUB_CHARS,
    EventPolicy,
    applies_to,
    event_policy_status,
)
from chalicelib.ports import ResourceStore
from chalicelib.services.resources import Hooks, Resources, Stored

if TYPE_CHECKING:
    from chalicelib.services.routing import ConfigCache

# Policies a namespace may hold: every configuration load of one of its brokers reads them all,
# so a client looping on create would slow each load without end.
MAX_POLICIES_PER_NAMESPACE = 500
MAX_COMPILED = 10_000  # compiled rules kept per container (like routing's compiled filters)

_RULES: dict[tuple[str, str, str, int], Rule] = {}
_RULES_LOCK = threading.Lock()


def _rule(policy: EventPolicy) -> Rule:
    """A policy compiled once per generation (a spec change bumps it)."""
    key = (policy.namespace, policy.name, policy.uid, policy.generation)
    rule = _RULES.get(key)
    if rule is None:
        rule = compile_rule(policy)
        with _RULES_LOCK:
            if len(_RULES) >= MAX_COMPILED:
                _RULES.pop(next(iter(_RULES)))
            _RULES[key] = rule
    return rule


def applying(store: ResourceStore, broker: Broker) -> list[EventPolicy]:
    """The policies of the broker's namespace that apply to it, by name."""
    policies = Resources(store, EVENT_POLICIES).list(broker.namespace)
    found = [
        s.resource
        for s in policies
        if applies_to(s.resource, broker.namespace, broker.name, broker.labels)
    ]
    return sorted(found, key=lambda p: p.name)


def broker_rules(store: ResourceStore, broker: Broker) -> tuple[Rule, ...]:
    """What a broker's cached configuration carries: the compiled applying policies."""
    return tuple(_rule(p) for p in applying(store, broker))


def applied_refs(store: ResourceStore, broker: Broker) -> list[dict[str, str]]:
    """A broker's ``status.policies``, Knative's ``AppliedEventPolicyRef`` list."""
    return [{"apiVersion": API_VERSION, "name": p.name} for p in applying(store, broker)]


class EventPolicyHooks(Hooks[EventPolicy]):
    def __init__(
        self,
        policies: Resources[EventPolicy],
        cache: ConfigCache,
        propagation_ttl_s: float,
        clock: Callable[[], datetime] = utcnow,
    ) -> None:
        self.policies = policies
        self._cache = cache
        self._ttl = propagation_ttl_s
        self._clock = clock

    def status(self, stored: Stored[EventPolicy]) -> dict[str, Any]:
        changed = stored.state.get("changed_at")
        return event_policy_status(
            stored.resource,
            now=self._clock(),
            propagation_ttl_s=self._ttl,
            changed_at=datetime.fromisoformat(changed) if isinstance(changed, str) else None,
            previous=stored.status,
        )

    def initial_state(self, now: datetime) -> dict[str, Any]:
        return {"changed_at": now.isoformat(), "generation": 1}

    def check(self, resource: EventPolicy) -> None:
        if self.policies.get(resource.namespace, resource.name) is not None:
            return  # a replacement does not add one
        held = len(self.policies.list(resource.namespace))
        if held >= MAX_POLICIES_PER_NAMESPACE:
            raise ConflictError(
                f'namespace "{resource.namespace}" holds {held} event policies, the most it may; '
                "delete one before creating another"
            )

    def saved(self, stored: Stored[EventPolicy], existed: bool) -> Stored[EventPolicy]:
        # This container's brokers see the change at once; other containers within the cache
        # TTL (the store's epoch moves with every write of a routing kind), which the status
        # counts from this generation's change.
        self._cache.invalidate()
        generation = stored.resource.generation
        if stored.state.get("generation") != generation:
            state = {"changed_at": self._clock().isoformat(), "generation": generation}
            stored = self.policies.with_state(stored, state)
        return stored

    def removed(self, stored: Stored[EventPolicy]) -> None:
        self._cache.invalidate()


_TEST_FIELDS = ("broker", "identity", "event")


class PolicyTest:
    """``POST .../eventpolicies-test`` ``{"broker"?, "identity", "event"}`` → ``{"allowed",
    "policy", "decision", "reason", "policies"}``: what the broker's ingress would decide for
    that sender and event now, from the stored policies (ingresses apply a change within the
    cache's bound). Nothing is created or sent."""

    def __init__(self, store: ResourceStore, mode: str) -> None:
        self._store = store
        self._mode = mode

    def run(self, namespace: str, body: Any) -> dict[str, Any]:
        if not isinstance(body, Mapping):
            raise ValidationError([Problem("body", "must be a JSON object")])
        problems: list[Problem] = []
        for key in body:
            if key not in _TEST_FIELDS:
                where = str(key)[:64]
                problems.append(Problem(where, f"unknown field; known: {', '.join(_TEST_FIELDS)}"))
        problems += name_problems(namespace, "path.namespace", what="namespace")
        broker_name = body.get("broker", "default")
        problems += name_problems(broker_name, "broker", what="broker name")
        identity = body.get("identity")
        if identity is not None and (not isinstance(identity, str) or not identity):
            problems.append(Problem("identity", "must be a sender identity, or null: anonymous"))
        elif isinstance(identity, str) and len(identity) > MAX_SUB_CHARS:
            problems.append(Problem("identity", f"at most {MAX_SUB_CHARS} characters"))
        event = None
        if body.get("event") is None:
            problems.append(Problem("event", "required: a CloudEvent in JSON format"))
        else:
            event = event_from_object(body["event"], False, "event.", problems)
        if problems or event is None:
            raise ValidationError(problems)
        broker = Resources(self._store, BROKERS).require(namespace, str(broker_name)).resource
        policies = applying(self._store, broker)
        decision = self.decide(broker, [_rule(p) for p in policies], identity, event)
        return {
            "allowed": decision.allowed,
            "policy": decision.policy,
            "decision": decision.decision,
            "reason": decision.detail,
            "policies": [p.name for p in policies],
        }

    def decide(
        self, broker: Broker, rules: list[Rule], identity: str | None, event: Any
    ) -> Decision:
        if not authorization.guarded(rules, broker.ingress_auth):
            return Decision(
                True,
                authorization.OPEN,
                "no policy applies and the broker has no ingress-auth: every sender is admitted",
            )
        return authorization.decide(
            rules, self._mode, broker.namespace, broker.name, identity, [event]
        )
