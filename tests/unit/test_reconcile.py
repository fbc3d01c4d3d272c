import json
import random
from dataclasses import replace
from typing import Any

import pytest

from chalicelib.core.names import dlq_name, queue_name
from chalicelib.core.reconcile import (
    Action,
    CreateMapping,
    CreateQueue,
    DeleteMapping,
    DeleteQueue,
    DesiredState,
    EnableMapping,
    ObservedMapping,
    ObservedQueue,
    ObservedState,
    ProvisioningConfig,
    Redrive,
    SetMappingConcurrency,
    SetQueueAttributes,
    max_receive_count,
    plan,
    plan_removal,
    plan_trigger,
    queue_attributes,
    trigger_key,
)
from chalicelib.core.resources.broker import Broker, parse_broker
from chalicelib.core.resources.trigger import Trigger, parse_trigger

CONFIG = ProvisioningConfig(
    prefix="sb-local-",
    delivery_function="sb-delivery",
    dead_letter_function="sb-dead_letter",
    function_timeout_s=60,
)
ATTRS = {"MessageRetentionPeriod": "1209600", "VisibilityTimeout": "360"}
ARN = "arn:aws:sqs:us-east-1:123456789012:"


def broker(name: str = "default", ns: str = "ns", **delivery: Any) -> Broker:
    spec = {"delivery": delivery} if delivery else {}
    return parse_broker(ns, {"metadata": {"name": name}, "spec": spec}, path_name=None)


def trigger(name: str, broker: str = "default", ns: str = "ns", **delivery: Any) -> Trigger:
    spec: dict[str, Any] = {
        "broker": broker,
        "filter": {"attributes": {"type": "x"}},
        "subscriber": {"uri": f"http://{name}.example/"},
    }
    if delivery:
        spec["delivery"] = delivery
    return parse_trigger(ns, {"metadata": {"name": name}, "spec": spec}, path_name=None)


def names(t: Trigger) -> tuple[str, str]:
    return queue_name("sb-local-", *trigger_key(t)), dlq_name("sb-local-", *trigger_key(t))


DLS = {"deadLetterSink": {"uri": "http://dls.example/"}}
ORDERS = trigger("orders")
AUDIT = trigger("audit", retry=2, **DLS)
DESIRED = DesiredState(CONFIG, (broker(),), (ORDERS, AUDIT))


def apply(actions: list[Action], observed: ObservedState) -> ObservedState:
    """What AWS would hold after the actions (a tiny model, to check that plans converge)."""
    queues = {q.name: dict(q.attributes) for q in observed.queues}
    mappings = {m.uuid: m for m in observed.mappings}
    for n, action in enumerate(actions):
        if isinstance(action, CreateQueue | SetQueueAttributes):
            attributes = queues.setdefault(action.name, {})
            attributes.update(action.attributes)
            if action.redrive:
                attributes["RedrivePolicy"] = action.redrive.policy_json(
                    ARN + action.redrive.dead_letter_queue
                )
        elif isinstance(action, DeleteQueue):
            del queues[action.name]
        elif isinstance(action, CreateMapping):
            mappings[f"new-{n}"] = ObservedMapping(
                f"new-{n}",
                action.queue_name,
                action.function_name,
                action.enabled,
                action.batch_size,
                action.function_response_types,
                action.maximum_concurrency,
            )
        elif isinstance(action, EnableMapping):
            mappings[action.uuid] = replace(mappings[action.uuid], enabled=True)
        elif isinstance(action, SetMappingConcurrency):
            mappings[action.uuid] = replace(
                mappings[action.uuid], maximum_concurrency=action.maximum_concurrency
            )
        else:
            del mappings[action.uuid]
    return ObservedState(
        tuple(ObservedQueue(k, v) for k, v in queues.items()), tuple(mappings.values())
    )


CONVERGED = apply(plan(DESIRED, ObservedState()), ObservedState())


