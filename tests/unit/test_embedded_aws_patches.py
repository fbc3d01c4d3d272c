"""What the embedded endpoint changes in moto (brokerctl/moto_fixes/) keeps moto's answers and
fixes what it says it fixes: queue attributes computed on demand against the dict moto builds,
Firehose's date prefixes, DynamoDB writes and transactions under one lock (all or nothing, as
DynamoDB), the check of moto's version, and the endpoint answering as moto's own server."""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from moto.sqs import models

from brokerctl import moto_fixes
from brokerctl.moto_fixes import dynamodb_writes, firehose_prefixes, sqs_queue_attributes

ROOT = Path(__file__).resolve().parents[2]

# A table keyed by a string pk and sk, as the broker's own.
PK_SK_TABLE: dict[str, Any] = {
    "KeySchema": [
        {"AttributeName": "pk", "KeyType": "HASH"},
        {"AttributeName": "sk", "KeyType": "RANGE"},
    ],
    "AttributeDefinitions": [
        {"AttributeName": "pk", "AttributeType": "S"},
        {"AttributeName": "sk", "AttributeType": "S"},
    ],
    "BillingMode": "PAY_PER_REQUEST",
}


@pytest.fixture()
def patched() -> Iterator[None]:
    saved = models.Queue.attributes
    sqs_queue_attributes.compute_on_demand()
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


def test_firehose_prefixes_render_timestamps_as_aws_does() -> None:
    """``archive/!{timestamp:yyyy/MM/dd/HH}/`` becomes the hour's folder, with no second date
    folder after it (a replay lists the hours of its range; docs/replay.md); a prefix without
    an expression keeps moto's (and Firehose's) default date folder."""
    from moto.firehose import models as firehose

    saved = firehose.FirehoseBackend.__dict__["_format_s3_object_path"]
    firehose_prefixes.render_timestamp_prefixes()
    try:
        path = firehose.FirehoseBackend._format_s3_object_path(
            "s", "1", "archive/!{timestamp:yyyy/MM/dd/HH}/"
        )
        plain = firehose.FirehoseBackend._format_s3_object_path("s", "1", "raw")
    finally:
        firehose.FirehoseBackend._format_s3_object_path = saved
    assert re.fullmatch(r"archive/\d{4}/\d{2}/\d{2}/\d{2}/s-1-\d{4}(-\d{2}){5}-[0-9a-f-]{36}", path)
    assert re.fullmatch(r"raw/\d{4}/\d{2}/\d{2}/\d{2}/s-1-\d{4}(-\d{2}){5}-[0-9a-f-]{36}", plain)


# ---- SQS: no Lambda invocation by moto, locked deletes, quiet idle long polls --------------------


@pytest.fixture()
def sqs_fixes(backend: models.SQSBackend) -> Iterator[models.SQSBackend]:
    from brokerctl.moto_fixes import lambda_invocation, sqs_deletes, sqs_long_polls

    saved = {
        name: vars(models.Queue)[name]
        for name in ("lambda_event_source_mappings", "delete_message", "wait_for_messages")
        if name in vars(models.Queue)
    }
    lambda_invocation.disable_lambda_invocation()
    sqs_deletes.lock_deletes()
    sqs_long_polls.quiet_idle_long_polls()
    try:
        yield backend
    finally:
        for name in ("lambda_event_source_mappings", "delete_message", "wait_for_messages"):
            if name in saved:
                setattr(models.Queue, name, saved[name])
            elif name in vars(models.Queue):
                delattr(models.Queue, name)


def test_moto_does_not_play_the_lambda_poller(sqs_fixes: models.SQSBackend) -> None:
    """A mapping moto would act on at SendMessage (receiving the message itself) is not seen: the
    message stays for the broker's own poller, never received."""

    class Mapping:
        enabled = True
        batch_size = 10

    queue = sqs_fixes.create_queue("mapped")
    queue.lambda_event_source_mappings = {"arn:aws:lambda:esm": Mapping()}
    assert queue.lambda_event_source_mappings == {}
    sqs_fixes.send_message("mapped", "hello")
    [message] = sqs_fixes.receive_message("mapped", 10, 0, 30)
    assert message.body == "hello" and message.approximate_receive_count == 1


