"""IntegrationSource's AWS plumbing (adapters/source_plumbing.py) against the moto server: an SQS
and a stream mapping into the sources function with ReportBatchItemFailures, a bucket's
EventBridge switch and rule, a missing queue or stream NotFoundError, removal."""

from __future__ import annotations

import io
import json
import uuid
import zipfile
from typing import Any

import pytest

from chalicelib.adapters.source_plumbing import AwsSourcePlumbing
from chalicelib.core import integration_records as records
from chalicelib.core.errors import NotFoundError, UnavailableError
from chalicelib.core.resources.integration_source import AwsSource


def _zip() -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("app.py", "def handler(event, context):\n    return {}\n")
    return buf.getvalue()


@pytest.fixture
def env(aws_clients: Any) -> Any:
    name = f"sb-ct-sources-{uuid.uuid4().hex[:8]}"
    iam = aws_clients.client("iam")
    role = iam.create_role(RoleName=name, AssumeRolePolicyDocument="{}")["Role"]["Arn"]
    aws_clients.client("lambda").create_function(
        FunctionName=name,
        Runtime="python3.12",
        Role=role,
        Handler="app.handler",
        Code={"ZipFile": _zip()},
    )
    return AwsSourcePlumbing(aws_clients, name, "sb-ct-"), aws_clients, name


def _mappings(clients: Any, function: str) -> list[dict[str, Any]]:
    out = clients.client("lambda").list_event_source_mappings(FunctionName=function)
    return list(out["EventSourceMappings"])


def test_an_sqs_source_is_one_mapping_with_partial_batch_failures(env: Any) -> None:
    plumbing, clients, function = env
    url = clients.client("sqs").create_queue(QueueName=f"q-{uuid.uuid4().hex[:8]}")["QueueUrl"]
    arn = clients.client("sqs").get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])
    source = AwsSource(records.SQS, arn["Attributes"]["QueueArn"])
    plumbing.ensure(source)
    plumbing.ensure(source)  # idempotent
    (mapping,) = _mappings(clients, function)
    assert mapping["EventSourceArn"] == source.resource
    assert mapping["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    plumbing.remove(source)
    assert [m for m in _mappings(clients, function) if m.get("State") != "Deleting"] == []


def test_a_missing_queue_is_not_found(env: Any) -> None:
    plumbing, _, _ = env
    with pytest.raises(NotFoundError):
        plumbing.ensure(AwsSource(records.SQS, "arn:aws:sqs:us-east-1:123456789012:absent-q"))


def test_a_table_stream_is_mapped_and_a_table_without_one_is_not_found(env: Any) -> None:
    plumbing, clients, function = env
    ddb = clients.client("dynamodb")
    table = f"t-{uuid.uuid4().hex[:8]}"
    schema: dict[str, Any] = {
        "KeySchema": [{"AttributeName": "id", "KeyType": "HASH"}],
        "AttributeDefinitions": [{"AttributeName": "id", "AttributeType": "S"}],
        "BillingMode": "PAY_PER_REQUEST",
    }
    ddb.create_table(TableName=table + "-plain", **schema)
    with pytest.raises(NotFoundError, match="stream"):
        plumbing.ensure(AwsSource(records.DDB_STREAMS, table + "-plain"))
    ddb.create_table(
        TableName=table,
        StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"},
        **schema,
    )
    source = AwsSource(records.DDB_STREAMS, table)
    assert plumbing.resource_arn(source) == ddb.describe_table(TableName=table)["Table"]["TableArn"]
    plumbing.ensure(source)
    (mapping,) = _mappings(clients, function)
    assert f":table/{table}/stream/" in mapping["EventSourceArn"]
    assert mapping["FunctionResponseTypes"] == ["ReportBatchItemFailures"]


def test_a_bucket_sends_object_events_through_one_rule(env: Any) -> None:
    plumbing, clients, function = env
    bucket = f"b-{uuid.uuid4().hex[:8]}"
    clients.client("s3").create_bucket(Bucket=bucket)
    source = AwsSource(records.S3, f"arn:aws:s3:::{bucket}")
    plumbing.ensure(source)
    # moto takes EventBridgeConfiguration but does not answer it back in the get (nor sends to
    # EventBridge): the switch is not readable here.
    events = clients.client("events")
    (rule,) = [
        r for r in events.list_rules(NamePrefix="sb-ct-s3-")["Rules"] if bucket in r["EventPattern"]
    ]
    assert json.loads(rule["EventPattern"])["detail"] == {"bucket": {"name": [bucket]}}
    (target,) = events.list_targets_by_rule(Rule=rule["Name"])["Targets"]
    assert target["Arn"].endswith(f":function:{function}")
    lam = clients.client("lambda")
    (grant,) = json.loads(lam.get_policy(FunctionName=function)["Policy"])["Statement"]
    assert grant["Sid"] == rule["Name"]
    assert grant["Principal"] == {"Service": "events.amazonaws.com"}
    assert grant["Condition"]["ArnLike"]["AWS:SourceArn"] == rule["Arn"]
    plumbing.remove(source)
    assert rule["Name"] not in [r["Name"] for r in events.list_rules(NamePrefix="sb-ct-")["Rules"]]
    try:
        left = json.loads(lam.get_policy(FunctionName=function)["Policy"])["Statement"]
    except lam.exceptions.ResourceNotFoundException:
        left = []  # AWS: no policy once its last statement goes
    assert [s["Sid"] for s in left] == []


def test_a_missing_function_is_not_reported_as_a_missing_queue(aws_clients: Any) -> None:
    plumbing = AwsSourcePlumbing(aws_clients, f"absent-{uuid.uuid4().hex[:8]}", "sb-ct-")
    url = aws_clients.client("sqs").create_queue(QueueName=f"q-{uuid.uuid4().hex[:8]}")["QueueUrl"]
    attrs = aws_clients.client("sqs").get_queue_attributes(
        QueueUrl=url, AttributeNames=["QueueArn"]
    )
    with pytest.raises(UnavailableError, match="the function"):
        plumbing.ensure(AwsSource(records.SQS, attrs["Attributes"]["QueueArn"]))


def test_a_missing_bucket_is_not_found(env: Any) -> None:
    plumbing, _, _ = env
    with pytest.raises(NotFoundError):
        plumbing.ensure(AwsSource(records.S3, f"arn:aws:s3:::absent-{uuid.uuid4().hex[:8]}"))
