"""Triggers whose subscriber or dead-letter sink is an ARN (docs/targets.md): each target kind
gets the event in structured JSON with its service's fields; AWS errors retry or dead-letter as
the table says, with knativeerror* naming the ARN; a Lambda result that is a CloudEvent is a
reply; the stage's target_arn_patterns refuse the rest at PUT. In-memory fakes."""

from __future__ import annotations

import base64
import json
from dataclasses import replace
from typing import Any

import pytest

from chalicelib.config import Settings
from chalicelib.core.delivery.aws_targets import execution_name
from chalicelib.core.errors import ValidationError
from chalicelib.ports import HttpResponse, TargetResult
from tests.fakes.aws_targets import MemoryTargets
from tests.functional.harness import Harness

A = "arn:aws:{}:us-east-1:123456789012:{}"
FUNCTION = A.format("lambda", "function:orders")
QUEUE = A.format("sqs", "orders")
FIFO_QUEUE = A.format("sqs", "orders.fifo")
TOPIC = A.format("sns", "orders")
MACHINE = A.format("states", "stateMachine:orders")
BUS = A.format("events", "event-bus/orders")
STREAM = A.format("kinesis", "stream/orders")
FIREHOSE = A.format("firehose", "deliverystream/orders")


def setup(
    arn: str, *, create: bool = True, settings: Settings | None = None, **spec: Any
) -> tuple[Harness, MemoryTargets]:
    h = Harness(HttpResponse(500, {}, b"the HTTP sender must not be used"), settings=settings)
    targets = MemoryTargets()
    h.container.aws_targets = targets  # type: ignore[misc]
    if create:
        targets.create(arn)
    h.broker()
    h.trigger("tr", uri=arn, filter={"type": "t"}, **spec)
    return h, targets


def outcomes(h: Harness) -> list[str]:
    return [r["outcome"] for r in h.archive.decoded() if r["kind"] == "delivery"]


@pytest.mark.parametrize("arn", [QUEUE, TOPIC, MACHINE, BUS, STREAM, FIREHOSE, FUNCTION])
def test_each_target_gets_the_event_in_structured_json(arn: str) -> None:
    h, targets = setup(arn)
    h.send(data=b"payload", subject="s")
    assert h.deliver_once("tr")["batchItemFailures"] == []
    [call] = targets.sent[arn]
    doc = json.loads(call.body)
    assert doc["id"] == "1" and doc["type"] == "t" and doc["data"] == "payload"
    assert "knativebrokerttl" not in doc and "knativearrivaltime" in doc
    assert outcomes(h) == ["delivered"]
    assert h.sender.sent == []


def test_the_fields_each_service_takes() -> None:
    for arn, check in [
        (TOPIC, lambda c: c.attributes == {"ce-type": "t", "ce-source": "/src", "ce-id": "1",
                                           "ce-subject": "s"}),
        (MACHINE, lambda c: c.name == execution_name("/src", "1")),
        (BUS, lambda c: (c.source, c.detail_type) == ("/src", "t")),
        (STREAM, lambda c: c.partition_key == "1"),
        (QUEUE, lambda c: c.group_id is None and c.dedup_id is None),
    ]:  # fmt: skip
        h, targets = setup(arn)
        h.send(subject="s")
        h.deliver_once("tr")
        [call] = targets.sent[arn]
        assert check(call), (arn, call)


def test_fifo_queue_gets_group_and_dedup_ids_and_kinesis_the_partition_key() -> None:
    h, targets = setup(FIFO_QUEUE)
    h.send(id_="1", partitionkey="customer-7")
    h.send(id_="2")
    h.deliver_once("tr")
    first, second = targets.sent[FIFO_QUEUE]
    assert first.group_id == "customer-7" and second.group_id == "tr"  # else the trigger
    assert first.dedup_id and second.dedup_id and first.dedup_id != second.dedup_id
    h, targets = setup(STREAM)
    h.send(partitionkey="customer-7")
    h.deliver_once("tr")
    assert targets.sent[STREAM][0].partition_key == "customer-7"


