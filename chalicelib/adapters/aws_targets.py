"""AwsTargets on boto3 (docs/targets.md): one call per delivery to Lambda, SQS, SNS, Step
Functions, EventBridge, Kinesis, Firehose or S3, and each service's cheap describe call for a
trigger's readiness. Every AWS error and timeout comes back as a TargetResult (the delivery
policy classifies it, ``core/delivery/aws_targets.py``); nothing here raises for one.

Clients are built lazily per service, region and attempt timeout, with one attempt each: the
trigger's queue retries with the trigger's backoff, as it does for HTTP subscribers, and an SDK
retry of a Lambda invoke that timed out would run the function a second time meanwhile."""

from __future__ import annotations

import json
import math
import threading
import time
from collections.abc import Callable
from typing import Any

from chalicelib.adapters.aws_clients import CONNECT_TIMEOUT_SECONDS
from chalicelib.adapters.sqs_queues import fifo_parameters
from chalicelib.config import Settings
from chalicelib.core.delivery.aws_targets import (
    EXECUTION_EXISTS,
    FUNCTION_ERROR,
    TIMEOUT,
    TargetArn,
    parse_arn,
)
from chalicelib.ports import TargetCall, TargetResult

# What a Lambda function's error payload or an AWS message may put into a dead letter's
# knativeerrordata (cut there: the extension is 1 KiB of base64 in all).
MAX_MESSAGE_CHARS = 600
CHECK_TIMEOUT_SECONDS = 3
MAX_CLIENTS = 256


class Boto3Targets:
    def __init__(self, settings: Settings) -> None:
        self._endpoint = settings.endpoint_url
        self._region = settings.region
        self._clients: dict[tuple[str, str, int], Any] = {}
        self._customizers: dict[str, list[Callable[[Any], None]]] = {}
        self._lock = threading.Lock()

    def customize(self, service: str, customizer: Callable[[Any], None]) -> None:
        """Apply ``customizer`` to every client of ``service``, built or to be built: local mode
        answers Lambda's Invoke for its registered functions so (brokerctl/local_functions.py)."""
        with self._lock:
            self._customizers.setdefault(service, []).append(customizer)
            built = [c for (s, _, _), c in self._clients.items() if s == service]
        for client in built:
            customizer(client)

    def client(self, service: str, region: str, timeout: float = CHECK_TIMEOUT_SECONDS) -> Any:
        """The client for ``service`` in ``region`` that waits ``timeout`` seconds for an answer."""
        key = (service, region, max(1, math.ceil(timeout)))
        client = self._clients.get(key)
        if client is None:
            with self._lock:
                client = self._clients.get(key)
                if client is None:
                    if len(self._clients) >= MAX_CLIENTS:
                        self._clients.clear()
                    client = self._build(service, region, key[2])
                    for customizer in self._customizers.get(service, ()):
                        customizer(client)
                    self._clients[key] = client
        return client

    def _build(self, service: str, region: str, read_timeout: int) -> Any:
        import boto3
        from botocore.config import Config

        config = Config(
            retries={"total_max_attempts": 1, "mode": "standard"},
            connect_timeout=CONNECT_TIMEOUT_SECONDS,
            read_timeout=read_timeout,
            max_pool_connections=50,
        )
        # A session per client: boto3's default session is not safe to share across threads.
        return boto3.session.Session().client(
            service, region_name=region, endpoint_url=self._endpoint, config=config
        )

    # ---- the port ------------------------------------------------------------------------------

    def send(self, call: TargetCall, timeout: float) -> TargetResult:
        target = parse_arn(call.arn)
        if target is None:
            return TargetResult("ValidationException", f"not a target ARN: {call.arn}", 400)
        client = self.client(_SERVICE_CLIENT[target.service], self._region_of(target), timeout)
        return _answered(lambda: _SENDS[target.service](client, target, call))

    def check(self, arn: str) -> TargetResult:
        target = parse_arn(arn)
        if target is None:
            return TargetResult("ValidationException", f"not a target ARN: {arn}", 400)
        client = self.client(_SERVICE_CLIENT[target.service], self._region_of(target))
        check = _CHECKS[target.service]

        def described() -> None:
            check(client, target)

        return _answered(described)

    def _region_of(self, target: TargetArn) -> str:
        # A bucket's ARN names no region: the stage's client, which botocore redirects to the
        # bucket's own region when S3 answers that it is elsewhere.
        return target.region or self._region


def _answered(call: Callable[[], TargetResult | None]) -> TargetResult:
    from botocore.exceptions import (
        BotoCoreError,
        ClientError,
        ConnectionError,
        ParamValidationError,
        ReadTimeoutError,
    )

    started = time.perf_counter()
    try:
        result = call() or TargetResult()
    except ClientError as exc:
        error = exc.response.get("Error", {})
        status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        result = TargetResult(
            str(error.get("Code") or "Unknown"),
            str(error.get("Message") or "")[:MAX_MESSAGE_CHARS],
            int(status) if status else 500,
        )
    except ReadTimeoutError as exc:
        result = TargetResult(TIMEOUT, str(exc)[:MAX_MESSAGE_CHARS], None)
    except ConnectionError as exc:  # connect timeout, refused, DNS
        result = TargetResult("ConnectionError", str(exc)[:MAX_MESSAGE_CHARS], None)
    except ParamValidationError as exc:  # deterministic: the same request is refused again
        result = TargetResult("ValidationException", str(exc)[:MAX_MESSAGE_CHARS], 400)
    except BotoCoreError as exc:
        result = TargetResult(type(exc).__name__, str(exc)[:MAX_MESSAGE_CHARS], None)
    elapsed = (time.perf_counter() - started) * 1000
    return TargetResult(result.code, result.message, result.http_status, result.payload, elapsed)