def assert_safe_order(actions: list[Action]) -> None:
    """A DLQ before the queue redriving to it, a queue before its mappings, mappings deleted
    before their queues, each deleted queue before its DLQ."""
    position = {id(a): i for i, a in enumerate(actions)}
    created = {a.name: position[id(a)] for a in actions if isinstance(a, CreateQueue)}
    deleted = {a.name: position[id(a)] for a in actions if isinstance(a, DeleteQueue)}
    for a in actions:
        if isinstance(a, CreateQueue) and a.redrive and a.redrive.dead_letter_queue in created:
            assert created[a.redrive.dead_letter_queue] < position[id(a)]
        if isinstance(a, CreateMapping) and a.queue_name in created:
            assert created[a.queue_name] < position[id(a)]
        if isinstance(a, DeleteMapping) and a.queue_name in deleted:
            assert position[id(a)] < deleted[a.queue_name]
        if isinstance(a, DeleteQueue) and a.name + "-dlq" in deleted:
            assert position[id(a)] < deleted[a.name + "-dlq"]


def test_empty_to_full() -> None:
    orders_q, orders_dlq = names(ORDERS)
    audit_q, audit_dlq = names(AUDIT)
    actions = plan(DESIRED, ObservedState())
    assert actions == [
        # triggers in (namespace, broker, name) order: audit, then orders
        CreateQueue(audit_dlq, True, ATTRS),
        CreateQueue(audit_q, False, ATTRS, Redrive(audit_dlq, 2 + 1 + 3)),
        CreateMapping(audit_q, "sb-delivery", 10, ("ReportBatchItemFailures",), True),
        CreateMapping(audit_dlq, "sb-dead_letter", 10),  # only with a dead-letter sink
        CreateQueue(orders_dlq, True, ATTRS),
        CreateQueue(orders_q, False, ATTRS, Redrive(orders_dlq, 10 + 1 + 3)),
        CreateMapping(orders_q, "sb-delivery", 10),
    ]
    assert_safe_order(actions)


def test_converged_plans_nothing() -> None:
    assert plan(DESIRED, CONVERGED) == []


def test_plan_is_deterministic() -> None:
    rng = random.Random(7)
    expected = plan(DESIRED, ObservedState())
    for _ in range(5):
        triggers = list(DESIRED.triggers)
        rng.shuffle(triggers)
        assert plan(replace(DESIRED, triggers=tuple(triggers)), ObservedState()) == expected


def _without_queue(observed: ObservedState, name: str) -> ObservedState:
    return replace(observed, queues=tuple(q for q in observed.queues if q.name != name))


def _with_queue_attrs(observed: ObservedState, name: str, **attrs: str) -> ObservedState:
    queues = tuple(
        ObservedQueue(q.name, {**q.attributes, **attrs}) if q.name == name else q
        for q in observed.queues
    )
    return replace(observed, queues=queues)


def _mapping(observed: ObservedState, queue: str) -> ObservedMapping:
    (found,) = [m for m in observed.mappings if m.queue_name == queue]
    return found


def test_deleted_queue_is_recreated() -> None:
    orders_q, orders_dlq = names(ORDERS)
    assert plan(DESIRED, _without_queue(CONVERGED, orders_q)) == [
        CreateQueue(orders_q, False, ATTRS, Redrive(orders_dlq, 14))
    ]


def test_deleted_dlq_is_recreated_and_the_redrive_still_matches() -> None:
    _, orders_dlq = names(ORDERS)
    assert plan(DESIRED, _without_queue(CONVERGED, orders_dlq)) == [
        CreateQueue(orders_dlq, True, ATTRS)
    ]


def test_deleted_mapping_is_recreated() -> None:
    orders_q, _ = names(ORDERS)
    gone = _mapping(CONVERGED, orders_q)
    observed = replace(CONVERGED, mappings=tuple(m for m in CONVERGED.mappings if m != gone))
    assert plan(DESIRED, observed) == [CreateMapping(orders_q, "sb-delivery", 10)]


