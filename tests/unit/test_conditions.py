from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from chalicelib.core.resources.broker import parse_broker
from chalicelib.core.resources.conditions import (
    BROKER_CONDITIONS,
    FALSE,
    READY,
    TRIGGER_CONDITIONS,
    TRUE,
    UNKNOWN,
    Condition,
    ConditionSet,
    broker_status,
    trigger_status,
)
from chalicelib.core.resources.delivery_spec import DeliverySpec
from chalicelib.core.resources.durations import Duration
from chalicelib.core.resources.trigger import parse_trigger

T0 = datetime(2026, 5, 1, 12, 0, 0, tzinfo=UTC)
T0_TEXT = "2026-05-01T12:00:00Z"
TTL = 5.0
CSET = ConditionSet(("A", "B"))


def conditions_of(status: dict[str, Any]) -> dict[str, dict[str, str]]:
    return {c["type"]: c for c in status["conditions"]}


# --- the condition set ---------------------------------------------------------------------------


def test_every_dependent_starts_unknown() -> None:
    manager = CSET.manage([], T0)
    assert [(c.type, c.status) for c in manager.conditions()] == [
        ("A", UNKNOWN),
        ("B", UNKNOWN),
        (READY, UNKNOWN),
    ]


@pytest.mark.parametrize(
    ("a", "b", "ready", "reason"),
    [
        (TRUE, TRUE, TRUE, ""),
        (TRUE, UNKNOWN, UNKNOWN, "BWait"),
        (UNKNOWN, FALSE, FALSE, "BFail"),  # False trumps Unknown
        (FALSE, FALSE, FALSE, "AFail"),  # the first dependent in the set's order
        (FALSE, TRUE, FALSE, "AFail"),
        (UNKNOWN, UNKNOWN, UNKNOWN, "AWait"),
    ],
)
def test_ready_is_derived(a: str, b: str, ready: str, reason: str) -> None:
    manager = CSET.manage([], T0)
    for type_, status in (("A", a), ("B", b)):
        if status == TRUE:
            manager.mark_true(type_)
        elif status == FALSE:
            manager.mark_false(type_, f"{type_}Fail", f"{type_} failed.")
        else:
            manager.mark_unknown(type_, f"{type_}Wait", f"{type_} is pending.")
    happy = manager.get(READY)
    assert happy is not None
    assert (happy.status, happy.reason) == (ready, reason)
    if reason:
        assert happy.message == f"{reason[0]} {'failed' if 'Fail' in reason else 'is pending'}."


def test_ready_cannot_be_set() -> None:
    manager = CSET.manage([], T0)
    with pytest.raises(ValueError, match="derived"):
        manager.mark_true(READY)
    with pytest.raises(ValueError, match="derived"):
        manager.mark_false(READY, "X", "x")


def test_false_needs_a_reason() -> None:
    with pytest.raises(ValueError, match="reason"):
        CSET.manage([], T0).mark_false("A", "", "no reason")


def test_transition_time_changes_only_with_the_status() -> None:
    earlier = "2026-04-01T00:00:00Z"
    previous = [
        Condition("A", TRUE, last_transition_time=earlier),
        Condition("B", FALSE, "Old", "old", earlier),
        Condition(READY, FALSE, "Old", "old", earlier),
    ]
    manager = CSET.manage(previous, T0)
    manager.mark_true("A")  # unchanged
    manager.mark_false("B", "New", "a new reason, same status")
    times = {c.type: c.last_transition_time for c in manager.conditions()}
    assert times == {"A": earlier, "B": earlier, READY: earlier}
    manager.mark_true("B")  # B and Ready turn True
    times = {c.type: c.last_transition_time for c in manager.conditions()}
    assert times == {"A": earlier, "B": T0_TEXT, READY: T0_TEXT}


