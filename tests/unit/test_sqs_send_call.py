"""SendMessageBatch made directly (adapters/sqs_send_call.py): the same signed request as boto3's,
boto3's answers and errors, its standard retries. The contract suite sends through it to moto and
LocalStack (tests/contract/test_ports.py); here an HTTP session stands in for the network."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import boto3
import pytest
from botocore.credentials import Credentials
from botocore.exceptions import ClientError, EndpointConnectionError

from chalicelib.adapters import json_call
from chalicelib.adapters.aws_clients import AwsClients
from chalicelib.adapters.sqs_send_call import SendMessageBatchCall, encode_body
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

QUEUE = f"{ENDPOINT}/000000000000/q"
ENTRIES = [
    {"Id": "0", "MessageBody": 'h\u00e9 "quoted" \U0001f600'},
    {
        "Id": "1",
        "MessageBody": "x",
        "MessageAttributes": {"k": {"DataType": "String", "StringValue": "v"}},
    },
    {"Id": "2", "MessageBody": "y", "DelaySeconds": 5},
]
OK = {"Successful": [{"Id": "0", "MessageId": "m0", "MD5OfMessageBody": "d"}], "Failed": []}


def _client(endpoint: str = ENDPOINT) -> Any:
    return broker_client("sqs", endpoint)


def _call(
    session: Session, sleeps: list[float] | None = None, client: Any = None
) -> SendMessageBatchCall:
    client = client or _client()
    return SendMessageBatchCall(
        client,
        Credentials("AKIDEXAMPLE", "secret"),
        session,
        max_attempts=client.meta.config.retries["total_max_attempts"],
        sleep=(sleeps if sleeps is not None else []).append,
        rand=lambda: 1.0,
    )


@pytest.fixture()
def frozen_time(monkeypatch: pytest.MonkeyPatch) -> None:
    freeze_signing_clock(monkeypatch)


def _boto3_request(entries: list[dict[str, Any]]) -> Any:
    """The request boto3's client would send (stopped before it is sent)."""
    return boto3_request(_client(), lambda c: c.send_message_batch(QueueUrl=QUEUE, Entries=entries))