# ---- one call per service ----------------------------------------------------------------------


def _invoke(client: Any, target: TargetArn, call: TargetCall) -> TargetResult:
    answer = client.invoke(
        FunctionName=target.arn, InvocationType="RequestResponse", Payload=call.body.encode()
    )
    payload = answer["Payload"].read() if answer.get("Payload") is not None else b""
    if answer.get("FunctionError"):
        return TargetResult(FUNCTION_ERROR, payload.decode(errors="replace")[:MAX_MESSAGE_CHARS])
    return TargetResult(payload=payload)


def queue_url(target: TargetArn) -> str:
    """The queue's URL from its ARN (no GetQueueUrl call: the URL is the ARN's parts)."""
    domain = "amazonaws.com.cn" if target.partition == "aws-cn" else "amazonaws.com"
    return f"https://sqs.{target.region}.{domain}/{target.account}/{target.name}"


def _send_message(client: Any, target: TargetArn, call: TargetCall) -> None:
    client.send_message(
        QueueUrl=queue_url(target),
        MessageBody=call.body,
        **fifo_parameters(call.group_id, call.dedup_id),
    )


def _publish(client: Any, target: TargetArn, call: TargetCall) -> None:
    attributes = {
        name: {"DataType": "String", "StringValue": value}
        for name, value in call.attributes.items()
    }
    client.publish(
        TopicArn=target.arn,
        Message=call.body,
        MessageAttributes=attributes,
        **fifo_parameters(call.group_id, call.dedup_id),
    )


def _start_execution(client: Any, target: TargetArn, call: TargetCall) -> TargetResult | None:
    from botocore.exceptions import ClientError

    assert call.name is not None
    try:
        client.start_execution(stateMachineArn=target.arn, name=call.name, input=call.body)
        return None
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") != EXECUTION_EXISTS:
            raise
    # A retry of an attempt that started it (its answer lost, or the execution already ended,
    # when Step Functions refuses the name): the same input is this event's execution.
    execution = f"arn:{target.partition}:states:{target.region}:{target.account}:execution:"
    found = client.describe_execution(executionArn=f"{execution}{target.name}:{call.name}")
    # Compared as JSON: LocalStack gives the input back re-serialized (without the spaces).
    if _json(found.get("input")) == _json(call.body):
        return None
    return TargetResult(EXECUTION_EXISTS, f"execution {call.name} exists with another input", 400)


def _json(text: object) -> object:
    try:
        return json.loads(text) if isinstance(text, str) else None
    except ValueError:
        return None


def _put_events(client: Any, target: TargetArn, call: TargetCall) -> TargetResult | None:
    entry = {
        "Source": call.source,
        "DetailType": call.detail_type,
        "Detail": call.body,
        "EventBusName": target.arn,
    }
    answer = client.put_events(Entries=[entry])
    if not answer.get("FailedEntryCount"):
        return None
    failed = (answer.get("Entries") or [{}])[0]
    code = str(failed.get("ErrorCode") or "InternalFailure")
    # PutEvents answers 200 and says per entry what failed: an internal failure is the
    # service's (retried), anything else the entry's (its code says which).
    status = 500 if code == "InternalFailure" else 400
    return TargetResult(code, str(failed.get("ErrorMessage") or "")[:MAX_MESSAGE_CHARS], status)


def _put_kinesis_record(client: Any, target: TargetArn, call: TargetCall) -> None:
    assert call.partition_key is not None
    client.put_record(
        StreamARN=target.arn,
        Data=call.body.encode(),
        PartitionKey=call.partition_key,
    )


def _put_firehose_record(client: Any, target: TargetArn, call: TargetCall) -> None:
    # One event a line: Firehose concatenates records into its objects.
    record = {"Data": call.body.encode() + b"\n"}
    client.put_record(DeliveryStreamName=target.name, Record=record)


def _put_object(client: Any, target: TargetArn, call: TargetCall) -> None:
    assert call.name is not None  # the key: the same for every attempt (object_key)
    client.put_object(
        Bucket=target.name,
        Key=call.name,
        Body=call.body.encode(),
        ContentType="application/cloudevents+json",
    )


_SERVICE_CLIENT = {"states": "stepfunctions"} | {
    s: s for s in ("lambda", "sqs", "sns", "events", "kinesis", "firehose", "s3")
}
_SENDS: dict[str, Callable[[Any, TargetArn, TargetCall], TargetResult | None]] = {
    "lambda": _invoke,
    "sqs": _send_message,
    "sns": _publish,
    "states": _start_execution,
    "events": _put_events,
    "kinesis": _put_kinesis_record,
    "firehose": _put_firehose_record,
    "s3": _put_object,
}
# The cheap describe call of each service (readiness: docs/targets.md).
_CHECKS: dict[str, Callable[[Any, TargetArn], object]] = {
    "lambda": lambda c, t: c.get_function(FunctionName=t.arn),
    "sqs": lambda c, t: c.get_queue_attributes(QueueUrl=queue_url(t), AttributeNames=["QueueArn"]),
    "sns": lambda c, t: c.get_topic_attributes(TopicArn=t.arn),
    "states": lambda c, t: c.describe_state_machine(stateMachineArn=t.arn),
    "events": lambda c, t: c.describe_event_bus(Name=t.arn),
    "kinesis": lambda c, t: c.describe_stream_summary(StreamARN=t.arn),
    "firehose": lambda c, t: c.describe_delivery_stream(DeliveryStreamName=t.name),
    "s3": lambda c, t: c.head_bucket(Bucket=t.name),
}
