"""The AwsTargets port on its in-memory fake and on the boto3 adapter against the moto server: each
target kind takes the call and holds what was sent where its service keeps it (a queue's
messages, a topic's subscribed queue, an execution's input, a bus rule's target queue, a stream's
records, a delivery stream's objects, a bucket's object per event), and a target that does not
exist is the service's own not-found error on both ``send`` and ``check``. The AWS endpoints are
the moto server and LocalStack's runtime (tests/backends.py). Lambda there is answered by the
local functions (brokerctl/local_functions.py): neither runs Lambda code here."""

from __future__ import annotations

import json
import re
import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from brokerctl.local_functions import LocalFunctions
from chalicelib.core.delivery.aws_targets import classify_error, parse_arn
from chalicelib.core.delivery.outcomes import Outcome
from chalicelib.ports import TargetCall
from tests.backends import BACKENDS, aws_env
from tests.fakes.aws_targets import MemoryTargets

ACCOUNT = "123456789012"
REGION = "us-east-1"
KINDS = ("sqs", "sqs-fifo", "sns", "states", "events", "kinesis", "firehose", "lambda", "s3")


def _unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def _echo(event: Any, context: Any) -> Any:
    if event.get("data") == "raise":
        raise ValueError("asked to fail")
    return {"echo": event["id"], "function": context.function_name}


class MemoryWorld:
    def __init__(self) -> None:
        self.targets = MemoryTargets()

    def create(self, kind: str) -> str:
        arn = _arn(kind)
        handler = (lambda event: _echo(event, _Context(arn))) if kind == "lambda" else None
        return self.targets.create(arn, handler)

    def arrived(self, arn: str) -> list[dict[str, Any]]:
        target = parse_arn(arn)
        assert target is not None
        if target.service == "states":
            return [json.loads(i) for (a, _), i in self.targets.executions.items() if a == arn]
        return self.targets.bodies(arn)


class _Context:
    def __init__(self, arn: str) -> None:
        self.function_name = arn.rsplit(":", 1)[-1]