def test_disabled_mapping_is_enabled() -> None:
    orders_q, _ = names(ORDERS)
    disabled = _mapping(CONVERGED, orders_q)
    mappings = tuple(replace(m, enabled=False) if m == disabled else m for m in CONVERGED.mappings)
    assert plan(DESIRED, replace(CONVERGED, mappings=mappings)) == [
        EnableMapping(disabled.uuid, orders_q, "sb-delivery")
    ]


def test_mappings_are_created_disabled_when_something_else_consumes_the_queues() -> None:
    # Local runtime against an emulator: its pollers must not compete with ours.
    orders_q, _ = names(ORDERS)
    gone = _mapping(CONVERGED, orders_q)
    others = tuple(replace(m, enabled=False) for m in CONVERGED.mappings if m != gone)
    observed = replace(CONVERGED, mappings=others)
    desired = replace(DESIRED, config=replace(CONFIG, mappings_enabled=False))
    assert plan(desired, observed) == [CreateMapping(orders_q, "sb-delivery", 10, enabled=False)]


def test_disabled_mappings_stay_disabled_and_enabled_ones_are_replaced_when_unwanted() -> None:
    desired = replace(DESIRED, config=replace(CONFIG, mappings_enabled=False))
    disabled = tuple(replace(m, enabled=False) for m in CONVERGED.mappings)
    assert plan(desired, replace(CONVERGED, mappings=disabled)) == []
    orders_q, _ = names(ORDERS)
    enabled = _mapping(CONVERGED, orders_q)
    mappings = tuple(m if m == enabled else replace(m, enabled=False) for m in CONVERGED.mappings)
    assert plan(desired, replace(CONVERGED, mappings=mappings)) == [
        DeleteMapping(enabled.uuid, orders_q, "sb-delivery"),
        CreateMapping(orders_q, "sb-delivery", 10, enabled=False),
    ]


@pytest.mark.parametrize(
    ("attrs", "expected"),
    [
        ({"VisibilityTimeout": "30"}, {"VisibilityTimeout": "360"}),
        ({"MessageRetentionPeriod": "345600"}, {"MessageRetentionPeriod": "1209600"}),
        ({"DelaySeconds": "5"}, {}),  # attributes we do not manage are left alone
    ],
)
def test_attribute_drift(attrs: dict[str, str], expected: dict[str, str]) -> None:
    orders_q, _ = names(ORDERS)
    actions = plan(DESIRED, _with_queue_attrs(CONVERGED, orders_q, **attrs))
    assert actions == ([SetQueueAttributes(orders_q, expected)] if expected else [])


@pytest.mark.parametrize(
    ("policy", "drifted"),
    [
        ({"deadLetterTargetArn": "DLQ", "maxReceiveCount": "14"}, False),  # AWS may send a string
        ({"deadLetterTargetArn": "DLQ", "maxReceiveCount": 3}, True),
        ({"deadLetterTargetArn": ARN + "elsewhere", "maxReceiveCount": 14}, True),
        ({"maxReceiveCount": 14}, True),
        ("not json", True),
        (None, True),
    ],
)
def test_redrive_drift(policy: object, drifted: bool) -> None:
    orders_q, orders_dlq = names(ORDERS)
    if isinstance(policy, dict) and policy.get("deadLetterTargetArn") == "DLQ":
        policy["deadLetterTargetArn"] = ARN + orders_dlq
    text = json.dumps(policy) if isinstance(policy, dict) else policy
    queues = tuple(
        ObservedQueue(
            q.name,
            {k: v for k, v in q.attributes.items() if k != "RedrivePolicy"}
            | ({"RedrivePolicy": text} if text is not None else {}),
        )
        if q.name == orders_q
        else q
        for q in CONVERGED.queues
    )
    actions = plan(DESIRED, replace(CONVERGED, queues=queues))
    expected = [SetQueueAttributes(orders_q, {}, Redrive(orders_dlq, 14))] if drifted else []
    assert actions == expected