def test_concurrent_deletes_do_not_undo_one_another(
    patched: None, sqs_fixes: models.SQSBackend
) -> None:
    """moto's delete rebuilds the message list from what it read and puts it in place: two
    deletes at once (two batches of one queue finishing together) each put back the message the
    other deleted. Deletes now take the queue's lock, as sends do."""
    sqs_fixes.create_queue("busy", VisibilityTimeout="300")
    for i in range(400):
        sqs_fixes.send_message("busy", f"m{i}")
    handles = []
    while received := sqs_fixes.receive_message("busy", 10, 0, 300):
        handles += [m.receipt_handle for m in received]
    assert len(handles) == 400

    def delete(part: list[str]) -> None:
        for handle in part:
            sqs_fixes.delete_message("busy", handle)

    switch = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)  # threads take turns often: the race has its chances
    threads = [threading.Thread(target=delete, args=(handles[i::2],)) for i in range(2)]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
    finally:
        sys.setswitchinterval(switch)
    assert [m.body for m in sqs_fixes.get_queue("busy")._messages] == []


def test_an_idle_long_poll_sleeps_longer_and_a_send_still_wakes_it(
    sqs_fixes: models.SQSBackend,
) -> None:
    import time

    from brokerctl.moto_fixes.sqs_long_polls import IDLE_QUEUE_WAIT_SECONDS

    queue = sqs_fixes.create_queue("idle")
    began = time.monotonic()
    queue.wait_for_messages(1)  # moto's own wakes after 1 s
    assert time.monotonic() - began >= IDLE_QUEUE_WAIT_SECONDS - 0.1
    got: list[Any] = []
    poll = threading.Thread(target=lambda: got.extend(sqs_fixes.receive_message("idle", 1, 20, 30)))
    poll.start()
    time.sleep(0.2)  # the poll is waiting (it would find the message anyway, sooner or later)
    sent = time.monotonic()
    sqs_fixes.send_message("idle", "wake")
    poll.join(timeout=30)
    assert [m.body for m in got] == ["wake"] and time.monotonic() - sent < 1.0


def test_the_endpoint_keeps_connections_alive_across_unread_bodies() -> None:
    """werkzeug's development server closes every connection; the fixed handler answers two
    requests on one connection, the first body left unread by the application."""
    import http.client

    from werkzeug.serving import make_server

    def app(environ: dict[str, Any], start_response: Any) -> list[bytes]:
        text = environ["PATH_INFO"].encode()
        start_response("200 OK", [("Content-Length", str(len(text)))])
        return [text]  # the request body is never read

    server = make_server(
        "127.0.0.1", 0, app, threaded=True, request_handler=moto_fixes.keep_alive_handler()
    )
    threading.Thread(target=server.serve_forever, daemon=True).start()
    conn = http.client.HTTPConnection("127.0.0.1", server.server_port, timeout=10)
    try:
        answers = []
        for path in ("/first", "/second"):
            conn.request("POST", path, body=b"x" * 100_000)
            answer = conn.getresponse()
            answers.append((answer.status, answer.read(), answer.getheader("Connection")))
            if path == "/first":
                sock = conn.sock
        assert answers == [(200, b"/first", None), (200, b"/second", None)]
        assert conn.sock is sock  # not reconnected
    finally:
        conn.close()
        server.shutdown()
        server.server_close()


# ---- DynamoDB: atomic conditional writes, all-or-nothing transactions ---------------------------


@pytest.fixture()
def ddb() -> Iterator[Any]:
    from moto.dynamodb import models as ddb_models

    saved = {name: ddb_models.DynamoDBBackend.__dict__[name] for name in dynamodb_writes.WRITES}
    dynamodb_writes.atomic_writes()
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


def _pks(ddb: Any) -> list[str]:
    return sorted(i.attrs["pk"].value for i in ddb.tables["t"].all_items())


def test_a_cancelled_transaction_writes_nothing(ddb: Any) -> None:
    from moto.dynamodb.exceptions import TransactionCanceledException

    ddb.transact_write_items([_put("a")])
    with pytest.raises(TransactionCanceledException) as caught:
        ddb.transact_write_items([_put("b"), _put("a"), _put("c")])
    reasons = json.loads(caught.value.description)["CancellationReasons"]
    assert [r["Code"] for r in reasons] == ["None", "ConditionalCheckFailed", "None"]
    assert _pks(ddb) == ["a"]
    ddb.transact_write_items([_put("b"), _put("c")])
    assert _pks(ddb) == ["a", "b", "c"]