@pytest.mark.parametrize(
    ("code", "status", "recorded"),
    [
        ("ThrottlingException", 400, 429),
        ("InternalFailure", 500, 500),
        ("Timeout", None, 500),  # no answer: Knative records 500
        ("FunctionError", 200, 502),
    ],
)
def test_retryable_errors_are_retried_with_backoff_then_dead_lettered(
    code: str, status: int | None, recorded: int
) -> None:
    h, targets = setup(QUEUE, delivery={"retry": 1, "backoffPolicy": "linear",
                                        "backoffDelay": "PT3S"})  # fmt: skip
    failure = TargetResult(code, "try later", status)
    targets.fail_next(QUEUE, failure, failure)
    h.send()
    assert len(h.deliver_once("tr")["batchItemFailures"]) == 1
    message = h.queues._q(h.queue_of("tr"))["messages"][0]
    assert message.visible_at - h.queues._clock() == pytest.approx(3, abs=0.5)
    h.make_visible("tr")
    h.deliver_once("tr")
    [dead] = h.messages(h.dlq_of("tr"))
    assert dead["event"]["knativeerrordest"] == QUEUE
    assert dead["event"]["knativeerrorcode"] == recorded
    data = json.loads(base64.b64decode(dead["event"]["knativeerrordata"]))
    assert data == {"code": code, "message": "try later"}
    assert outcomes(h) == ["retry", "dead_lettered"]


def test_a_retry_that_succeeds_delivers_once() -> None:
    h, targets = setup(QUEUE, delivery={"retry": 3})
    targets.fail_next(QUEUE, TargetResult("ThrottlingException", "slow down", 400))
    h.send()
    h.deliver_once("tr")
    h.make_visible("tr")
    h.deliver_once("tr")
    assert len(targets.sent[QUEUE]) == 1 and outcomes(h) == ["retry", "delivered"]


@pytest.mark.parametrize(
    ("arrange", "code", "recorded"),
    [
        (lambda t: t.denied.add(QUEUE), "AccessDeniedException", 403),
        (lambda t: None, "AWS.SimpleQueueService.NonExistentQueue", 404),
        (
            lambda t: t.fail_next(QUEUE, TargetResult("InvalidParameterValue", "too big", 400)),
            "InvalidParameterValue",
            400,
        ),
    ],
)
def test_refused_targets_are_dead_lettered_at_once(arrange: Any, code: str, recorded: int) -> None:
    h, targets = setup(QUEUE, create=code != "AWS.SimpleQueueService.NonExistentQueue",
                       delivery={"retry": 5})  # fmt: skip
    arrange(targets)
    h.send()
    assert h.deliver_once("tr")["batchItemFailures"] == []  # moved to the DLQ on attempt 1
    [dead] = h.messages(h.dlq_of("tr"))
    assert dead["event"]["knativeerrordest"] == QUEUE
    assert dead["event"]["knativeerrorcode"] == recorded
    assert json.loads(base64.b64decode(dead["event"]["knativeerrordata"]))["code"] == code
    assert outcomes(h) == ["dead_lettered"]


def test_a_lambda_result_that_is_a_cloudevent_is_a_reply() -> None:
    h, targets = setup(FUNCTION)

    def handler(event: dict[str, Any]) -> dict[str, Any]:
        return {"specversion": "1.0", "id": "r-" + event["id"], "source": "/fn",
                "type": "reply.t", "data": {"seen": event["data"]}}  # fmt: skip

    targets.functions["orders"] = handler
    h.trigger("replies", uri="http://sink.example/", filter={"type": "reply.t"})
    h.send(data=b"x")
    h.deliver_once("tr")
    assert outcomes(h) == ["reply"]
    [reply] = h.messages(h.queue_of("replies"))
    assert reply["event"]["id"] == "r-1" and reply["event"]["data"] == {"seen": "x"}


@pytest.mark.parametrize("result", [None, {"statusCode": 200}, "ok", [1]])
def test_a_lambda_result_that_is_no_event_is_a_delivery(result: Any) -> None:
    h, targets = setup(FUNCTION)
    targets.functions["orders"] = lambda event: result
    h.send()
    h.deliver_once("tr")
    assert outcomes(h) == ["delivered"]


def test_a_lambda_result_that_is_an_invalid_event_is_retried() -> None:
    h, targets = setup(FUNCTION, delivery={"retry": 0})
    targets.functions["orders"] = lambda event: {"specversion": "1.0", "id": ""}
    h.send()
    h.deliver_once("tr")
    [dead] = h.messages(h.dlq_of("tr"))
    assert dead["event"]["knativeerrorcode"] == 502
    assert json.loads(base64.b64decode(dead["event"]["knativeerrordata"]))["code"] == (
        "InvalidReply"
    )