def test_redrive_follows_a_retry_change() -> None:
    audit_q, audit_dlq = names(AUDIT)
    changed = replace(DESIRED, triggers=(ORDERS, trigger("audit", retry=7, **DLS)))
    assert plan(changed, CONVERGED) == [SetQueueAttributes(audit_q, {}, Redrive(audit_dlq, 11))]


def test_removed_trigger() -> None:
    audit_q, audit_dlq = names(AUDIT)
    actions = plan(replace(DESIRED, triggers=(ORDERS,)), CONVERGED)
    assert actions == [
        DeleteMapping(_mapping(CONVERGED, audit_q).uuid, audit_q, "sb-delivery"),
        DeleteMapping(_mapping(CONVERGED, audit_dlq).uuid, audit_dlq, "sb-dead_letter"),
        DeleteQueue(audit_q),
        DeleteQueue(audit_dlq),
    ]
    assert_safe_order(actions)


def test_removed_dead_letter_sink_drops_only_the_dlq_mapping() -> None:
    _, audit_dlq = names(AUDIT)
    changed = replace(DESIRED, triggers=(ORDERS, trigger("audit", retry=2)))
    assert plan(changed, CONVERGED) == [
        DeleteMapping(_mapping(CONVERGED, audit_dlq).uuid, audit_dlq, "sb-dead_letter")
    ]


def test_an_added_dead_letter_sink_adds_only_the_dlq_mapping() -> None:
    _, orders_dlq = names(ORDERS)
    changed = replace(DESIRED, triggers=(trigger("orders", retry=10, **DLS), AUDIT))
    assert plan(changed, CONVERGED) == [CreateMapping(orders_dlq, "sb-dead_letter", 10)]


def test_a_dlq_without_a_sink_has_no_mapping_and_one_left_over_is_deleted() -> None:
    """Dead letters without a sink wait in the DLQ for ``dlq list/redrive``: nothing polls it."""
    _, orders_dlq = names(ORDERS)
    assert not any(
        isinstance(a, CreateMapping) and a.queue_name == orders_dlq
        for a in plan(DESIRED, ObservedState())
    )
    stray = ObservedMapping("stray", orders_dlq, "sb-dead_letter", True, 10)
    observed = replace(CONVERGED, mappings=(*CONVERGED.mappings, stray))
    assert plan(DESIRED, observed) == [DeleteMapping("stray", orders_dlq, "sb-dead_letter")]


def test_broker_missing_gets_no_queues() -> None:
    orphan = trigger("early", broker="later")
    assert plan(DesiredState(CONFIG, (broker(),), (orphan,)), ObservedState()) == []


def test_deleted_broker_removes_its_triggers_queues() -> None:
    actions = plan(replace(DESIRED, brokers=()), CONVERGED)
    assert sum(isinstance(a, DeleteMapping) for a in actions) == 3
    assert sorted(a.name for a in actions if isinstance(a, DeleteQueue)) == sorted(
        [*names(ORDERS), *names(AUDIT)]
    )
    assert_safe_order(actions)
    assert apply(actions, CONVERGED) == ObservedState()


def test_broker_in_another_namespace_does_not_count() -> None:
    assert plan(DesiredState(CONFIG, (broker(ns="other"),), (ORDERS,)), ObservedState()) == []


def test_foreign_queues_and_mappings_are_left_alone() -> None:
    observed = replace(
        CONVERGED,
        queues=(
            *CONVERGED.queues,
            ObservedQueue("orders-by-hand"),
            ObservedQueue("sb-local-handmade"),
            ObservedQueue("sb-prod-orders-0123456789abcdef"),
        ),
        mappings=(
            *CONVERGED.mappings,
            ObservedMapping("m-x", "orders-by-hand", "sb-delivery", True),
        ),
    )
    assert plan(DESIRED, observed) == []


