"""DynamoDB calls made directly (adapters/json_call.py, as the resource store makes them): boto3's
signed request, answers (binary values decoded), exception classes, and its standard retries with
DynamoDB's own rules (the CRC32 of the answer, the shorter backoff). SendMessageBatch's own tests
are tests/unit/test_sqs_send_call.py; the contract suite reads and writes the store through both
paths on moto and LocalStack (tests/contract/test_ports.py)."""

from __future__ import annotations

import base64
import json
import zlib
from dataclasses import replace
from typing import Any

import pytest
from botocore.credentials import Credentials
from botocore.exceptions import ClientError

from chalicelib.adapters import json_call
from chalicelib.adapters.aws_clients import AwsClients
from chalicelib.adapters.json_call import JsonCall
from chalicelib.config import Settings
from tests.unit.direct_call_support import (
    ATTEMPTS,
    ENDPOINT,
    Response,
    Session,
    boto3_request,
    broker_client,
    freeze_signing_clock,
    text,
)

ITEM = {
    "pk": {"S": "broker#ns"},
    "sk": {"S": 'h\u00e9 "q" \U0001f600'},
    "blob": {"B": b"\x00\xffbytes"},
    "version": {"N": "2"},
}
PUT = {
    "TableName": "t",
    "Item": ITEM,
    "ConditionExpression": "version = :v",
    "ExpressionAttributeValues": {":v": {"N": "1"}},
}


def _answer(status: int, body: Any, crc32: int | None = None) -> Response:
    """DynamoDB's answer: with the CRC32 of its body (``crc32``: another, a damaged answer)."""
    answer = Response(status, body)
    crc = zlib.crc32(answer.content) if crc32 is None else crc32
    answer.headers["x-amz-crc32"] = str(crc)
    return answer


def _client() -> Any:
    return broker_client("dynamodb")


def _call(session: Session, operation: str, sleeps: list[float] | None = None) -> JsonCall:
    client = _client()
    return JsonCall(
        client,
        Credentials("AKIDEXAMPLE", "secret"),
        session,
        operation,
        max_attempts=client.meta.config.retries["total_max_attempts"],
        sleep=(sleeps if sleeps is not None else []).append,
        rand=lambda: 1.0,
    )


@pytest.fixture()
def frozen_time(monkeypatch: pytest.MonkeyPatch) -> None:
    freeze_signing_clock(monkeypatch)


def _boto3_request(params: dict[str, Any]) -> Any:
    return boto3_request(_client(), lambda c: c.put_item(**params))