def test_a_lambda_function_that_raises_is_retried() -> None:
    h, targets = setup(FUNCTION, delivery={"retry": 2})

    def handler(event: dict[str, Any]) -> None:
        raise RuntimeError("boom")

    targets.functions["orders"] = handler
    h.send()
    assert len(h.deliver_once("tr")["batchItemFailures"]) == 1
    assert outcomes(h) == ["retry"]


def test_step_functions_retry_finds_its_execution() -> None:
    h, targets = setup(MACHINE, delivery={"retry": 2})
    # The first attempt's answer is lost after the execution started: its retry is a success.
    targets.lost.add(MACHINE)
    h.send()
    h.deliver_once("tr")
    h.make_visible("tr")
    h.deliver_once("tr")
    assert list(targets.executions) == [(MACHINE, execution_name("/src", "1"))]
    assert outcomes(h) == ["retry", "delivered"]
    # Another event with the same source and id and other content starts no second execution.
    h.send(data=b"other")
    h.deliver_once("tr")
    [dead] = h.messages(h.dlq_of("tr"))
    assert dead["event"]["knativeerrorcode"] == 400
    assert json.loads(base64.b64decode(dead["event"]["knativeerrordata"]))["code"] == (
        "ExecutionAlreadyExists"
    )


def test_an_arn_dead_letter_sink() -> None:
    h = Harness(HttpResponse(400, {}, b"no"))
    targets = MemoryTargets()
    h.container.aws_targets = targets  # type: ignore[misc]
    targets.create(QUEUE)
    h.broker()
    h.trigger("tr", uri="http://sub.example/", delivery={"deadLetterSink": {"uri": QUEUE}})
    h.send()
    h.deliver_once("tr")
    h.deliver_once("tr", dead_letter=True)
    [dead] = targets.bodies(QUEUE)
    assert dead["knativeerrorcode"] == 400 and dead["knativeerrordest"] == "http://sub.example/"


def test_a_refused_dead_letter_sink_keeps_the_event_in_the_dlq() -> None:
    h = Harness(HttpResponse(400, {}, b"no"))
    targets = MemoryTargets()
    h.container.aws_targets = targets  # type: ignore[misc]
    h.broker()
    h.trigger("tr", uri="http://sub.example/", delivery={"deadLetterSink": {"uri": QUEUE}})
    h.send()
    h.deliver_once("tr")
    answer = h.deliver_once("tr", dead_letter=True)
    assert len(answer["batchItemFailures"]) == 1 and h.queues.depth(h.dlq_of("tr")) == 1


def test_arns_outside_the_stage_patterns_are_a_400_naming_the_setting() -> None:
    settings = replace(
        Settings(), cache_ttl_seconds=0.0, target_arn_patterns=("arn:aws:sqs:*:*:orders-*",)
    )
    h = Harness(settings=settings)
    h.container.aws_targets = MemoryTargets()  # type: ignore[misc]
    h.broker()
    h.trigger("ok", uri=A.format("sqs", "orders-1"))
    with pytest.raises(ValidationError) as err:
        h.trigger(
            "no",
            uri=QUEUE,
            delivery={"deadLetterSink": {"uri": TOPIC}},
        )
    fields = [(p.field, p.message) for p in err.value.problems]
    assert [f for f, _ in fields] == ["spec.subscriber.uri", "spec.delivery.deadLetterSink.uri"]
    assert all("target_arn_patterns" in m for _, m in fields)
    with pytest.raises(ValidationError) as err:
        h.broker("ns", "other", delivery={"deadLetterSink": {"uri": TOPIC}})
    assert "target_arn_patterns" in err.value.problems[0].message


def test_deployed_stages_allow_no_arn_until_their_patterns_say_so() -> None:
    env = {"BROKER_STAGE": "prod", "BROKER_LOCAL_MODE": "false"}
    assert Settings.from_env(env).target_arn_patterns == ()
    local = {"BROKER_STAGE": "local", "BROKER_LOCAL_MODE": "true"}
    assert Settings.from_env(local).target_arn_patterns == ("arn:*",)
    listed = {**env, "BROKER_TARGET_ARN_PATTERNS": "arn:aws:sqs:*:1:a-*, arn:aws:sns:*:1:b"}
    assert Settings.from_env(listed).target_arn_patterns == ("arn:aws:sqs:*:1:a-*",
                                                             "arn:aws:sns:*:1:b")  # fmt: skip