def test_duplicate_mappings_keep_one_enabled() -> None:
    orders_q, _ = names(ORDERS)
    keep = _mapping(CONVERGED, orders_q)
    extra = ObservedMapping(
        "a-extra", orders_q, "sb-delivery", True, 10, ("ReportBatchItemFailures",)
    )
    disabled = replace(keep, enabled=False)
    others = tuple(m for m in CONVERGED.mappings if m != keep)
    observed = replace(CONVERGED, mappings=(*others, disabled, extra))
    assert plan(DESIRED, observed) == [DeleteMapping(keep.uuid, orders_q, "sb-delivery")]


@pytest.mark.parametrize(
    "changes",
    [{"function_response_types": ()}, {"batch_size": 1}],
)
def test_misconfigured_mapping_is_replaced(changes: dict[str, Any]) -> None:
    orders_q, _ = names(ORDERS)
    bad = replace(_mapping(CONVERGED, orders_q), **changes)
    others = tuple(m for m in CONVERGED.mappings if m.queue_name != orders_q)
    actions = plan(DESIRED, replace(CONVERGED, mappings=(*others, bad)))
    assert actions == [
        DeleteMapping(bad.uuid, orders_q, "sb-delivery"),
        CreateMapping(orders_q, "sb-delivery", 10),
    ]


def test_unknown_mapping_settings_are_not_compared() -> None:
    orders_q, _ = names(ORDERS)
    vague = replace(_mapping(CONVERGED, orders_q), batch_size=None, function_response_types=None)
    others = tuple(m for m in CONVERGED.mappings if m.queue_name != orders_q)
    assert plan(DESIRED, replace(CONVERGED, mappings=(*others, vague))) == []


def test_mapping_to_an_old_function_is_deleted() -> None:
    orders_q, _ = names(ORDERS)
    stale = ObservedMapping("old", orders_q, "sb-old-delivery", True)
    assert plan(DESIRED, replace(CONVERGED, mappings=(*CONVERGED.mappings, stale))) == [
        DeleteMapping("old", orders_q, "sb-old-delivery")
    ]


def test_plan_trigger_touches_only_that_trigger() -> None:
    orders_q, orders_dlq = names(ORDERS)
    observed = _without_queue(_without_queue(CONVERGED, orders_q), names(AUDIT)[0])
    assert plan_trigger(CONFIG, ORDERS, broker(), observed) == [
        CreateQueue(orders_q, False, ATTRS, Redrive(orders_dlq, 14))
    ]


def test_plan_trigger_without_broker_removes_its_resources() -> None:
    orders_q, orders_dlq = names(ORDERS)
    assert plan_trigger(CONFIG, ORDERS, None, CONVERGED) == [
        DeleteMapping(_mapping(CONVERGED, orders_q).uuid, orders_q, "sb-delivery"),
        DeleteQueue(orders_q),
        DeleteQueue(orders_dlq),
    ]


def test_plan_removal() -> None:
    audit_q, audit_dlq = names(AUDIT)
    actions = plan_removal(CONFIG, [trigger_key(AUDIT)], CONVERGED)
    assert [a for a in actions if isinstance(a, DeleteQueue)] == [
        DeleteQueue(audit_q),
        DeleteQueue(audit_dlq),
    ]
    assert len(actions) == 4


@pytest.mark.parametrize(
    ("timeout", "visibility"), [(1, "6"), (60, "360"), (900, "5400"), (9000, "43200")]
)
def test_visibility_is_six_times_the_function_timeout(timeout: int, visibility: str) -> None:
    assert (
        queue_attributes(replace(CONFIG, function_timeout_s=timeout))["VisibilityTimeout"]
        == visibility
    )


