"""IntegrationSource end to end on the local runtime (docs/sources.md), one runtime for the
module: a 2 s timer, a message sent to an SQS queue, an object put to a bucket and an item
written to a table with a stream each arrive at a trigger's subscriber as Knative's connector
event; a source whose queue does not exist is not Ready, with the reason."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from typing import Any

import boto3
import httpx
import pytest

from brokerctl.event_display import EventDisplay
from tests.e2e.conftest import LocalBroker

pytestmark = pytest.mark.e2e

IS = "/apis/sources.knative.dev/v1alpha1/namespaces"
BROKER = {"ref": {"apiVersion": "eventing.knative.dev/v1", "kind": "Broker", "name": "default"}}
CONNECTOR = "dev.knative.connector.event."


@pytest.fixture(scope="module")
def ns(local_broker: LocalBroker) -> str:
    ns = f"is-{uuid.uuid4().hex[:8]}"
    assert local_broker.put(ns, "brokers", "default", {"metadata": {"name": "default"}}).is_success
    return ns


@pytest.fixture(scope="module")
def display(local_broker: LocalBroker, ns: str) -> Iterator[EventDisplay]:
    """One subscriber for every connector's events."""
    with EventDisplay() as display:
        trigger = {
            "metadata": {"name": "all"},
            "spec": {"broker": "default", "subscriber": {"uri": display.url}},
        }
        assert local_broker.put(ns, "triggers", "all", trigger).status_code == 201
        local_broker.wait_ready(ns, "triggers", "all")
        yield display


def aws(local_broker: LocalBroker, service: str) -> Any:
    return boto3.client(
        service,
        endpoint_url=local_broker.aws_url,
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )


def put_source(local_broker: LocalBroker, ns: str, name: str, spec: dict[str, Any]) -> Any:
    body = {
        "apiVersion": "sources.knative.dev/v1alpha1",
        "kind": "IntegrationSource",
        "metadata": {"name": name},
        "spec": {**spec, "sink": BROKER},
    }
    r = httpx.put(f"{local_broker.url}{IS}/{ns}/integrationsources/{name}", json=body, timeout=30)
    assert r.status_code == 201, r.text
    return r.json()


def ready(doc: dict[str, Any]) -> dict[str, str]:
    return {c["type"]: c for c in doc["status"]["conditions"]}["Ready"]


def of_type(display: EventDisplay, connector: str) -> list[Any]:
    wanted = CONNECTOR + connector
    return [
        got
        for got in display.received
        if {k.lower(): v for k, v in got.headers.items()}.get("ce-type") == wanted
    ]


def headers(got: Any) -> dict[str, str]:
    return {k.lower(): v for k, v in got.headers.items()}


def test_a_2s_timer_ticks(local_broker: LocalBroker, ns: str, display: EventDisplay) -> None:
    doc = put_source(local_broker, ns, "tick", {"timer": {"period": 2000, "message": "tick"}})
    assert ready(doc)["status"] == "True", doc["status"]
    started = time.monotonic()
    assert display.wait_for(lambda got: len(of_type(display, "timer")) >= 2, timeout=10)
    took = time.monotonic() - started
    assert 2 <= took < 8, took  # two ticks, 2 s apart
    first = of_type(display, "timer")[0]
    assert headers(first)["ce-source"] == "dev.knative.eventing.timer-source"
    assert first.body == b"tick"
    r = httpx.delete(f"{local_broker.url}{IS}/{ns}/integrationsources/tick", timeout=30)
    assert r.status_code == 200


def test_an_sqs_message_becomes_one_event(
    local_broker: LocalBroker, ns: str, display: EventDisplay
) -> None:
    sqs = aws(local_broker, "sqs")
    url = sqs.create_queue(QueueName=f"orders-{ns}")["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    doc = put_source(local_broker, ns, "orders", {"aws": {"sqs": {"arn": arn}}})
    assert ready(doc)["status"] == "True", doc["status"]
    sent = sqs.send_message(QueueUrl=url, MessageBody='{"order": 7}')
    assert display.wait_for(lambda got: len(of_type(display, "aws-sqs")) >= 1, timeout=10)
    (got,) = of_type(display, "aws-sqs")
    assert headers(got)["ce-id"] == sent["MessageId"]
    assert headers(got)["ce-source"] == "dev.knative.eventing.aws-sqs-source"
    assert json.loads(got.body) == {"order": 7}


def test_an_object_put_becomes_one_event(
    local_broker: LocalBroker, ns: str, display: EventDisplay
) -> None:
    s3 = aws(local_broker, "s3")
    bucket = f"pics-{ns}"
    s3.create_bucket(Bucket=bucket)
    doc = put_source(local_broker, ns, "pics", {"aws": {"s3": {"arn": f"arn:aws:s3:::{bucket}"}}})
    assert ready(doc)["status"] == "True", doc["status"]
    s3.put_object(Bucket=bucket, Key="cat.png", Body=b"meow")
    assert display.wait_for(lambda got: len(of_type(display, "aws-s3")) >= 1, timeout=10)
    (got,) = of_type(display, "aws-s3")
    data = json.loads(got.body)
    assert data["eventName"] == "Object Created"
    assert data["bucket"] == {"name": bucket} and data["object"]["key"] == "cat.png"


def test_a_stream_record_becomes_one_event(
    local_broker: LocalBroker, ns: str, display: EventDisplay
) -> None:
    ddb = aws(local_broker, "dynamodb")
    table = f"orders-{ns}"
    ddb.create_table(
        TableName=table,
        KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
        StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_IMAGE"},
    )
    doc = put_source(local_broker, ns, "table", {"aws": {"ddbStreams": {"table": table}}})
    assert ready(doc)["status"] == "True", doc["status"]
    # The mapping's poller took LATEST before the PUT answered (brokerctl/source_pollers.py).
    ddb.put_item(TableName=table, Item={"id": {"S": "o-1"}, "total": {"N": "7"}})
    assert display.wait_for(lambda got: len(of_type(display, "aws-ddb-streams")) >= 1, timeout=10)
    (got,) = of_type(display, "aws-ddb-streams")
    data = json.loads(got.body)
    assert data["eventName"] == "INSERT"
    assert data["keys"] == {"id": {"S": "o-1"}}
    assert data["newImage"]["total"] == {"N": "7"}


def test_a_missing_queue_is_not_ready_with_the_reason(local_broker: LocalBroker, ns: str) -> None:
    arn = f"arn:aws:sqs:us-east-1:123456789012:nowhere-{ns}"
    doc = put_source(local_broker, ns, "nowhere", {"aws": {"sqs": {"arn": arn}}})
    condition = ready(doc)
    assert condition["status"] == "False"
    assert condition["reason"] == "QueueDoesNotExist", condition