@pytest.mark.parametrize(
    "second",
    [
        pytest.param({"pk": {"N": "1"}}, id="key-of-another-type"),
        pytest.param({"pk": {"S": "big"}, "x": {"S": "x" * 410_000}}, id="item-too-large"),
    ],
)
def test_a_transaction_whose_later_item_fails_validation_writes_nothing(
    ddb: Any, second: dict[str, Any]
) -> None:
    """DynamoDB (and plain moto) writes no item of a transaction that fails: the first Put, whose
    condition holds, must not stay written when the second one is refused."""
    first = _put("first")
    with pytest.raises(Exception, match=r"Type mismatch|maximum allowed size"):
        ddb.transact_write_items([first, {"Put": {"TableName": "t", "Item": second}}])
    assert _pks(ddb) == []
    ddb.transact_write_items([first])  # and the first item can still be claimed
    assert _pks(ddb) == ["first"]


def test_a_rolled_back_transaction_undoes_no_write_made_meanwhile(ddb: Any) -> None:
    """moto rolls a transaction back by putting copies of its tables in their place: a put that
    landed while it ran would be undone. Under the lock no put lands meanwhile."""
    from moto.dynamodb.exceptions import TransactionCanceledException

    for i in range(300):
        ddb.put_item("t", {"pk": {"S": f"old{i}"}})
    acknowledged: list[str] = []
    started = threading.Event()

    def writer() -> None:
        started.wait(timeout=60)
        for i in range(300):
            ddb.put_item("t", {"pk": {"S": f"new{i}"}})
            acknowledged.append(f"new{i}")

    switch = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)  # threads take turns often: the race has its chances
    thread = threading.Thread(target=writer)
    try:
        thread.start()
        started.set()
        cancelled = 0
        while thread.is_alive() or cancelled < 20:
            with pytest.raises(TransactionCanceledException):
                ddb.transact_write_items([_put("fresh"), _put("old0")])
            cancelled += 1
        thread.join()
    finally:
        sys.setswitchinterval(switch)
    present = set(_pks(ddb))
    assert len(acknowledged) == 300 and [pk for pk in acknowledged if pk not in present] == []
    assert "fresh" not in present


# ---- moto's version ---------------------------------------------------------------------------


def test_the_pinned_moto_is_the_one_requirements_pin_and_the_one_installed() -> None:
    pins = (ROOT / "requirements-dev.txt").read_text()
    assert f"moto[server]=={moto_fixes.PINNED_MOTO}\n" in pins
    assert moto_fixes.installed_moto() == moto_fixes.PINNED_MOTO
    moto_fixes.require_pinned_moto(moto_fixes.PINNED_MOTO)


def test_another_moto_is_refused_with_what_to_install() -> None:
    with pytest.raises(moto_fixes.MotoVersionError) as caught:
        moto_fixes.require_pinned_moto("5.3.0")
    message = str(caught.value)
    assert "needs moto 5.2.5, found 5.3.0" in message
    assert "pip install 'moto[server]==5.2.5'" in message


