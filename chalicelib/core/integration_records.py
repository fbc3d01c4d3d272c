"""Records of an IntegrationSource's AWS plumbing as CloudEvents (docs/sources.md,
IntegrationSource). Pure: one function per source, a record in (as Lambda's event source mapping,
or EventBridge, hands it over), a CloudEvent out, or RecordError saying why the record cannot be
one (the function then reports that record alone as a batch item failure).

Attributes as Knative's connectors (the Apache Camel Kamelets behind IntegrationSource) name them:
type ``dev.knative.connector.event.<connector>``, source ``dev.knative.eventing.<connector>-source``
and subject ``<connector>-source``. Where we differ, and why, docs/sources.md says: the id is the
record's own (the SQS message id, the stream record's eventID, the EventBridge event id), so a
record Lambda hands over twice is one event to the broker's deduplication; and an S3 event carries
the object notification, not the object's content.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from chalicelib.core.cloudevents.event import CloudEvent

SQS = "aws-sqs"
S3 = "aws-s3"
DDB_STREAMS = "aws-ddb-streams"
TIMER = "timer"
JSON = "application/json"
# The bodies handed over are bounded by the services (SQS 256 KiB, a stream record 400 KiB,
# EventBridge 256 KiB); this bound is for what a record can claim about itself.
MAX_ID_CHARS = 1_024


class RecordError(ValueError):
    """A record that cannot become an event (its shape, not the broker, is at fault)."""


def attributes(connector: str) -> dict[str, str]:
    """The type, source and subject Knative's connector gives its events."""
    return {
        "specversion": "1.0",
        "type": f"dev.knative.connector.event.{connector}",
        "source": f"dev.knative.eventing.{connector}-source",
        "subject": f"{connector}-source",
    }


def sqs_event(record: Mapping[str, Any]) -> CloudEvent:
    """An SQS record (``Records[]`` of an SQS event source mapping): its body is the data."""
    body = _string(record, "body")
    attrs = attributes(SQS) | {"id": _id(record, "messageId")}
    sent = _mapping(record.get("attributes", {}), "attributes").get("SentTimestamp")
    if sent is not None:
        attrs["time"] = _time(_epoch(sent, "attributes.SentTimestamp") / 1000)
    return _with_data(attrs, body)


def ddb_streams_event(record: Mapping[str, Any]) -> CloudEvent:
    """A DynamoDB Streams record: the change (keys, images, sequence number) as JSON data, with
    the operation as ``eventName`` (INSERT, MODIFY, REMOVE), as Camel's connector sends it."""
    change = _mapping(record.get("dynamodb"), "dynamodb")
    attrs = attributes(DDB_STREAMS) | {"id": _id(record, "eventID")}
    created = change.get("ApproximateCreationDateTime")
    if created is not None:
        attrs["time"] = _time(_epoch(created, "dynamodb.ApproximateCreationDateTime"))
    data: dict[str, Any] = {"eventName": _string(record, "eventName")}
    for name, out in (
        ("Keys", "keys"),
        ("NewImage", "newImage"),
        ("OldImage", "oldImage"),
        ("SequenceNumber", "sequenceNumber"),
        ("SizeBytes", "sizeBytes"),
        ("StreamViewType", "streamViewType"),
    ):
        if name in change:
            data[out] = change[name]
    attrs["datacontenttype"] = JSON
    return CloudEvent(attrs, json_data=data)


def s3_event(event: Mapping[str, Any]) -> CloudEvent:
    """An S3 object event as EventBridge delivers it (``source`` aws.s3): the notification's
    ``detail`` (bucket, object key, size, etag, reason) as JSON data."""
    if event.get("source") != "aws.s3":
        raise RecordError(f"source must be aws.s3, got {str(event.get('source'))[:64]!r}")
    detail = _mapping(event.get("detail"), "detail")
    attrs = attributes(S3) | {"id": _id(event, "id"), "datacontenttype": JSON}
    if isinstance(event.get("time"), str):
        attrs["time"] = event["time"]
    return CloudEvent(attrs, json_data={"eventName": event.get("detail-type")} | dict(detail))


def timer_event(message: str, content_type: str | None, event_id: str, now: float) -> CloudEvent:
    """A timer's tick: its message as data, with a fresh id and the tick's time."""
    attrs = attributes(TIMER) | {"id": event_id, "time": _time(now)}
    if content_type:
        attrs["datacontenttype"] = content_type
    return CloudEvent(attrs, message.encode())


def _with_data(attrs: dict[str, str], body: str) -> CloudEvent:
    try:
        parsed = json.loads(body)
    except (ValueError, RecursionError):
        return CloudEvent(attrs | {"datacontenttype": "text/plain"}, body.encode())
    return CloudEvent(attrs | {"datacontenttype": JSON}, json_data=parsed)


def _mapping(value: object, where: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise RecordError(f"{where} must be an object")
    return value


def _string(record: Mapping[str, Any], name: str) -> str:
    value = record.get(name)
    if not isinstance(value, str):
        raise RecordError(f"{name} must be a string")
    return value


def _id(record: Mapping[str, Any], name: str) -> str:
    value = _string(record, name)
    if not value or len(value) > MAX_ID_CHARS:
        raise RecordError(f"{name} must be 1 to {MAX_ID_CHARS} characters")
    return value


def _epoch(value: object, where: str) -> float:
    text = str(value)
    if isinstance(value, bool) or len(text) > 20:
        raise RecordError(f"{where} must be a number of seconds or milliseconds")
    try:
        return float(text)
    except ValueError:
        raise RecordError(f"{where} must be a number, got {text!r}") from None


def _time(seconds: float) -> str:
    try:
        moment = datetime.fromtimestamp(seconds, UTC)
    except (OverflowError, OSError, ValueError):
        raise RecordError(f"{seconds!r} is not a time") from None
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def item_identifier(connector: str, record: Mapping[str, Any]) -> str:
    """What Lambda's ``batchItemFailures`` names a failed record by: the SQS message id, or a
    stream record's sequence number (Lambda retries the stream from the lowest one named)."""
    if connector == SQS:
        return str(record.get("messageId", ""))
    change = record.get("dynamodb")
    return str(change.get("SequenceNumber", "")) if isinstance(change, Mapping) else ""
