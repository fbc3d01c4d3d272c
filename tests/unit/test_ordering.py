"""Ordered delivery, the pure parts (docs/ordering.md): FIFO queue names, the trigger annotation
and its immutability, the provisioning plan of an ordered trigger, groups and dedup ids."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from chalicelib.core import names
from chalicelib.core.delivery import ordering
from chalicelib.core.errors import ImmutableFieldError, ValidationError
from chalicelib.core.reconcile import (
    FIFO_ATTRIBUTES,
    FIFO_BATCH_SIZE,
    CreateMapping,
    CreateQueue,
    DeleteMapping,
    DeleteQueue,
    ObservedMapping,
    ObservedQueue,
    ObservedState,
    ProvisioningConfig,
    SetQueueAttributes,
    plan_trigger,
    queue_attributes,
)
from chalicelib.core.resources.broker import parse_broker
from chalicelib.core.resources.trigger import (
    DELIVERY_ORDER_ANNOTATION,
    DeliveryOrderChangeError,
    Trigger,
    admit_trigger,
    parse_trigger,
)
from chalicelib.problems import status_of

CONFIG = ProvisioningConfig(
    prefix="sb-local-",
    delivery_function="sb-delivery",
    dead_letter_function="sb-dead_letter",
    function_timeout_s=60,
)
SQS_FIFO_NAME = re.compile(r"^[A-Za-z0-9_-]{1,75}\.fifo$")
labels = st.from_regex(r"\A[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?\Z")
NOW = datetime(2026, 1, 1, tzinfo=UTC)


def trigger(order: str | None = "ordered", name: str = "t", **spec: Any) -> Trigger:
    metadata: dict[str, Any] = {"name": name}
    if order is not None:
        metadata["annotations"] = {DELIVERY_ORDER_ANNOTATION: order}
    body = {"metadata": metadata, "spec": {"subscriber": {"uri": "http://s.example/"}, **spec}}
    return parse_trigger("ns", body, path_name=None)


# ---- names --------------------------------------------------------------------------------------


def test_fifo_names_end_in_fifo_and_keep_the_hash() -> None:
    queue = names.queue_name("sb-local-", "ns", "default", "orders", fifo=True)
    dlq = names.dlq_name("sb-local-", "ns", "default", "orders", fifo=True)
    digest = names.trigger_hash("ns", "default", "orders")
    assert queue == f"sb-local-orders-{digest}.fifo"
    assert dlq == f"sb-local-orders-{digest}-dlq.fifo"
    assert names.dlq_of(queue) == dlq
    assert names.is_fifo(queue) and names.is_fifo(dlq)
    assert names.is_dlq(dlq) and not names.is_dlq(queue)
    # standard names are what they always were
    assert names.queue_name("sb-local-", "ns", "default", "orders") == f"sb-local-orders-{digest}"
    assert names.dlq_of(f"sb-local-orders-{digest}") == f"sb-local-orders-{digest}-dlq"


@given(prefix=st.from_regex(r"\A[A-Za-z0-9_-]{0,40}\Z"), ns=labels, broker=labels, trigger=labels)
def test_fifo_names_always_fit_sqs(prefix: str, ns: str, broker: str, trigger: str) -> None:
    queue = names.queue_name(prefix, ns, broker, trigger, fifo=True)
    dlq = names.dlq_name(prefix, ns, broker, trigger, fifo=True)
    for name in (queue, dlq):
        assert SQS_FIFO_NAME.match(name), name
        assert len(name) <= names.MAX_QUEUE_NAME_LENGTH
        assert names.is_owned_queue(prefix, name)
    assert names.dlq_of(queue) == dlq


def test_all_four_names_of_a_trigger() -> None:
    found = names.trigger_queue_names("sb-", "ns", "b", "t")
    assert len(set(found)) == 4
    assert [names.is_fifo(n) for n in found] == [False, False, True, True]


@pytest.mark.parametrize(
    ("name", "owned"),
    [
        ("sb-local-orders-0123456789abcdef.fifo", True),
        ("sb-local-orders-0123456789abcdef-dlq.fifo", True),
        ("sb-local-orders.fifo", False),
        ("sb-local-orders-0123456789abcdef.fifo-dlq", False),
    ],
)
def test_owned_fifo_queue(name: str, owned: bool) -> None:
    assert names.is_owned_queue("sb-local-", name) is owned


# ---- the annotation -----------------------------------------------------------------------------


def test_annotation_values() -> None:
    assert trigger("ordered").ordered
    assert not trigger("unordered").ordered
    assert not trigger(None).ordered
    with pytest.raises(ValidationError) as err:
        trigger("fifo")
    [problem] = err.value.problems
    assert problem.field == f"metadata.annotations[{DELIVERY_ORDER_ANNOTATION}]"
    assert '"unordered" or "ordered"' in problem.message


@pytest.mark.parametrize(
    ("old", "new"), [("ordered", None), (None, "ordered"), ("unordered", "ordered")]
)
def test_switching_order_is_a_400_naming_the_annotation(old: str | None, new: str | None) -> None:
    stored = admit_trigger(trigger(old), None, uid="u", now=NOW)
    with pytest.raises(DeliveryOrderChangeError) as err:
        admit_trigger(trigger(new), stored, uid="u", now=NOW)
    assert status_of(err.value) == 400
    assert not isinstance(err.value, ImmutableFieldError)
    [problem] = err.value.problems
    assert problem.field == f"metadata.annotations[{DELIVERY_ORDER_ANNOTATION}]"
    assert "cannot change a queue's type" in problem.message
    assert "delete and re-create the trigger" in problem.message


def test_unordered_and_absent_are_the_same_order() -> None:
    stored = admit_trigger(trigger(None), None, uid="u", now=NOW)
    admitted = admit_trigger(trigger("unordered"), stored, uid="u", now=NOW)
    assert not admitted.ordered


# ---- the plan -----------------------------------------------------------------------------------


def test_an_ordered_trigger_gets_fifo_queues_and_batch_size_one() -> None:
    b = parse_broker("ns", {"metadata": {"name": "default"}}, path_name=None)
    t = trigger("ordered", delivery={"deadLetterSink": {"uri": "http://dls.example/"}})
    queue = names.queue_name("sb-local-", "ns", "default", "t", fifo=True)
    dlq = names.dlq_name("sb-local-", "ns", "default", "t", fifo=True)
    actions = plan_trigger(CONFIG, t, b, ObservedState())
    creates = [a for a in actions if isinstance(a, CreateQueue)]
    assert [(a.name, a.is_dlq) for a in creates] == [(dlq, True), (queue, False)]
    for a in creates:
        assert {k: a.attributes[k] for k in FIFO_ATTRIBUTES} == FIFO_ATTRIBUTES
        assert a.attributes["DeduplicationScope"] == "messageGroup"
        assert a.attributes["FifoThroughputLimit"] == "perMessageGroupId"
        assert a.attributes["ContentBasedDeduplication"] == "false"
    assert creates[1].redrive is not None and creates[1].redrive.dead_letter_queue == dlq
    mappings = [a for a in actions if isinstance(a, CreateMapping)]
    assert [(m.queue_name, m.batch_size) for m in mappings] == [
        (queue, FIFO_BATCH_SIZE),
        (dlq, FIFO_BATCH_SIZE),
    ]
    assert FIFO_BATCH_SIZE == 1


def test_an_unordered_trigger_keeps_standard_queues() -> None:
    b = parse_broker("ns", {"metadata": {"name": "default"}}, path_name=None)
    actions = plan_trigger(CONFIG, trigger(None), b, ObservedState())
    creates = [a for a in actions if isinstance(a, CreateQueue)]
    assert all(not names.is_fifo(a.name) and "FifoQueue" not in a.attributes for a in creates)
    assert all(a.batch_size == CONFIG.batch_size for a in actions if isinstance(a, CreateMapping))


def test_fifo_drift_is_restored_but_never_the_queue_type() -> None:
    b = parse_broker("ns", {"metadata": {"name": "default"}}, path_name=None)
    t = trigger("ordered")
    queue = names.queue_name("sb-local-", "ns", "default", "t", fifo=True)
    dlq = names.dlq_name("sb-local-", "ns", "default", "t", fifo=True)
    good = queue_attributes(CONFIG, fifo=True)
    drifted = {**good, "FifoThroughputLimit": "perQueue"}
    del drifted["FifoQueue"]  # as if an emulator did not report it: not something to set
    arn = "arn:aws:sqs:us-east-1:123456789012:"
    redrive = f'{{"deadLetterTargetArn": "{arn}{dlq}", "maxReceiveCount": 14}}'
    observed = ObservedState(
        (ObservedQueue(dlq, good), ObservedQueue(queue, {**drifted, "RedrivePolicy": redrive})),
        (
            ObservedMapping.from_arns(
                "m1", arn + queue, "sb-delivery", True, 1, ("ReportBatchItemFailures",)
            ),
        ),
    )
    actions = plan_trigger(CONFIG, t, b, observed)
    assert actions == [SetQueueAttributes(queue, {"FifoThroughputLimit": "perMessageGroupId"})]


def test_a_trigger_recreated_ordered_replaces_its_standard_queues() -> None:
    """Delete, then create again with the annotation: the old standard queues and their mapping
    go (they are the same trigger's by name), the FIFO ones come."""
    b = parse_broker("ns", {"metadata": {"name": "default"}}, path_name=None)
    old_queue = names.queue_name("sb-local-", "ns", "default", "t")
    old_dlq = names.dlq_name("sb-local-", "ns", "default", "t")
    arn = "arn:aws:sqs:us-east-1:123456789012:"
    observed = ObservedState(
        (ObservedQueue(old_dlq, {}), ObservedQueue(old_queue, {})),
        (ObservedMapping.from_arns("m1", arn + old_queue, "sb-delivery", True, 10),),
    )
    actions = plan_trigger(CONFIG, trigger("ordered"), b, observed)
    assert actions[0] == DeleteMapping("m1", old_queue, "sb-delivery")
    assert actions[-2:] == [DeleteQueue(old_queue), DeleteQueue(old_dlq)]
    created = [a.name for a in actions if isinstance(a, CreateQueue)]
    assert created and all(names.is_fifo(n) for n in created)


# ---- groups and dedup ids -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "group"),
    [
        (None, ordering.UNKEYED_GROUP),
        ("customer-42", "customer-42"),
        (42, "42"),
        ("a/b:c{d}~!", "a/b:c{d}~!"),
    ],
)
def test_group_is_the_partitionkey(key: object, group: str) -> None:
    assert ordering.message_group(key) == group


@pytest.mark.parametrize("key", ["x" * 129, "naïve", "with space", "tab\t", ""])
def test_a_key_sqs_cannot_take_is_hashed_stably(key: str) -> None:
    group = ordering.message_group(key)
    assert re.fullmatch(r"sha256:[0-9a-f]{64}", group)
    assert ordering.message_group(key) == group
    assert ordering.message_group(key + "!") != group


def test_dedup_ids() -> None:
    a, b = ordering.body_dedup_id('{"id":"1"}'), ordering.body_dedup_id('{"id":"2"}')
    assert a != b and a == ordering.body_dedup_id('{"id":"1"}') and len(a) <= 128
    uuid = "0f8fad5b-d9cb-469f-a165-70867728950e"
    assert ordering.moved_dedup_id(uuid) == uuid
    assert ordering.group_of({"MessageGroupId": "k"}) == "k"
    assert ordering.group_of({}) == ordering.UNKEYED_GROUP