@pytest.mark.parametrize(
    "command",
    [
        pytest.param(["-m", "brokerctl.embedded_aws"], id="endpoint"),
        pytest.param(["-m", "brokerctl", "dev"], id="brokerctl-dev"),
    ],
)
def test_local_mode_does_not_start_on_another_moto(tmp_path: Path, command: list[str]) -> None:
    """A moto 9.9.9 found first on the path (as another install would be): the endpoint and
    ``brokerctl dev`` stop at once with the message, and start nothing."""
    from brokerctl.embedded_aws import free_port

    info = tmp_path / "moto-9.9.9.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: moto\nVersion: 9.9.9\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "BROKER_"))}
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path), str(ROOT)])
    ports = ["--port", str(free_port())] + (
        ["--aws-port", str(free_port())] if "dev" in command else []
    )
    done = subprocess.run(
        [sys.executable, *command, *ports], env=env, cwd=tmp_path, capture_output=True, text=True,
        timeout=120,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert "needs moto 5.2.5, found 9.9.9" in done.stderr
    assert "Traceback" not in done.stderr and "ready" not in done.stdout


# ---- The patched endpoint answers as moto's own server does --------------------------------------


@pytest.fixture()
def two_endpoints() -> Iterator[tuple[str, str]]:
    """A fresh embedded endpoint (every fix) and a fresh moto server of the same moto (none)."""
    import subprocess
    import sys
    import time

    from brokerctl.embedded_aws import EmbeddedAws, _answers, free_port
    from brokerctl.processes import end_process

    patched = EmbeddedAws(port=free_port())
    port = free_port()
    plain = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        url = patched.start()
        deadline = time.monotonic() + 60
        while not _answers("127.0.0.1", port):
            assert plain.poll() is None and time.monotonic() < deadline, "moto.server did not start"
            time.sleep(0.05)
        yield url, f"http://127.0.0.1:{port}"
    finally:
        patched.stop()
        end_process(plain)


# Parts of an answer that differ between any two runs (ids, receipts, clocks, and the length and
# digest of bodies holding those), or between keep-alive and werkzeug's close-every-connection.
RANDOM_HEADERS = {"date", "x-amzn-requestid", "x-amz-request-id", "x-amz-id-2", "last-modified",
                  "x-amz-crc32", "connection", "keep-alive", "server",
                  "content-length"}  # fmt: skip
RANDOM_FIELDS = re.compile(
    r'("(MessageId|ReceiptHandle|SentTimestamp|ApproximateFirstReceiveTimestamp|'
    r"CreationDateTime|LastModifiedTimestamp|CreatedTimestamp|LastUpdateToPayPerRequestDateTime|"
    r'LatestStreamLabel|LatestStreamArn|SequenceNumber)":\s*)("[^"]*"|[0-9.]+)'
    r"|<(LastModified|RequestId)>[^<]*</(LastModified|RequestId)>"
)


def _masked(body: bytes, url: str) -> str:
    text = body.decode().replace(url.removeprefix("http://"), "endpoint")
    return RANDOM_FIELDS.sub(lambda m: (m.group(1) or f"<{m.group(4)}>") + "~", text)


def _conversation(url: str) -> list[tuple[Any, ...]]:
    """Calls the broker makes, and some it should not, with every answer as it came over HTTP."""
    import boto3
    import httpx
    from botocore.config import Config

    heard: list[tuple[Any, ...]] = []

    def record(http_response: Any, parsed: Any, model: Any, **_: Any) -> None:
        headers = {k.lower(): v for k, v in http_response.headers.items()}
        kept = {k: v for k, v in headers.items() if k not in RANDOM_HEADERS}
        body = _masked(http_response.content, url)
        heard.append((model.name, http_response.status_code, kept, body))

    session = boto3.session.Session(
        aws_access_key_id="testing", aws_secret_access_key="testing", region_name="us-east-1"
    )
    config = Config(retries={"max_attempts": 1})
    sqs, s3, ddb = (
        session.client(s, endpoint_url=url, config=config) for s in ("sqs", "s3", "dynamodb")
    )
    for client in (sqs, s3, ddb):
        client.meta.events.register("after-call", record)

    def tolerate(call: Any, *args: Any, **kwargs: Any) -> None:
        with contextlib.suppress(Exception):  # the error answer is what is compared
            call(*args, **kwargs)

    q = sqs.create_queue(QueueName="same", Attributes={"VisibilityTimeout": "0"})["QueueUrl"]
    bodies = [
        json.dumps({"pack": [{"id": i, "data": 'é\u2028\\"/', "n": 1.5e300}]}) for i in range(3)
    ]
    sqs.send_message_batch(QueueUrl=q, Entries=[
        {"Id": str(i), "MessageBody": b,
         "MessageAttributes": {"a": {"DataType": "String", "StringValue": "v+%&="}}}
        for i, b in enumerate(bodies)])  # fmt: skip
    sqs.send_message(QueueUrl=q, MessageBody="Action=SendMessage&x=1+2%20")
    sqs.receive_message(QueueUrl=q, MaxNumberOfMessages=10, MessageAttributeNames=["All"],
                        MessageSystemAttributeNames=["All"])  # fmt: skip
    tolerate(sqs.send_message_batch, QueueUrl=q, Entries=[{"Id": "1", "MessageBody": "x"}] * 2)
    fifo = sqs.create_queue(QueueName="same.fifo", Attributes={"FifoQueue": "true"})["QueueUrl"]
    attributes = {"s": {"DataType": "String", "StringValue": "v+%&="},
                  "n": {"DataType": "Number.int", "StringValue": "3"},
                  "b": {"DataType": "Binary", "BinaryValue": b"\x00\xff"}}  # fmt: skip
    for queue_url, entries in [
        (q, [{"Id": "é-1", "MessageBody": "日本語 😀 \u2028", "DelaySeconds": 1},
             {"Id": "late", "MessageBody": "x", "DelaySeconds": 901},  # a failure entry
             {"Id": "a", "MessageBody": '{"k": "\\"v\\""}', "MessageAttributes": attributes}]),
        (q, [{"Id": "bad id!", "MessageBody": "x"}]),
        (q, [{"Id": str(i), "MessageBody": "x" * 600_000} for i in range(2)]),  # too long
        (q, [{"Id": str(i), "MessageBody": "x"} for i in range(11)]),
        (q, [{"Id": "a", "MessageBody": "x&Action=ListQueues"}]),  # read as a query string
        (q, [{"Id": "a", "MessageBody": "x", "MessageAttributes": {"no good": attributes["s"]}}]),
        (fifo, [{"Id": str(i), "MessageBody": "x", "MessageGroupId": "g",
                 "MessageDeduplicationId": f"d{i % 2}"} for i in range(3)]),
        (fifo, [{"Id": "a", "MessageBody": "x"}]),  # no group
        (fifo, [{"Id": "a", "MessageBody": "x", "MessageGroupId": "g"}]),  # no dedup id
        (q.replace("same", "missing"), [{"Id": "a", "MessageBody": "x"}]),
    ]:  # fmt: skip
        tolerate(sqs.send_message_batch, QueueUrl=queue_url, Entries=entries)
    sqs.receive_message(QueueUrl=fifo, MaxNumberOfMessages=10, MessageAttributeNames=["All"],
                        MessageSystemAttributeNames=["All"])  # fmt: skip
    sqs.get_queue_attributes(QueueUrl=q, AttributeNames=["All"])
    ddb.create_table(TableName="same", **PK_SK_TABLE)
    item = {"pk": {"S": "p"}, "sk": {"S": "s"}, "n": {"N": "123456789012345678901234567890"},
            "f": {"N": "1.5"}, "b": {"B": b"\x00\xff"},
            "l": {"L": [{"M": {"k": {"NULL": True}}}]}}  # fmt: skip
    for _ in range(2):  # the second put fails its condition
        tolerate(ddb.put_item, TableName="same", Item=item,
                 ConditionExpression="attribute_not_exists(pk)")  # fmt: skip
    ddb.get_item(TableName="same", Key={"pk": {"S": "p"}, "sk": {"S": "s"}})
    ddb.query(TableName="same", KeyConditionExpression="pk = :p AND begins_with(sk, :s)",
              ExpressionAttributeValues={":p": {"S": "p"}, ":s": {"S": "s"}})  # fmt: skip
    tolerate(ddb.query, TableName="same", KeyConditionExpression="nope = :p",
             ExpressionAttributeValues={":p": {"S": "p"}})  # fmt: skip
    s3.create_bucket(Bucket="same")
    s3.put_object(Bucket="same", Key="archive/2026/01/31/12/a", Body=b"{}\n" * 1000)
    s3.get_object(Bucket="same", Key="archive/2026/01/31/12/a")
    s3.list_objects_v2(Bucket="same", Prefix="archive/")
    tolerate(s3.get_object, Bucket="same", Key="missing")
    signed = "Credential=testing/20260131/us-east-1/sqs/aws4_request, SignedHeaders=host"
    raw_headers = {
        "Content-Type": "application/x-amz-json-1.0", "X-Amz-Target": "AmazonSQS.GetQueueUrl",
        "Authorization": f"AWS4-HMAC-SHA256 {signed}, Signature=x",
    }  # fmt: skip
    for body in (b"{not json", b"NaN", b'{"QueueName": "same", "n": 1e400}', b'{"QueueName": 1}'):
        answer = httpx.post(url, content=body, headers=raw_headers)
        kind = answer.headers.get("content-type")
        heard.append(("raw", answer.status_code, kind, _masked(answer.content, url)))
    return heard


def test_the_patched_endpoint_answers_byte_for_byte_as_moto_server(
    two_endpoints: tuple[str, str],
) -> None:
    patched, plain = two_endpoints
    ours, theirs = _conversation(patched), _conversation(plain)
    assert len(ours) == len(theirs) > 15
    for mine, reference in zip(ours, theirs, strict=True):
        assert mine == reference
    assert any(status >= 400 for _, status, *_ in ours)  # error answers were compared too
