"""Records of SQS, DynamoDB Streams and S3 (through EventBridge) as Knative's connectors' events."""

import pytest

from chalicelib.core import integration_records as records
from chalicelib.core.integration_records import RecordError

SQS_RECORD = {
    "messageId": "059f36b4-87a3-44ab-83d2-661975830a7d",
    "receiptHandle": "AQEBwJnKyrHigUMZj6rYigCgxlaS3SLy0a",
    "body": '{"order": 7}',
    "attributes": {"ApproximateReceiveCount": "1", "SentTimestamp": "1545082649183"},
    "messageAttributes": {},
    "md5OfBody": "e4e68fb7bd0e697a0ae8f1bb342846b3",
    "eventSource": "aws:sqs",
    "eventSourceARN": "arn:aws:sqs:us-east-2:123456789012:my-queue",
    "awsRegion": "us-east-2",
}
DDB_RECORD = {
    "eventID": "c4ca4238a0b923820dcc509a6f75849b",
    "eventName": "INSERT",
    "eventVersion": "1.1",
    "eventSource": "aws:dynamodb",
    "awsRegion": "us-east-1",
    "dynamodb": {
        "ApproximateCreationDateTime": 1428537600,
        "Keys": {"Id": {"N": "101"}},
        "NewImage": {"Message": {"S": "New item!"}, "Id": {"N": "101"}},
        "SequenceNumber": "4421584500000000017450439091",
        "SizeBytes": 26,
        "StreamViewType": "NEW_AND_OLD_IMAGES",
    },
    "eventSourceARN": (
        "arn:aws:dynamodb:us-east-1:123456789012:table/orders/stream/2015-06-27T00:48:05.899"
    ),
}
S3_EVENT = {
    "version": "0",
    "id": "17793124-05d4-b198-2fde-7ededc63b103",
    "detail-type": "Object Created",
    "source": "aws.s3",
    "account": "123456789012",
    "time": "2021-11-12T00:00:00Z",
    "region": "ca-central-1",
    "resources": ["arn:aws:s3:::example-bucket"],
    "detail": {
        "version": "0",
        "bucket": {"name": "example-bucket"},
        "object": {"key": "example-key", "size": 5, "etag": "b1946ac92492d2347c6235b4d2611184"},
        "reason": "PutObject",
    },
}


def test_sqs_record_is_knative_aws_sqs_event_with_json_body():
    event = records.sqs_event(SQS_RECORD)
    assert event.type == "dev.knative.connector.event.aws-sqs"
    assert event.source == "dev.knative.eventing.aws-sqs-source"
    assert event.get("subject") == "aws-sqs-source"
    assert event.id == SQS_RECORD["messageId"]
    assert event.get("time") == "2018-12-17T21:37:29.183Z"
    assert event.get("datacontenttype") == "application/json"
    assert event.json_data == {"order": 7}


def test_sqs_text_body_stays_bytes_as_text_plain():
    event = records.sqs_event(SQS_RECORD | {"body": "not json"})
    assert (event.get("datacontenttype"), event.data) == ("text/plain", b"not json")


@pytest.mark.parametrize(
    "change",
    [
        {"body": None},
        {"messageId": ""},
        {"messageId": "x" * 1025},
        {"attributes": {"SentTimestamp": "soon"}},
        {"attributes": {"SentTimestamp": "9" * 30}},
        {"attributes": []},
    ],
)
def test_sqs_record_that_cannot_be_an_event_says_why(change):
    with pytest.raises(RecordError):
        records.sqs_event(SQS_RECORD | change)


def test_ddb_stream_record_is_its_change_as_json():
    event = records.ddb_streams_event(DDB_RECORD)
    assert event.type == "dev.knative.connector.event.aws-ddb-streams"
    assert event.source == "dev.knative.eventing.aws-ddb-streams-source"
    assert event.id == DDB_RECORD["eventID"]
    assert event.get("time") == "2015-04-09T00:00:00.000Z"
    assert event.json_data == {
        "eventName": "INSERT",
        "keys": {"Id": {"N": "101"}},
        "newImage": {"Message": {"S": "New item!"}, "Id": {"N": "101"}},
        "sequenceNumber": "4421584500000000017450439091",
        "sizeBytes": 26,
        "streamViewType": "NEW_AND_OLD_IMAGES",
    }


def test_ddb_stream_record_without_its_change_is_refused():
    with pytest.raises(RecordError, match="dynamodb"):
        records.ddb_streams_event(DDB_RECORD | {"dynamodb": None})


def test_s3_object_event_from_eventbridge_is_the_notification():
    event = records.s3_event(S3_EVENT)
    assert event.type == "dev.knative.connector.event.aws-s3"
    assert event.source == "dev.knative.eventing.aws-s3-source"
    assert (event.id, event.get("time")) == (S3_EVENT["id"], "2021-11-12T00:00:00Z")
    assert event.json_data["object"]["key"] == "example-key"
    assert event.json_data["eventName"] == "Object Created"


def test_eventbridge_event_of_another_service_is_refused():
    with pytest.raises(RecordError, match=r"aws\.s3"):
        records.s3_event(S3_EVENT | {"source": "aws.ec2"})


def test_timer_tick_carries_its_message_and_content_type():
    event = records.timer_event("hello", "text/plain", "id-1", 0.0)
    assert event.type == "dev.knative.connector.event.timer"
    assert (event.id, event.get("time"), event.data) == (
        "id-1",
        "1970-01-01T00:00:00.000Z",
        b"hello",
    )
    assert event.get("datacontenttype") == "text/plain"


def test_batch_item_identifier_is_message_id_or_sequence_number():
    assert records.item_identifier(records.SQS, SQS_RECORD) == SQS_RECORD["messageId"]
    assert (
        records.item_identifier(records.DDB_STREAMS, DDB_RECORD) == "4421584500000000017450439091"
    )
