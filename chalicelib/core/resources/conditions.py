"""Status as Knative condition sets (knative.dev/pkg ``apis.ConditionSet``).

A set names its dependent conditions; ``Ready`` is derived from them and never set directly: the
first dependent that is False makes Ready False with its reason and message, else the first that
is Unknown makes it Unknown, else Ready is True. ``lastTransitionTime`` changes only when a
condition's status changes from the previous status, so a recomputed status keeps its history.

``broker_status`` and ``trigger_status`` compute a whole ``status`` object from facts the control
plane observed; they are pure (``now`` is a parameter).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

from chalicelib.core.resources.broker import Broker
from chalicelib.core.resources.meta import format_timestamp
from chalicelib.core.resources.trigger import Trigger, effective_delivery

TRUE = "True"
FALSE = "False"
UNKNOWN = "Unknown"
READY = "Ready"

ADDRESSABLE = "Addressable"
BROKER_READY = "BrokerReady"
SUBSCRIBER_RESOLVED = "SubscriberResolved"
DEAD_LETTER_SINK_RESOLVED = "DeadLetterSinkResolved"
DEPENDENCY_READY = "DependencyReady"


@dataclass(frozen=True, slots=True)
class Condition:
    type: str
    status: str  # "True" | "False" | "Unknown"
    reason: str = ""  # CamelCase, for machines
    message: str = ""  # a sentence, for people
    last_transition_time: str = ""

    def to_json(self) -> dict[str, str]:
        out = {
            "type": self.type,
            "status": self.status,
            "lastTransitionTime": self.last_transition_time,
        }
        if self.reason:
            out["reason"] = self.reason
        if self.message:
            out["message"] = self.message
        return out

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> Condition:
        return cls(
            type=str(raw["type"]),
            status=str(raw["status"]),
            reason=str(raw.get("reason", "")),
            message=str(raw.get("message", "")),
            last_transition_time=str(raw.get("lastTransitionTime", "")),
        )


@dataclass(frozen=True, slots=True)
class ConditionSet:
    """The dependents, in the order that picks Ready's reason when several are not True."""

    dependents: tuple[str, ...]
    happy: str = READY

    def manage(self, previous: Iterable[Condition], now: datetime) -> ConditionManager:
        return ConditionManager(self, previous, now)


class ConditionManager:
    """Marks conditions on a fresh status, starting with every dependent Unknown (Knative's
    ``InitializeConditions``); ``previous`` only supplies transition times."""

    def __init__(self, conditions: ConditionSet, previous: Iterable[Condition], now: datetime):
        self._set = conditions
        self._now = format_timestamp(now)
        self._previous = {c.type: c for c in previous}
        self._current: dict[str, Condition] = {}
        for dependent in conditions.dependents:
            self._put(Condition(dependent, UNKNOWN))

    def mark_true(self, type_: str, reason: str = "", message: str = "") -> None:
        self._put(Condition(type_, TRUE, reason, message))

    def mark_false(self, type_: str, reason: str, message: str) -> None:
        if not reason:
            raise ValueError("a False condition needs a reason")
        self._put(Condition(type_, FALSE, reason, message))

    def mark_unknown(self, type_: str, reason: str, message: str) -> None:
        self._put(Condition(type_, UNKNOWN, reason, message))

    def get(self, type_: str) -> Condition | None:
        return self._current.get(type_)

    def conditions(self) -> list[Condition]:
        """Sorted by type, as Knative keeps them."""
        return sorted(self._current.values(), key=lambda c: c.type)

    def to_json(self) -> list[dict[str, str]]:
        return [c.to_json() for c in self.conditions()]

    def _put(self, condition: Condition, *, derived: bool = False) -> None:
        if condition.type == self._set.happy and not derived:
            raise ValueError(f"{self._set.happy} is derived from the other conditions")
        before = self._previous.get(condition.type)
        if before is not None and before.status == condition.status:
            stamped = replace(condition, last_transition_time=before.last_transition_time)
        else:
            stamped = replace(condition, last_transition_time=self._now)
        self._current[condition.type] = stamped
        if not derived:
            self._derive()

    def _derive(self) -> None:
        dependents = [self._current[t] for t in self._set.dependents if t in self._current]
        for status in (FALSE, UNKNOWN):
            worst = next((c for c in dependents if c.status == status), None)
            if worst is not None:
                happy = Condition(self._set.happy, status, worst.reason, worst.message)
                break
        else:
            happy = Condition(self._set.happy, TRUE)
        self._put(happy, derived=True)