def test_put_item_is_boto3s_request_signed_alike(
    frozen_time: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the body written as botocore writes it (msgspec off), the request is boto3's to the
    byte where it is signed; with msgspec, the same JSON (a binary value as base64)."""
    expected = _boto3_request(PUT)
    session = Session(_answer(200, {}))
    _call(session, "PutItem").call(dict(PUT))
    sent = session.requests[0]
    assert json.loads(sent.body) == json.loads(expected.body)
    assert json.loads(sent.body)["Item"]["blob"]["B"] == base64.b64encode(b"\x00\xffbytes").decode()
    monkeypatch.setattr(json_call, "_msgspec_encode", None)
    session = Session(_answer(200, {}))
    _call(session, "PutItem").call(dict(PUT))
    sent = session.requests[0]
    assert (sent.method, sent.url, sent.body) == (expected.method, expected.url, expected.body)
    for header in ("X-Amz-Target", "Content-Type", "X-Amz-Date", "Authorization"):
        assert text(sent.headers[header]) == text(expected.headers[header]), header
    assert text(sent.headers["X-Amz-Target"]) == "DynamoDB_20120810.PutItem"
    assert "x-amzn-query-mode" not in sent.headers  # SQS's only


def test_the_answer_is_boto3s_binary_values_decoded() -> None:
    item = {"pk": {"S": "p"}, "blob": {"B": base64.b64encode(b"\x00\xff").decode()}}
    session = Session(_answer(200, {"Item": item}))
    got = _call(session, "GetItem").call({"TableName": "t", "Key": {"pk": {"S": "p"}}})
    assert got["Item"] == {"pk": {"S": "p"}, "blob": {"B": b"\x00\xff"}}
    assert got["ResponseMetadata"]["RetryAttempts"] == 0


def test_a_refused_condition_is_boto3s_exception_at_once() -> None:
    sleeps: list[float] = []
    refused = {
        "__type": "com.amazonaws.dynamodb.v20120810#ConditionalCheckFailedException",
        "message": "The conditional request failed",
    }
    session = Session(_answer(400, refused))
    with pytest.raises(ClientError) as raised:
        _call(session, "PutItem", sleeps).call(dict(PUT))
    assert type(raised.value).__name__ == "ConditionalCheckFailedException"  # boto3's class
    assert raised.value.response["Error"]["Code"] == "ConditionalCheckFailedException"
    assert raised.value.operation_name == "PutItem"
    assert sleeps == [] and len(session.requests) == 1


def test_a_damaged_answer_and_a_server_error_are_retried_with_dynamodbs_backoff() -> None:
    """botocore's standard mode retries an answer whose CRC32 does not match (DynamoDB's own
    check) and a 500, after DynamoDB's 25 ms base (other services: 50 ms)."""
    sleeps: list[float] = []
    item = {"Item": {"pk": {"S": "p"}}}
    session = Session(
        _answer(200, item, crc32=1),
        _answer(500, {"__type": "InternalServerError", "message": "x"}),
        _answer(200, item),
    )
    got = _call(session, "GetItem", sleeps).call({"TableName": "t", "Key": {"pk": {"S": "p"}}})
    assert got["Item"] == {"pk": {"S": "p"}}
    assert got["ResponseMetadata"]["RetryAttempts"] == 2
    assert sleeps == [0.025, 0.05]
    attempts = [text(r.headers["amz-sdk-request"]) for r in session.requests]
    assert attempts == [f"attempt={n}; max={ATTEMPTS}" for n in (1, 2, 3)]


def test_throttling_is_retried_until_the_clients_attempts_are_spent() -> None:
    sleeps: list[float] = []
    throttled = {
        "__type": "com.amazonaws.dynamodb.v20120810#ProvisionedThroughputExceededException",
        "message": "slow down",
    }
    session = Session(*[_answer(400, throttled) for _ in range(ATTEMPTS)])
    with pytest.raises(ClientError) as raised:
        _call(session, "Query", sleeps).call({"TableName": "t"})
    assert type(raised.value).__name__ == "ProvisionedThroughputExceededException"
    assert len(session.requests) == ATTEMPTS and sleeps == [1.0, 2.0, 4.0]
    assert raised.value.response["ResponseMetadata"]["RetryAttempts"] == ATTEMPTS - 1


def test_the_clients_events_and_stubber_see_the_call() -> None:
    from botocore.stub import Stubber

    client = _client()
    call = JsonCall.for_client(client, Credentials("a", "b"), "GetItem")
    assert call is not None
    seen: list[str] = []
    client.meta.events.register("after-call.dynamodb.GetItem", lambda **_: seen.append("after"))
    with Stubber(client) as stub:
        stub.add_response("get_item", {"Item": {"pk": {"S": "stubbed"}}})
        got = call.call({"TableName": "t", "Key": {"pk": {"S": "p"}}})
    assert got["Item"] == {"pk": {"S": "stubbed"}} and seen == ["after"]


def test_clients_make_dynamodb_calls_directly_unless_settings_turn_it_off() -> None:
    settings = Settings(endpoint_url=ENDPOINT, region="us-east-1")
    clients = AwsClients(settings)
    made = clients.direct_call("dynamodb", "PutItem")
    assert isinstance(made, JsonCall) and clients.direct_call("dynamodb", "PutItem") is made
    off = AwsClients(replace(settings, dynamodb_direct_calls=False))
    assert off.direct_call("dynamodb", "PutItem") is None
    assert (
        Settings.from_env({"BROKER_DYNAMODB_DIRECT_CALLS": "false"}).dynamodb_direct_calls is False
    )
    assert Settings.from_env({}).dynamodb_direct_calls is True