class AwsWorld:
    def __init__(self, settings: Any, clients: Any) -> None:
        from chalicelib.adapters.aws_targets import Boto3Targets

        self.targets = Boto3Targets(settings)
        self.c = clients.client
        self.local = LocalFunctions({}, REGION)
        self.targets.customize("lambda", self.local.attach)
        self._readers: dict[str, Callable[[], list[dict[str, Any]]]] = {}

    def _queue(self, name: str) -> tuple[str, str]:
        attributes = {"FifoQueue": "true"} if name.endswith(".fifo") else {}
        url = self.c("sqs").create_queue(QueueName=name, Attributes=attributes)["QueueUrl"]
        # The endpoint's own account (moto's 123456789012, LocalStack's 000000000000).
        got = self.c("sqs").get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])
        return url, got["Attributes"]["QueueArn"]

    def _drain(self, url: str, raw: bool = True) -> Callable[[], list[dict[str, Any]]]:
        def read() -> list[dict[str, Any]]:
            got = self.c("sqs").receive_message(QueueUrl=url, MaxNumberOfMessages=10)
            bodies = [json.loads(m["Body"]) for m in got.get("Messages", [])]
            return bodies if raw else [json.loads(b["Message"]) for b in bodies]

        return read

    def create(self, kind: str) -> str:
        name = _unique("t")
        if kind in ("sqs", "sqs-fifo"):
            url, arn = self._queue(name + (".fifo" if kind == "sqs-fifo" else ""))
            self._readers[arn] = self._drain(url)
        elif kind == "sns":
            arn = self.c("sns").create_topic(Name=name)["TopicArn"]
            url, queue = self._queue(name + "-sub")
            self.c("sns").subscribe(TopicArn=arn, Protocol="sqs", Endpoint=queue)
            self._readers[arn] = self._drain(url, raw=False)
        elif kind == "states":
            definition = json.dumps(
                {"StartAt": "P", "States": {"P": {"Type": "Pass", "End": True}}}
            )
            role = f"arn:aws:iam::{ACCOUNT}:role/sfn"
            arn = self.c("stepfunctions").create_state_machine(
                name=name, definition=definition, roleArn=role
            )["stateMachineArn"]
            self._readers[arn] = lambda: [
                json.loads(
                    self.c("stepfunctions").describe_execution(executionArn=e["executionArn"])[
                        "input"
                    ]
                )
                for e in self.c("stepfunctions").list_executions(stateMachineArn=arn)["executions"]
            ]
        elif kind == "events":
            arn = self.c("events").create_event_bus(Name=name)["EventBusArn"]
            url, queue = self._queue(name + "-rule")
            self.c("events").put_rule(
                Name=name, EventBusName=name, EventPattern=json.dumps({"source": [{"prefix": ""}]})
            )
            self.c("events").put_targets(
                Rule=name, EventBusName=name, Targets=[{"Id": "q", "Arn": queue}]
            )
            self._readers[arn] = lambda: [e["detail"] for e in self._drain(url)()]
        elif kind == "kinesis":
            kinesis = self.c("kinesis")
            kinesis.create_stream(StreamName=name, ShardCount=1)
            kinesis.get_waiter("stream_exists").wait(
                StreamName=name, WaiterConfig={"Delay": 0.2, "MaxAttempts": 100}
            )
            summary = kinesis.describe_stream_summary(StreamName=name)
            arn = summary["StreamDescriptionSummary"]["StreamARN"]
            self._readers[arn] = lambda: self._kinesis_records(arn)
        elif kind == "firehose":
            bucket = name
            self.c("s3").create_bucket(Bucket=bucket)
            arn = self.c("firehose").create_delivery_stream(
                DeliveryStreamName=name,
                ExtendedS3DestinationConfiguration={
                    "RoleARN": f"arn:aws:iam::{ACCOUNT}:role/firehose",
                    "BucketARN": f"arn:aws:s3:::{bucket}",
                },
            )["DeliveryStreamARN"]
            self._readers[arn] = lambda: self._objects(bucket)
        elif kind == "s3":
            self.c("s3").create_bucket(Bucket=name)
            arn = f"arn:aws:s3:::{name}"
            self._readers[arn] = lambda: self._objects(name)
        else:
            arn = _arn("lambda", name)
            self.local.handlers[name] = _echo
            self._readers[arn] = lambda: []
        return arn

    def _kinesis_records(self, arn: str) -> list[dict[str, Any]]:
        kinesis = self.c("kinesis")
        shard = kinesis.list_shards(StreamARN=arn)["Shards"][0]["ShardId"]
        iterator = kinesis.get_shard_iterator(
            StreamARN=arn, ShardId=shard, ShardIteratorType="TRIM_HORIZON"
        )["ShardIterator"]
        records = kinesis.get_records(ShardIterator=iterator, StreamARN=arn)["Records"]
        return [json.loads(r["Data"]) for r in records]

    def _objects(self, bucket: str) -> list[dict[str, Any]]:
        s3 = self.c("s3")
        out = []
        for item in s3.list_objects_v2(Bucket=bucket).get("Contents", []):
            text = s3.get_object(Bucket=bucket, Key=item["Key"])["Body"].read().decode()
            out += [json.loads(line) for line in text.splitlines() if line]
        return out

    def arrived(self, arn: str) -> list[dict[str, Any]]:
        """What reached the target; SNS and EventBridge fan out to their queues asynchronously
        (on LocalStack), so their reads wait a little for something to arrive."""
        deadline = time.monotonic() + 10
        while True:
            found = self._readers[arn]()
            if found or time.monotonic() > deadline or not re.search(":(sns|events):", arn):
                return found
            time.sleep(0.1)


def _arn(kind: str, name: str | None = None) -> str:
    name = name or _unique("t")
    return {
        "sqs": f"arn:aws:sqs:{REGION}:{ACCOUNT}:{name}",
        "sqs-fifo": f"arn:aws:sqs:{REGION}:{ACCOUNT}:{name}.fifo",
        "sns": f"arn:aws:sns:{REGION}:{ACCOUNT}:{name}",
        "states": f"arn:aws:states:{REGION}:{ACCOUNT}:stateMachine:{name}",
        "events": f"arn:aws:events:{REGION}:{ACCOUNT}:event-bus/{name}",
        "kinesis": f"arn:aws:kinesis:{REGION}:{ACCOUNT}:stream/{name}",
        "firehose": f"arn:aws:firehose:{REGION}:{ACCOUNT}:deliverystream/{name}",
        "lambda": f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:{name}",
        "s3": f"arn:aws:s3:::{name}",
    }[kind]