def test_condition_json_round_trip() -> None:
    condition = Condition("Ready", FALSE, "BrokerDoesNotExist", 'Broker "b" does not exist', "t")
    assert condition.to_json() == {
        "type": "Ready",
        "status": "False",
        "reason": "BrokerDoesNotExist",
        "message": 'Broker "b" does not exist',
        "lastTransitionTime": "t",
    }
    assert Condition.from_json(condition.to_json()) == condition
    assert Condition("Ready", TRUE, last_transition_time="t").to_json() == {
        "type": "Ready",
        "status": "True",
        "lastTransitionTime": "t",
    }


def test_the_resource_sets() -> None:
    assert BROKER_CONDITIONS.dependents == ("Addressable", "DeadLetterSinkResolved")
    assert TRIGGER_CONDITIONS.dependents == (
        "BrokerReady",
        "SubscriberResolved",
        "DeadLetterSinkResolved",
        "DependencyReady",
    )


# --- broker status -------------------------------------------------------------------------------

BROKER = parse_broker("ns", {"metadata": {"name": "b"}}, path_name=None)
URL = "http://127.0.0.1:8080/ns/b"


def test_broker_ready() -> None:
    status = broker_status(
        BROKER,
        address_url=URL,
        now=T0,
        propagation_ttl_s=TTL,
        provisioned_at=T0 - timedelta(seconds=6),
    )
    assert status["observedGeneration"] == BROKER.generation
    assert status["address"] == {"url": URL}
    assert "deadLetterSinkUri" not in status
    conditions = conditions_of(status)
    assert conditions[READY]["status"] == TRUE
    assert conditions["DeadLetterSinkResolved"]["reason"] == "DeadLetterSinkNotConfigured"


def test_broker_propagating() -> None:
    status = broker_status(
        BROKER,
        address_url=URL,
        now=T0,
        propagation_ttl_s=TTL,
        provisioned_at=T0 - timedelta(seconds=2),
    )
    ready = conditions_of(status)[READY]
    assert (ready["status"], ready["reason"]) == (UNKNOWN, "Propagating")
    assert "2026-05-01T12:00:03Z" in ready["message"]
    assert status["address"] == {"url": URL}  # addressable while it propagates


def test_broker_dead_letter_sink_uri() -> None:
    broker = parse_broker(
        "ns",
        {"metadata": {"name": "b"}, "spec": {"delivery": {"deadLetterSink": {"uri": "http://d/"}}}},
        path_name=None,
    )
    status = broker_status(broker, address_url=URL, now=T0, propagation_ttl_s=TTL)
    assert status["deadLetterSinkUri"] == "http://d/"
    assert conditions_of(status)["DeadLetterSinkResolved"] == {
        "type": "DeadLetterSinkResolved",
        "status": TRUE,
        "lastTransitionTime": T0_TEXT,
    }
    assert conditions_of(status)[READY]["status"] == TRUE


# --- trigger status ------------------------------------------------------------------------------

TRIGGER = parse_trigger(
    "ns",
    {
        "metadata": {"name": "t"},
        "spec": {
            "broker": "b",
            "filter": {"attributes": {"type": "x"}},
            "subscriber": {"uri": "http://sub.example/"},
        },
    },
    path_name=None,
)


def _trigger_status(**facts: Any) -> dict[str, Any]:
    facts.setdefault("broker", BROKER)
    facts.setdefault("dependencies_ok", True)
    facts.setdefault("provisioned_at", T0 - timedelta(minutes=1))
    return trigger_status(
        TRIGGER,
        facts.pop("broker"),
        now=facts.pop("now", T0),
        propagation_ttl_s=TTL,
        **facts,
    )


def test_trigger_ready() -> None:
    status = _trigger_status()
    conditions = conditions_of(status)
    assert {t: c["status"] for t, c in conditions.items()} == {
        "BrokerReady": TRUE,
        "DeadLetterSinkResolved": TRUE,
        "DependencyReady": TRUE,
        READY: TRUE,
        "SubscriberResolved": TRUE,
    }
    assert status["subscriberUri"] == "http://sub.example/"
    assert status["observedGeneration"] == TRIGGER.generation
    assert [c["type"] for c in status["conditions"]] == sorted(conditions)


