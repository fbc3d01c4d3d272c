"""The embedded endpoint's changes to moto keep SQS's answers: here the queue attributes computed
on demand against the dict moto builds, for every kind of queue and message state."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from moto.sqs import models

from brokerctl import embedded_aws


@pytest.fixture()
def patched() -> Iterator[None]:
    saved = models.Queue.attributes
    embedded_aws._compute_queue_attributes_on_demand()
    try:
        yield
    finally:
        models.Queue.attributes = saved  # type: ignore[method-assign]
        del models.Queue.attributes_as_moto_builds_them  # type: ignore[attr-defined]


@pytest.fixture()
def backend() -> Iterator[models.SQSBackend]:
    # moto finds a dead-letter queue through its registry of backends: an account of our own.
    backend = models.sqs_backends["000000000042"]["us-east-1"]
    yield backend
    backend.reset()


def _queues(backend: models.SQSBackend) -> list[models.Queue]:
    dlq = backend.create_queue("dlq")
    return [
        backend.create_queue("plain"),
        backend.create_queue("fifo.fifo", FifoQueue="true", ContentBasedDeduplication="true"),
        backend.create_queue("kms", KmsMasterKeyId="alias/k"),
        backend.create_queue(
            "redriven",
            RedrivePolicy=json.dumps({"deadLetterTargetArn": dlq.queue_arn, "maxReceiveCount": 3}),
            Policy=json.dumps({"Version": "2012-10-17", "Statement": []}),
            DelaySeconds="2",
        ),
        dlq,
    ]


def test_attributes_read_on_demand_equal_the_ones_moto_builds(
    patched: None, backend: models.SQSBackend
) -> None:
    for queue in _queues(backend):
        for i in range(5):
            group = {"group_id": "g", "deduplication_id": f"d{i}"} if queue.fifo_queue else {}
            backend.send_message(queue.name, f"m{i}", **group)
        backend.receive_message(queue.name, 2, 0, 30)  # two in flight
        built = queue.attributes_as_moto_builds_them
        lazy = queue.attributes
        assert dict(lazy) == built, queue.name
        assert lazy == built and len(lazy) == len(built)
        assert lazy.get("ContentBasedDeduplication") == built.get("ContentBasedDeduplication")
        assert "NoSuchAttribute" not in lazy and lazy.get("NoSuchAttribute") is None
    plain = backend.get_queue("plain")
    assert plain.attributes["ApproximateNumberOfMessagesNotVisible"] == 2


def test_moto_behaviour_that_reads_attributes_is_unchanged(
    patched: None, backend: models.SQSBackend
) -> None:
    fifo = backend.create_queue("f.fifo", FifoQueue="true", ContentBasedDeduplication="true")
    backend.send_message(fifo.name, "same", group_id="g")
    backend.send_message(fifo.name, "same", group_id="g")  # deduplicated by content
    assert fifo.attributes["ApproximateNumberOfMessages"] == 1
    backend.create_queue("q", VisibilityTimeout="30")
    backend.create_queue("q", VisibilityTimeout="30")  # same attributes: the same queue
    with pytest.raises(models.QueueAlreadyExists):
        backend.create_queue("q", VisibilityTimeout="60")
    got = backend.get_queue_attributes("q", ["All"])
    assert got["VisibilityTimeout"] == 30 and "QueueArn" in got
    assert backend.get_queue_attributes("q", ["DelaySeconds"]) == {"DelaySeconds": 0}


def _answers() -> list[Any]:
    """DynamoDB and SQS answers through moto's serializer (in process), random parts left out."""
    import boto3
    from moto import mock_aws

    with mock_aws():
        ddb = boto3.client("dynamodb", region_name="us-east-1")
        ddb.create_table(
            TableName="t",
            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"},
                       {"AttributeName": "sk", "KeyType": "RANGE"}],
            AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"},
                                  {"AttributeName": "sk", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
        )  # fmt: skip
        for i in range(3):
            ddb.put_item(TableName="t", Item={
                "pk": {"S": "p"}, "sk": {"S": f"s{i}"}, "n": {"N": str(i)}, "b": {"B": b"\x00"},
                "ss": {"SS": ["a", "b"]}, "ns": {"NS": ["1", "2"]}, "bool": {"BOOL": True},
                "null": {"NULL": True}, "l": {"L": [{"S": "x"}, {"M": {"k": {"N": "1"}}}]},
            })  # fmt: skip
        query = ddb.query(
            TableName="t", KeyConditionExpression="pk = :p",
            ExpressionAttributeValues={":p": {"S": "p"}}, ReturnConsumedCapacity="TOTAL",
        )  # fmt: skip
        table = ddb.describe_table(TableName="t")["Table"]
        sqs = boto3.client("sqs", region_name="us-east-1")
        url = sqs.create_queue(QueueName="q", Attributes={"VisibilityTimeout": "7"})["QueueUrl"]
        sqs.send_message(
            QueueUrl=url, MessageBody="hi",
            MessageAttributes={"a": {"DataType": "String", "StringValue": "v"},
                               "n": {"DataType": "Number", "StringValue": "3"}},
        )  # fmt: skip
        got = sqs.receive_message(
            QueueUrl=url, MessageAttributeNames=["All"], MessageSystemAttributeNames=["All"]
        )["Messages"][0]
        attrs = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    return [
        query["Items"], query["Count"], query["ConsumedCapacity"],
        sorted(table["KeySchema"], key=str), table["AttributeDefinitions"], table["TableStatus"],
        got["Body"], got["MessageAttributes"], sorted(got["Attributes"]),
        {k: v for k, v in attrs.items() if "Timestamp" not in k},
    ]  # fmt: skip