@pytest.fixture(params=BACKENDS)
def world(request: pytest.FixtureRequest) -> Any:
    if request.param == "memory":
        return MemoryWorld()
    return AwsWorld(*aws_env(request, request.param))


def _call(arn: str, event_id: str, data: str = "hello") -> TargetCall:
    body = json.dumps(
        {"specversion": "1.0", "id": event_id, "source": "/s", "type": "t", "data": data}
    )
    return TargetCall(
        arn,
        body,
        group_id="g" if arn.endswith(".fifo") else None,
        dedup_id=event_id if arn.endswith(".fifo") else None,
        attributes={"ce-type": "t"} if ":sns:" in arn else {},
        name=f"exec-{event_id}"
        if ":states:" in arn
        else (f"2026/01/01/00/{event_id}.json" if ":s3:" in arn else None),
        partition_key=event_id if ":kinesis:" in arn else None,
        source="/s" if ":events:" in arn else None,
        detail_type="t" if ":events:" in arn else None,
    )


@pytest.mark.parametrize("kind", KINDS)
def test_each_target_takes_the_event(world: Any, kind: str) -> None:
    arn = world.create(kind)
    assert world.targets.check(arn).ok
    result = world.targets.send(_call(arn, "e1"), 10.0)
    assert result.ok, result
    if kind == "lambda":
        assert json.loads(result.payload or b"") == {
            "echo": "e1",
            "function": arn.rsplit(":", 1)[-1],
        }
        return
    [arrived] = world.arrived(arn)
    assert arrived["id"] == "e1" and arrived["data"] == "hello"


@pytest.mark.parametrize("kind", KINDS)
def test_a_missing_target_is_not_found(
    world: Any, kind: str, request: pytest.FixtureRequest
) -> None:
    if kind == "events" and "localstack" in request.node.callspec.id:
        pytest.skip("LocalStack answers PutEvents to an event bus that does not exist with success")
    arn = _arn(kind)
    for result in (world.targets.check(arn), world.targets.send(_call(arn, "e1"), 10.0)):
        assert not result.ok
        verdict = classify_error(result.code or "", result.http_status)
        assert (verdict.outcome, verdict.status) == (Outcome.DEAD_LETTER, 404), result


def test_a_lambda_function_that_raises_is_a_function_error(world: Any) -> None:
    arn = world.create("lambda")
    result = world.targets.send(_call(arn, "e1", data="raise"), 10.0)
    assert result.code == "FunctionError"
    assert json.loads(result.message)["errorMessage"] == "asked to fail"


def test_step_functions_same_name_and_input_is_one_execution(world: Any) -> None:
    arn = world.create("states")
    assert world.targets.send(_call(arn, "e1"), 10.0).ok
    assert world.targets.send(_call(arn, "e1"), 10.0).ok  # a retry: the same execution
    assert len(world.arrived(arn)) == 1
    other = world.targets.send(_call(arn, "e1", data="other"), 10.0)
    assert other.code == "ExecutionAlreadyExists"
    assert classify_error(other.code, other.http_status).status == 400


def test_a_fifo_topic_without_a_group_is_a_validation_error(world: Any) -> None:
    arn = world.create("sqs-fifo")
    result = world.targets.send(TargetCall(arn, "{}"), 10.0)
    assert not result.ok
    assert classify_error(result.code or "", result.http_status).status == 400


def test_s3_writes_one_object_per_event_and_a_retry_the_same_one(world: Any) -> None:
    arn = world.create("s3")
    for event_id in ("e1", "e2", "e1"):  # the third is a retry of the first: same key
        assert world.targets.send(_call(arn, event_id), 10.0).ok
    assert sorted(doc["id"] for doc in world.arrived(arn)) == ["e1", "e2"]