BROKER_CONDITIONS = ConditionSet((ADDRESSABLE, DEAD_LETTER_SINK_RESOLVED))
TRIGGER_CONDITIONS = ConditionSet(
    (BROKER_READY, SUBSCRIBER_RESOLVED, DEAD_LETTER_SINK_RESOLVED, DEPENDENCY_READY)
)


def broker_status(
    broker: Broker,
    *,
    address_url: str,
    now: datetime,
    propagation_ttl_s: float,
    provisioned_at: datetime | None = None,
    previous: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """A broker is Ready once every ingress knows it: ``propagation_ttl_s`` (the ingress cache
    TTL) after ``provisioned_at`` (when it was stored; None: long enough ago)."""
    manager = BROKER_CONDITIONS.manage(_previous_conditions(previous), now)
    until = _propagation_end(provisioned_at, propagation_ttl_s, now)
    if until is None:
        manager.mark_true(ADDRESSABLE)
    else:
        manager.mark_unknown(
            ADDRESSABLE,
            "Propagating",
            f"Ingresses learn about the broker within {propagation_ttl_s:g}s; "
            f"ready at {format_timestamp(until)}.",
        )
    status: dict[str, Any] = {"observedGeneration": broker.generation}
    if broker.delivery.dead_letter_sink_ref is not None:  # resolved per trigger, in its status
        ref = broker.delivery.dead_letter_sink_ref
        said = f'Dead letters go to IntegrationSink "{ref}".'
        manager.mark_true(DEAD_LETTER_SINK_RESOLVED, "IntegrationSink", said)
    else:
        _mark_dead_letter_sink(manager, broker.delivery.dead_letter_sink_uri, status)
        if broker.delivery.dead_letter_sink_audience is not None:
            status["deadLetterSinkAudience"] = broker.delivery.dead_letter_sink_audience
    status["address"] = {"url": address_url}
    status["conditions"] = manager.to_json()
    return status


def trigger_status(
    trigger: Trigger,
    broker: Broker | None,
    *,
    dependencies_ok: bool | None,
    now: datetime,
    propagation_ttl_s: float,
    dependency_message: str = "",
    provisioned_at: datetime | None = None,
    previous: Mapping[str, Any] | None = None,
    transform_url: str | None = None,
    subscriber_problem: tuple[str, str] | None = None,
    dead_letter_problem: tuple[str, str] | None = None,
    sink_targets: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The trigger's status from what the control plane knows.

    ``sink_targets``: the targets of the IntegrationSinks its subscriber or dead-letter sink
    names (docs/targets.md), by name, of those that exist (one missing: the condition is False,
    reason IntegrationSinkNotFound).

    ``subscriber_problem``: (reason, message) when its AWS target does not exist or refuses the
    broker (SubscriberNotFound, SubscriberNotAuthorized; docs/targets.md), or its Connection is
    not Ready (ConnectionNotReady); ``dead_letter_problem`` the same for its dead-letter sink.

    ``transform_url``: for a trigger whose ``subscriber.ref`` names an EventTransform, the
    transform's address, or None while it does not exist (SubscriberResolved is then False).

    ``dependencies_ok``: whether its queue, DLQ and mapping(s) exist as planned (None: not
    provisioned yet), with ``dependency_message`` saying what is wrong. ``provisioned_at``: when
    they were last created; until ``propagation_ttl_s`` (the ingress cache TTL) has passed since,
    some ingress may not route to the trigger yet, so it is not Ready (reason ``Propagating``).
    """
    manager = TRIGGER_CONDITIONS.manage(_previous_conditions(previous), now)
    status: dict[str, Any] = {"observedGeneration": trigger.generation}
    if broker is None:
        manager.mark_false(
            BROKER_READY, "BrokerDoesNotExist", f'Broker "{trigger.broker}" does not exist'
        )
    else:
        manager.mark_true(BROKER_READY)
    targets = sink_targets or {}
    if trigger.subscriber_ref is None:
        uri = trigger.subscriber_uri
        if trigger.subscriber_sink is not None:
            uri = targets.get(trigger.subscriber_sink, "")
        if not uri:
            missing = _sink_missing(trigger, trigger.subscriber_sink)
            manager.mark_false(SUBSCRIBER_RESOLVED, *missing)
        elif subscriber_problem is None:
            manager.mark_true(SUBSCRIBER_RESOLVED)
        else:
            manager.mark_false(SUBSCRIBER_RESOLVED, *subscriber_problem)
        if uri:
            status["subscriberUri"] = uri
        if trigger.subscriber_audience is not None:
            status["subscriberAudience"] = trigger.subscriber_audience
    elif transform_url is None:
        manager.mark_false(
            SUBSCRIBER_RESOLVED,
            "TransformNotFound",
            f'EventTransform "{trigger.subscriber_ref}" does not exist in namespace '
            f'"{trigger.namespace}".',
        )
    else:
        manager.mark_true(SUBSCRIBER_RESOLVED)
        status["subscriberUri"] = transform_url
    delivery = effective_delivery(trigger, broker)
    sink = delivery.dead_letter_sink_uri
    if delivery.dead_letter_sink_ref is not None:
        sink = targets.get(delivery.dead_letter_sink_ref)
    if sink is None and delivery.dead_letter_sink_ref is not None:
        problem = _sink_missing(trigger, delivery.dead_letter_sink_ref)
        manager.mark_false(DEAD_LETTER_SINK_RESOLVED, *problem)
    else:
        _mark_dead_letter_sink(manager, sink, status, dead_letter_problem)
    if sink is not None and delivery.dead_letter_sink_audience is not None:
        status["deadLetterSinkAudience"] = delivery.dead_letter_sink_audience
    until = _propagation_end(provisioned_at, propagation_ttl_s, now)
    if broker is None:
        manager.mark_unknown(
            DEPENDENCY_READY,
            "WaitingForBroker",
            f'The queues are created once broker "{trigger.broker}" exists.',
        )
    elif dependencies_ok is None:
        manager.mark_unknown(
            DEPENDENCY_READY,
            "Provisioning",
            dependency_message or "The queue, dead-letter queue and mapping are being created.",
        )
    elif not dependencies_ok:
        manager.mark_false(
            DEPENDENCY_READY,
            "DependencyNotReady",
            dependency_message or "The trigger's queues or mappings are missing.",
        )
    elif until is not None:
        manager.mark_unknown(
            DEPENDENCY_READY,
            "Propagating",
            f"Ingresses route events to the trigger within {propagation_ttl_s:g}s of its "
            f"provisioning; ready at {format_timestamp(until)}.",
        )
    else:
        manager.mark_true(DEPENDENCY_READY)
    status["conditions"] = manager.to_json()
    return status


def _sink_missing(trigger: Trigger, name: str | None) -> tuple[str, str]:
    return (
        "IntegrationSinkNotFound",
        f'IntegrationSink "{name}" does not exist in namespace "{trigger.namespace}".',
    )


def _mark_dead_letter_sink(
    manager: ConditionManager,
    sink: str | None,
    status: dict[str, Any],
    problem: tuple[str, str] | None = None,
) -> None:
    if sink is None:
        # Knative's wording: not configured is fine, so the condition is True with a reason.
        manager.mark_true(
            DEAD_LETTER_SINK_RESOLVED,
            "DeadLetterSinkNotConfigured",
            "No dead letter sink is configured.",
        )
    else:
        if problem is None:
            manager.mark_true(DEAD_LETTER_SINK_RESOLVED)
        else:
            manager.mark_false(DEAD_LETTER_SINK_RESOLVED, *problem)
        status["deadLetterSinkUri"] = sink


def _propagation_end(
    provisioned_at: datetime | None, ttl_s: float, now: datetime
) -> datetime | None:
    """When propagation ends, or None when it already has."""
    if provisioned_at is None:
        return None
    end = provisioned_at + timedelta(seconds=ttl_s)
    return end if now < end else None


def _previous_conditions(previous: Mapping[str, Any] | None) -> list[Condition]:
    if not previous:
        return []
    out = []
    for raw in previous.get("conditions") or []:
        if isinstance(raw, Mapping) and "type" in raw and "status" in raw:
            out.append(Condition.from_json(raw))
    return out


previous_conditions = _previous_conditions  # for the kinds in other modules (replay.py)
