"""The AWS transport of the send pass (docs/targets.md): the call an event makes to a Lambda
function, queue, topic, state machine, event bus, stream, delivery stream or bucket, and what its
answer means, in the words of an HTTP attempt (status, detail, reply), so that retries, backoff,
dead letters and the archive treat every target alike. An IntegrationSink's log sink (``log:``)
is written here too: a line of this function's log."""

from __future__ import annotations

import hashlib
import json

from chalicelib import logs
from chalicelib.core.cloudevents import codec
from chalicelib.core.cloudevents.event import CloudEvent
from chalicelib.core.delivery import log_sink
from chalicelib.core.delivery.aws_targets import (
    TargetArn,
    classify_error,
    execution_name,
    object_key,
    parse_arn,
)
from chalicelib.core.delivery.outcomes import Attempt, Outcome
from chalicelib.core.errors import ValidationError
from chalicelib.ports import AwsTargets, TargetCall, TargetResult

# The CloudEvents attributes an SNS subscription's filter policy may select on.
SNS_ATTRIBUTES = ("type", "source", "id", "subject")
MAX_KINESIS_KEY = 256  # Kinesis: a partition key is 1 to 256 Unicode characters
MAX_GROUP_ID = 128  # SQS and SNS FIFO: MessageGroupId and MessageDeduplicationId
_STRUCTURED = {"content-type": "application/cloudevents+json"}
_TTL_ATTRIBUTE = "knativebrokerttl"  # the broker's hop count stays inside the broker
sink_log = logs.get("integrationsink")  # what log sinks write (docs/targets.md)


def call_for(target: TargetArn, event: CloudEvent, trigger: str) -> TargetCall:
    """The call that delivers ``event`` (structured JSON) to ``target`` for ``trigger``."""
    outgoing = event.replace_attributes(remove=(_TTL_ATTRIBUTE,))
    body = codec.encode_structured(outgoing)[1].decode()
    service = target.service
    if service == "sqs" or service == "sns":
        attributes: dict[str, str] = {}
        if service == "sns":
            for name in SNS_ATTRIBUTES:
                value = event.get(name)
                if value not in (None, ""):  # SNS refuses an empty attribute value
                    attributes[f"ce-{name}"] = str(value)
        group = dedup = None
        if target.fifo:  # ordered by partitionkey, else the trigger's order; once per event
            key = event.get("partitionkey")
            group = (str(key) if key not in (None, "") else trigger)[:MAX_GROUP_ID]
            unique = f"{len(event.source)}:{event.source}{event.id}".encode()
            dedup = hashlib.sha256(unique).hexdigest()
        return TargetCall(target.arn, body, group, dedup, attributes)
    if service == "states":
        return TargetCall(target.arn, body, name=execution_name(event.source, event.id))
    if service == "events":
        return TargetCall(target.arn, body, source=event.source, detail_type=event.type)
    if service == "kinesis":
        key = event.get("partitionkey")
        partition = str(key) if key not in (None, "") else event.id
        return TargetCall(target.arn, body, partition_key=partition[:MAX_KINESIS_KEY])
    if service == "s3":
        arrival = event.get("knativearrivaltime")
        key = object_key(event.source, event.id, str(arrival) if arrival else None)
        return TargetCall(target.arn, body, name=key)
    return TargetCall(target.arn, body)  # lambda, firehose


def send(
    targets: AwsTargets | None, uri: str, event: CloudEvent, trigger: str, timeout: float
) -> TargetResult:
    """Deliver ``event`` to the target ``uri`` names; the service's answer."""
    sink = log_sink.parse_uri(uri)
    if sink is not None:
        return write_log(sink, event, trigger)
    target = parse_arn(uri)
    if target is None:  # refused at PUT: only a stored resource from before could carry one
        return TargetResult("ValidationException", f"{uri} is not a target ARN", 400)
    if targets is None:
        return TargetResult("NotConfigured", "this function delivers to no AWS target", None)
    return targets.send(call_for(target, event, trigger), timeout)


def write_log(sink: log_sink.LogSpec, event: CloudEvent, trigger: str) -> TargetResult:
    """A log sink's delivery: one line at its level (none at OFF); it always succeeds."""
    outgoing = event.replace_attributes(remove=(_TTL_ATTRIBUTE,))
    line = log_sink.line(sink, outgoing, trigger)
    if line is not None:
        sink_log.log(line.level, "%s", line.message, extra=line.keys)
    return TargetResult()


def error_data(result: TargetResult) -> bytes:
    """What a failed attempt's knativeerrordata carries (base64-encoded by the dead letter)."""
    return json.dumps({"code": result.code, "message": result.message}).encode()


def judge(result: TargetResult, reads_replies: bool) -> Attempt:
    """The attempt an answer makes: a success (200), a reply (a Lambda result that is a
    CloudEvent in structured JSON, read as an HTTP 200 with an event is), or the failure its AWS
    error code classifies, with ``{"code", "message"}`` as its detail."""
    elapsed = result.elapsed_ms
    if not result.ok:
        verdict = classify_error(result.code or "", result.http_status)
        return Attempt(verdict.outcome, verdict.status, error_data(result), elapsed)
    if not reads_replies or not result.payload:
        return Attempt(Outcome.SUCCESS, 200, b"", elapsed)
    try:
        parsed = json.loads(result.payload)
    except ValueError:  # a function's result that is not JSON is no event: delivered
        return Attempt(Outcome.SUCCESS, 200, b"", elapsed)
    if not isinstance(parsed, dict) or "specversion" not in parsed:
        return Attempt(Outcome.SUCCESS, 200, b"", elapsed)
    try:
        reply = codec.decode_response(_STRUCTURED, result.payload)
    except ValidationError as exc:  # an event we cannot ingest: a failed delivery (Knative: 502)
        invalid = TargetResult("InvalidReply", str(exc), 502)
        return Attempt(Outcome.RETRY, 502, error_data(invalid), elapsed)
    return Attempt(Outcome.REPLY, 200, b"", elapsed, None, reply)