def test_the_request_is_boto3s_signed_alike(
    frozen_time: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the body written as botocore writes it (msgspec off) and the same clock, the request
    is boto3's to the byte where it is signed: URL, protocol headers, body, Authorization."""
    monkeypatch.setattr(json_call, "_msgspec_encode", None)
    expected = _boto3_request(ENTRIES)
    session = Session(Response(200, OK))
    assert _call(session).send_message_batch(QUEUE, ENTRIES)["Successful"]
    sent = session.requests[0]
    assert (sent.method, sent.url) == (expected.method, expected.url)
    assert sent.body == expected.body
    for header in ("X-Amz-Target", "Content-Type", "x-amzn-query-mode", "X-Amz-Date"):
        assert text(sent.headers[header]) == text(expected.headers[header]), header
    assert text(sent.headers["Authorization"]) == text(expected.headers["Authorization"])
    assert text(sent.headers["amz-sdk-request"]) == text(expected.headers["amz-sdk-request"])
    assert text(sent.headers["amz-sdk-request"]) == f"attempt=1; max={ATTEMPTS}"


def test_msgspec_writes_the_same_json_and_signs_what_it_sends(frozen_time: None) -> None:
    session = Session(Response(200, OK))
    _call(session).send_message_batch(QUEUE, ENTRIES)
    sent = session.requests[0]
    assert json.loads(sent.body) == json.loads(_boto3_request(ENTRIES).body)
    assert sent.body == encode_body(
        {"QueueUrl": QUEUE, "Entries": ENTRIES}
    )  # compact UTF-8, not botocore's
    signed = "SignedHeaders=content-type;host;x-amz-date;x-amz-target;x-amzn-query-mode"
    assert signed in text(sent.headers["Authorization"])


def test_a_lone_surrogate_is_written_as_botocore_writes_it() -> None:
    entries = [{"Id": "0", "MessageBody": "bad \ud800"}]
    params = {"QueueUrl": QUEUE, "Entries": entries}
    assert encode_body(params) == json.dumps(params).encode()


def test_transient_and_throttling_answers_are_retried_with_botocores_backoff() -> None:
    sleeps: list[float] = []
    session = Session(
        Response(500, {"__type": "InternalError", "message": "x"}),
        Response(400, {"__type": "com.amazonaws.sqs#ThrottlingException", "message": "slow"}),
        Response(200, OK),
    )
    answer = _call(session, sleeps).send_message_batch(QUEUE, ENTRIES)
    assert answer["Successful"][0]["MessageId"] == "m0"
    assert answer["ResponseMetadata"]["HTTPStatusCode"] == 200
    # rand() = 1: 50 ms for a server error (attempt 1), 2 s for throttling (attempt 2)
    assert sleeps == [0.05, 2.0]
    assert [r.headers["amz-sdk-request"] for r in session.requests] == [
        f"attempt={i}; max={ATTEMPTS}" for i in (1, 2, 3)
    ]


def test_as_many_attempts_as_boto3_then_what_boto3_raises() -> None:
    """Against an endpoint that refuses connections, boto3's client (configured as the broker's)
    makes ATTEMPTS attempts; so does the direct call, then raises the same error."""
    refusing = _client("http://127.0.0.1:9")
    tried: list[str] = []
    refusing.meta.events.register("before-send", lambda request, **_: tried.append("boto3"))
    with pytest.raises(EndpointConnectionError):
        refusing.send_message_batch(QueueUrl=QUEUE, Entries=ENTRIES)
    assert len(tried) == ATTEMPTS
    sleeps: list[float] = []
    refused = EndpointConnectionError(endpoint_url=ENDPOINT)
    session = Session(*[refused] * ATTEMPTS)
    with pytest.raises(EndpointConnectionError):
        _call(session, sleeps).send_message_batch(QUEUE, ENTRIES)
    assert len(session.requests) == ATTEMPTS and len(sleeps) == ATTEMPTS - 1
    busy = Response(503, {"__type": "ServiceUnavailable", "message": "busy"})
    session = Session(*[busy] * ATTEMPTS)
    with pytest.raises(ClientError) as raised:
        _call(session).send_message_batch(QUEUE, ENTRIES)
    assert raised.value.response["Error"]["Code"] == "ServiceUnavailable"
    assert raised.value.response["ResponseMetadata"]["RetryAttempts"] == ATTEMPTS - 1


def test_the_attempts_are_the_clients(monkeypatch: pytest.MonkeyPatch) -> None:
    captured: dict[str, Any] = {}

    def made(self: Any, client: Any, credentials: Any, http: Any, **kwargs: Any) -> None:
        captured.update(kwargs)

    monkeypatch.setattr(SendMessageBatchCall, "__init__", made)
    SendMessageBatchCall.for_client(_client(), Credentials("a", "b"))
    assert captured["max_attempts"] == ATTEMPTS


def test_mock_aws_answers_the_direct_call_as_it_answers_boto3() -> None:
    """moto's ``mock_aws`` answers botocore's ``before-send``: emitted on each attempt."""
    from moto import mock_aws

    with mock_aws():
        client = boto3.session.Session().client("sqs", region_name="us-east-1")
        url = client.create_queue(QueueName="direct")["QueueUrl"]
        call = SendMessageBatchCall.for_client(client, client._request_signer._credentials)
        assert call is not None
        answer = call.send_message_batch(url, [{"Id": "a", "MessageBody": "h\u00e9"}])
        assert [s["Id"] for s in answer["Successful"]] == ["a"]
        got = client.receive_message(QueueUrl=url)["Messages"]
        assert [m["Body"] for m in got] == ["h\u00e9"]
        with pytest.raises(client.exceptions.QueueDoesNotExist):  # boto3's class, as boto3
            call.send_message_batch(url + "-gone", [{"Id": "a", "MessageBody": "x"}])


def test_an_error_that_is_not_transient_is_raised_at_once_with_its_query_code() -> None:
    sleeps: list[float] = []
    gone = Response(
        400,
        {"__type": "com.amazonaws.sqs#QueueDoesNotExist", "message": "no queue"},
        {"x-amzn-query-error": "AWS.SimpleQueueService.NonExistentQueue;Sender"},
    )
    session = Session(gone)
    with pytest.raises(ClientError) as raised:
        _call(session, sleeps).send_message_batch(QUEUE, ENTRIES)
    error = raised.value.response["Error"]
    assert error["Code"] == "AWS.SimpleQueueService.NonExistentQueue"
    assert error["Message"] == "no queue"
    assert raised.value.operation_name == "SendMessageBatch"
    assert sleeps == [] and len(session.requests) == 1


def test_partial_failures_are_the_answer_not_an_error() -> None:
    failed = {"Successful": [], "Failed": [{"Id": "1", "Code": "X", "SenderFault": True}]}
    answer = _call(Session(Response(200, failed))).send_message_batch(QUEUE, ENTRIES)
    assert [f["Id"] for f in answer["Failed"]] == ["1"]


def test_clients_make_it_unless_settings_turn_it_off() -> None:
    settings = Settings(endpoint_url=ENDPOINT, region="us-east-1")
    assert isinstance(AwsClients(settings).sqs_send_call(), SendMessageBatchCall)
    assert AwsClients(replace(settings, sqs_direct_send=False)).sqs_send_call() is None
    assert Settings.from_env({"BROKER_SQS_DIRECT_SEND": "false"}).sqs_direct_send is False
    assert Settings.from_env({}).sqs_direct_send is True


def test_a_client_of_another_protocol_keeps_botocore() -> None:
    sts = boto3.session.Session().client("sts", region_name="us-east-1")
    assert SendMessageBatchCall.for_client(sts, Credentials("a", "b")) is None


def test_instrumented_botocore_keeps_its_calls(monkeypatch: pytest.MonkeyPatch) -> None:
    """X-Ray (and OpenTelemetry) wrap ``BaseClient._make_api_call`` with wrapt to trace every
    call: then botocore makes them, SendMessageBatch and the store's DynamoDB calls alike.
    wrapt's wrapper passes the wrapped function's ``__class__`` and ``__code__`` on."""
    import functools

    import wrapt
    from botocore.client import BaseClient

    from chalicelib.adapters.json_call import JsonCall

    dynamodb = boto3.session.Session().client("dynamodb", region_name="us-east-1")
    original = BaseClient.__dict__["_make_api_call"]
    assert SendMessageBatchCall.for_client(_client(), Credentials("a", "b")) is not None
    monkeypatch.setattr(BaseClient, "_make_api_call", original)  # restored after the test

    @functools.wraps(original)
    def traced(self: Any, *args: Any, **kwargs: Any) -> Any:
        return original(self, *args, **kwargs)

    monkeypatch.setattr(BaseClient, "_make_api_call", traced)
    assert SendMessageBatchCall.for_client(_client(), Credentials("a", "b")) is None
    monkeypatch.setattr(BaseClient, "_make_api_call", original)
    wrapt.wrap_function_wrapper(  # as aws_xray_sdk.ext.botocore.patch does
        "botocore.client", "BaseClient._make_api_call", lambda w, i, a, k: w(*a, **k)
    )
    assert isinstance(BaseClient.__dict__["_make_api_call"], type(original))  # it passes
    assert SendMessageBatchCall.for_client(_client(), Credentials("a", "b")) is None
    assert JsonCall.for_client(dynamodb, Credentials("a", "b"), "GetItem") is None


def test_the_x_ray_sdks_own_patch_keeps_botocores_calls() -> None:
    """Powertools' Tracer patches botocore with the X-Ray SDK on Lambda: in a process of its own
    (the patch is process-wide), no call is made directly."""
    import subprocess
    import sys
    from pathlib import Path

    script = (
        "import boto3\n"
        "from botocore.credentials import Credentials\n"
        "from aws_xray_sdk.core import patch\n"
        "from chalicelib.adapters.json_call import JsonCall\n"
        "from chalicelib.adapters.sqs_send_call import SendMessageBatchCall\n"
        "s = boto3.session.Session()\n"
        "c = Credentials('a', 'b')\n"
        "ddb, sqs = s.client('dynamodb', region_name='us-east-1'), s.client('sqs', "
        "region_name='us-east-1')\n"
        "assert JsonCall.for_client(ddb, c, 'GetItem') is not None\n"
        "patch(['botocore'])\n"
        "assert JsonCall.for_client(ddb, c, 'GetItem') is None\n"
        "assert SendMessageBatchCall.for_client(sqs, c) is None\n"
        "print('ok')\n"
    )
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=root, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr


def test_an_older_botocore_keeps_its_calls(monkeypatch: pytest.MonkeyPatch) -> None:
    """A botocore whose parts a direct call cannot use as it does (a Lambda runtime's older one:
    its retry backoff took no service name) makes the calls itself, and the clients remember."""
    import botocore.retries.standard as standard

    class OldBackoff:
        def __init__(self, max_backoff: int = 20, random: Any = None) -> None:
            pass

    sqs = _client()
    clients = AwsClients(Settings(endpoint_url=ENDPOINT, region="us-east-1"))
    clients.client("dynamodb"), clients.client("sqs")  # made before: clients use it too
    monkeypatch.setattr(standard, "ExponentialBackoff", OldBackoff)
    assert SendMessageBatchCall.for_client(sqs, Credentials("a", "b")) is None
    assert clients.direct_call("dynamodb", "GetItem") is None
    assert clients._direct[("dynamodb", "GetItem")] is False  # not tried again
    assert clients.sqs_send_call() is None


def test_the_clients_events_see_the_call_as_botocores() -> None:
    """What watches a client's calls (the local runtime wakes an idle queue's pollers after a
    send; the benchmarks count calls) sees these: the same three events, the same arguments."""
    client = _client()
    seen: list[tuple[str, Any]] = []

    def watch(event_name: str, **kwargs: Any) -> None:
        if event_name.startswith("before-parameter-build"):
            seen.append((event_name, kwargs["params"]["QueueUrl"]))
            kwargs["context"]["queue"] = kwargs["params"]["QueueUrl"]
        elif event_name.startswith("before-call"):
            seen.append((event_name, kwargs["model"].name))
            kwargs["params"]["headers"]["X-Amzn-Trace-Id"] = "Root=1-abc"
        else:
            seen.append((event_name, (kwargs["context"]["queue"], kwargs["parsed"]["Failed"])))

    for name in ("before-parameter-build", "before-call", "after-call"):
        client.meta.events.register(f"{name}.sqs.SendMessageBatch", watch)
    session = Session(Response(200, OK))
    _call(session, client=client).send_message_batch(QUEUE, ENTRIES)
    assert seen == [
        ("before-parameter-build.sqs.SendMessageBatch", QUEUE),
        ("before-call.sqs.SendMessageBatch", "SendMessageBatch"),
        ("after-call.sqs.SendMessageBatch", (QUEUE, [])),
    ]
    assert text(session.requests[0].headers["X-Amzn-Trace-Id"]) == "Root=1-abc"


def test_an_answer_given_before_the_call_is_the_answer_as_with_botocores_stubber() -> None:
    from botocore.stub import Stubber

    client = _client()
    with Stubber(client) as stub:
        stub.add_response("send_message_batch", {"Successful": [], "Failed": []})
        stub.add_client_error("send_message_batch", "AWS.SimpleQueueService.NonExistentQueue")
        session = Session()  # nothing is sent
        call = _call(session, client=client)
        assert call.send_message_batch(QUEUE, ENTRIES)["Failed"] == []
        with pytest.raises(ClientError) as raised:
            call.send_message_batch(QUEUE, ENTRIES)
        assert raised.value.response["Error"]["Code"] == "AWS.SimpleQueueService.NonExistentQueue"
        stub.assert_no_pending_responses()
    assert session.requests == []