def test_trigger_before_its_broker() -> None:
    conditions = conditions_of(_trigger_status(broker=None, dependencies_ok=None))
    assert conditions[READY] == {
        "type": READY,
        "status": FALSE,
        "reason": "BrokerDoesNotExist",
        "message": 'Broker "b" does not exist',
        "lastTransitionTime": T0_TEXT,
    }
    assert conditions["BrokerReady"]["reason"] == "BrokerDoesNotExist"
    assert conditions["DependencyReady"]["reason"] == "WaitingForBroker"


@pytest.mark.parametrize(
    ("age_s", "ready", "reason"),
    [(0.0, UNKNOWN, "Propagating"), (4.9, UNKNOWN, "Propagating"), (5.0, TRUE, ""), (60, TRUE, "")],
)
def test_trigger_propagating(age_s: float, ready: str, reason: str) -> None:
    status = _trigger_status(provisioned_at=T0 - timedelta(seconds=age_s))
    condition = conditions_of(status)[READY]
    assert condition["status"] == ready
    assert condition.get("reason", "") == reason
    if reason:
        assert "5s" in condition["message"] and "ready at" in condition["message"]


def test_unknown_provisioning_time_does_not_hold_ready_back() -> None:
    assert conditions_of(_trigger_status(provisioned_at=None))[READY]["status"] == TRUE


def test_trigger_dependencies_missing() -> None:
    message = 'Queue "sb-local-t-0123456789abcdef" is missing; the reconciler re-creates it.'
    ready = conditions_of(_trigger_status(dependencies_ok=False, dependency_message=message))[READY]
    assert (ready["status"], ready["reason"], ready["message"]) == (
        FALSE,
        "DependencyNotReady",
        message,
    )


def test_trigger_not_yet_provisioned() -> None:
    ready = conditions_of(_trigger_status(dependencies_ok=None))[READY]
    assert (ready["status"], ready["reason"]) == (UNKNOWN, "Provisioning")


def test_dead_letter_sink_comes_from_the_effective_delivery() -> None:
    broker = parse_broker(
        "ns",
        {"metadata": {"name": "b"}, "spec": {"delivery": {"deadLetterSink": {"uri": "http://d/"}}}},
        path_name=None,
    )
    assert _trigger_status(broker=broker)["deadLetterSinkUri"] == "http://d/"
    # A trigger with its own delivery ignores the broker's, DLS included (Knative spec; the
    # reference implementation would still show the broker's DLS here).
    own = replace(TRIGGER, delivery=DeliverySpec(retry=1, backoff_delay=Duration("PT1S", 1.0)))
    status = trigger_status(
        own, broker, dependencies_ok=True, now=T0, propagation_ttl_s=TTL, provisioned_at=None
    )
    assert "deadLetterSinkUri" not in status
    assert (
        conditions_of(status)["DeadLetterSinkResolved"]["reason"] == "DeadLetterSinkNotConfigured"
    )


def test_previous_status_keeps_transition_times() -> None:
    first = _trigger_status(broker=None, dependencies_ok=None)
    later = T0 + timedelta(minutes=10)
    second = _trigger_status(broker=None, dependencies_ok=None, now=later, previous=first)
    assert second["conditions"] == first["conditions"]
    third = _trigger_status(now=later, previous=second)
    times = {c["type"]: c["lastTransitionTime"] for c in third["conditions"]}
    assert times["BrokerReady"] == times[READY] == "2026-05-01T12:10:00Z"
    assert times["SubscriberResolved"] == T0_TEXT  # was True before and still is


def test_malformed_previous_conditions_are_ignored() -> None:
    status = _trigger_status(previous={"conditions": ["x", {"type": "Ready"}, None]})
    assert conditions_of(status)[READY]["lastTransitionTime"] == T0_TEXT