def test_remembered_attribute_names_give_the_same_answers() -> None:
    from moto.core import serialize

    before = _answers()
    saved = (
        vars(serialize.AttributePicker)["get_possible_keys"],
        vars(serialize.XFormedAttributePicker)["get_possible_keys"],
    )
    embedded_aws._remember_attribute_aliases()
    try:
        assert _answers() == before
        assert _answers() == before  # answered from what was remembered
    finally:
        serialize.AttributePicker.get_possible_keys = saved[0]  # type: ignore[method-assign]
        serialize.XFormedAttributePicker.get_possible_keys = saved[1]  # type: ignore[method-assign]


def test_firehose_prefixes_render_timestamps_as_aws_does() -> None:
    """``archive/!{timestamp:yyyy/MM/dd/HH}/`` becomes the hour's folder, with no second date
    folder after it (a replay lists the hours of its range; docs/replay.md); a prefix without
    an expression keeps moto's (and Firehose's) default date folder."""
    import re

    from moto.firehose import models as firehose

    saved = firehose.FirehoseBackend.__dict__["_format_s3_object_path"]
    embedded_aws._render_firehose_timestamp_prefixes()
    try:
        path = firehose.FirehoseBackend._format_s3_object_path(
            "s", "1", "archive/!{timestamp:yyyy/MM/dd/HH}/"
        )
        plain = firehose.FirehoseBackend._format_s3_object_path("s", "1", "raw")
    finally:
        firehose.FirehoseBackend._format_s3_object_path = saved
    assert re.fullmatch(r"archive/\d{4}/\d{2}/\d{2}/\d{2}/s-1-\d{4}(-\d{2}){5}-[0-9a-f-]{36}", path)
    assert re.fullmatch(r"raw/\d{4}/\d{2}/\d{2}/\d{2}/s-1-\d{4}(-\d{2}){5}-[0-9a-f-]{36}", plain)


# ---- DynamoDB: atomic conditional writes, all-or-nothing transactions ---------------------------


@pytest.fixture()
def ddb() -> Iterator[Any]:
    from moto.dynamodb import models as ddb_models

    saved = {
        name: ddb_models.DynamoDBBackend.__dict__[name]
        for name in ("put_item", "delete_item", "update_item", "transact_write_items")
    }
    embedded_aws._atomic_dynamodb_writes()
    backend = ddb_models.dynamodb_backends["000000000042"]["us-east-1"]
    backend.create_table(
        "t",
        schema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        throughput=None,
        attr=[{"AttributeName": "pk", "AttributeType": "S"}],
        global_indexes=None,
        indexes=None,
        streams=None,
        billing_mode="PAY_PER_REQUEST",
        sse_specification=None,
        tags=[],
        deletion_protection_enabled=False,
        warm_throughput=None,
    )
    try:
        yield backend
    finally:
        for name, method in saved.items():
            setattr(ddb_models.DynamoDBBackend, name, method)
        backend.reset()


def _put(pk: str) -> dict[str, Any]:
    return {
        "Put": {
            "TableName": "t",
            "Item": {"pk": {"S": pk}},
            "ConditionExpression": "attribute_not_exists(pk)",
        }
    }


def test_a_cancelled_transaction_writes_nothing_and_keeps_the_table(ddb: Any) -> None:
    """moto rolls a cancelled transaction back by putting a copy of the table in its place, which
    would undo another thread's write made meanwhile; the patched one never replaces it."""
    from moto.dynamodb.exceptions import TransactionCanceledException

    ddb.transact_write_items([_put("a")])
    table = ddb.tables["t"]
    with pytest.raises(TransactionCanceledException) as caught:
        ddb.transact_write_items([_put("b"), _put("a"), _put("c")])
    reasons = json.loads(caught.value.description)["CancellationReasons"]
    assert [r["Code"] for r in reasons] == ["None", "ConditionalCheckFailed", "None"]
    assert ddb.tables["t"] is table
    assert sorted(i.attrs["pk"].value for i in table.all_items()) == ["a"]
    ddb.transact_write_items([_put("b"), _put("c")])
    assert sorted(i.attrs["pk"].value for i in table.all_items()) == ["a", "b", "c"]