@pytest.mark.parametrize(
    ("retry", "count"), [(None, 4), (0, 4), (10, 14), (996, 1000), (2000, 1000)]
)
def test_max_receive_count_sits_above_the_attempts(retry: int | None, count: int) -> None:
    assert max_receive_count(retry) == count


def test_redrive_policy_json() -> None:
    assert json.loads(Redrive("q-dlq", 14).policy_json(ARN + "q-dlq")) == {
        "deadLetterTargetArn": ARN + "q-dlq",
        "maxReceiveCount": 14,
    }


@pytest.mark.parametrize(
    ("function", "name"),
    [
        ("sb-delivery", "sb-delivery"),
        ("arn:aws:lambda:us-east-1:123456789012:function:sb-delivery", "sb-delivery"),
        ("arn:aws:lambda:us-east-1:123456789012:function:sb-delivery:live", "sb-delivery"),
    ],
)
def test_observed_mapping_from_arns(function: str, name: str) -> None:
    mapping = ObservedMapping.from_arns("u", ARN + "sb-local-x-0123456789abcdef", function, True)
    assert (mapping.queue_name, mapping.function_name) == ("sb-local-x-0123456789abcdef", name)


def test_actions_describe_themselves() -> None:
    assert [a.describe() for a in plan(DESIRED, ObservedState())][:3] == [
        f"create dead-letter queue {names(AUDIT)[1]}",
        f"create queue {names(AUDIT)[0]}",
        f"create mapping {names(AUDIT)[0]} → sb-delivery",
    ]
    assert SetQueueAttributes("q", {"VisibilityTimeout": "1"}, Redrive("d", 4)).describe() == (
        "restore VisibilityTimeout, RedrivePolicy of queue q"
    )


# ---- per-trigger concurrency (ScalingConfig.MaximumConcurrency) -------------------------------


def _annotated(resource: Any, value: str) -> Any:
    annotations = {**resource.annotations, "serverless-broker/max-concurrency": value}
    return replace(resource, annotations=annotations)


def test_mappings_get_the_default_concurrency_or_the_annotation_of_trigger_then_broker() -> None:
    config = replace(CONFIG, max_concurrency=5)
    queue, dlq = names(AUDIT)
    wanted = plan(DesiredState(config, (broker(),), (AUDIT,)), ObservedState())
    created = {a.queue_name: a.maximum_concurrency for a in wanted if isinstance(a, CreateMapping)}
    assert created == {queue: 5, dlq: 5}

    on_broker = DesiredState(config, (_annotated(broker(), "20"),), (AUDIT,))
    both = DesiredState(config, (_annotated(broker(), "20"),), (_annotated(AUDIT, "3"),))
    for desired, expected in ((on_broker, 20), (both, 3)):
        actions = plan(desired, ObservedState())
        assert {a.maximum_concurrency for a in actions if isinstance(a, CreateMapping)} == {
            expected
        }


def test_a_mapping_whose_concurrency_drifted_is_updated_in_place() -> None:
    config = replace(CONFIG, max_concurrency=5)
    queue, _ = names(ORDERS)
    created = plan(DesiredState(config, (broker(),), (ORDERS,)), ObservedState())
    observed = apply(created, ObservedState())
    mapping = next(m for m in observed.mappings if m.queue_name == queue)
    drifted = replace(mapping, maximum_concurrency=50)
    observed = replace(
        observed, mappings=tuple(drifted if m is mapping else m for m in observed.mappings)
    )
    actions = plan(DesiredState(config, (broker(),), (ORDERS,)), observed)
    assert actions == [SetMappingConcurrency(mapping.uuid, queue, config.delivery_function, 5)]


def test_without_a_default_no_concurrency_is_planned() -> None:
    observed = apply(plan(DESIRED, ObservedState()), ObservedState())
    assert plan(DESIRED, observed) == []
    assert all(
        a.maximum_concurrency is None
        for a in plan(DESIRED, ObservedState())
        if isinstance(a, CreateMapping)
    )
