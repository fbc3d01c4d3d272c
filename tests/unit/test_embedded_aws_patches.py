"""The embedded endpoint's changes to moto keep SQS's answers: here the queue attributes computed
on demand against the dict moto builds, for every kind of queue and message state."""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Iterator
from typing import Any

import pytest
from moto.sqs import models

from brokerctl import embedded_aws

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
        ddb.create_table(TableName="t", **PK_SK_TABLE)
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


# ---- Less CPU per request, the same answers ------------------------------------------------------


@pytest.fixture()
def undo() -> Iterator[list[tuple[Any, str]]]:
    """Names of (owner, attribute) a test's patches replace: put back as they were after it."""
    names: list[tuple[Any, str]] = []
    yield names
    for owner, name in reversed(names):
        setattr(owner, name, vars(owner)[f"_saved_{name}"])
        delattr(owner, f"_saved_{name}")


def _save(undo: list[tuple[Any, str]], owner: Any, name: str) -> None:
    setattr(owner, f"_saved_{name}", vars(owner)[name])
    undo.append((owner, name))


def _same(a: Any, b: Any) -> bool:
    """Equal values of equal types all the way down (``repr`` tells 1 from 1.0 and True, keeps
    key order, and a NaN equals itself)."""
    return type(a) is type(b) and repr(a) == repr(b)


def _json_parser() -> Any:
    from moto.core.parse import JSONParser

    return JSONParser.__new__(JSONParser)  # reading a body needs no operation model


def _read_json(read: Any, body: Any) -> tuple[str, Any]:
    try:
        return ("value", read(_json_parser(), body))
    except Exception as e:  # the kind of failure is part of the answer
        return ("error", type(e).__name__)


TRICKY_JSON = [
    "", "{}", "[]", " 1 ", "-0", "-0.0", "0.1", "1E5", "1.5e-400", "5e-324", "1e400", "-1e400",
    "1.7976931348623159e308", "1" * 30, "-" + "9" * 25, "9" * 4300, "9" * 4301, "NaN",
    "Infinity", "-Infinity", '"\\ud800"', '"\\udc00\\ud800"', '"\\ud834\\udd1e"', '"a\nb"',
    '"\\u0000"', '"\x00"', '"\u2028"', '{"a":1,"a":2,"b":3}', '{"b":1,"a":2,"b":3}', "1 2",
    "\ufeff{}", "01", "1.", ".5", "+1", '"\\x"', "[1,]", '{"a":}', "\x0c1", "[" * 1400 + "]" * 1400,
    "[" * 2000 + "]" * 2000, "Action=SendMessage&QueueUrl=q", '{"k": "\\"quoted\\" \\\\ \\/"}',
]  # fmt: skip


def test_json_bodies_read_by_msgspec_give_the_values_and_errors_moto_gives(
    undo: list[tuple[Any, str]],
) -> None:
    from hypothesis import given, settings
    from hypothesis import strategies as st
    from moto.core import parse

    original = parse.BaseJSONParser._parse_body_as_json
    _save(undo, parse.BaseJSONParser, "_parse_body_as_json")
    embedded_aws._decode_json_bodies_with_msgspec()
    patched = parse.BaseJSONParser._parse_body_as_json
    assert patched is not original
    kinds = []
    for text in TRICKY_JSON:
        for body in (text, text.encode("utf-8", "surrogatepass"), text.encode("utf-16")):
            want, got = _read_json(original, body), _read_json(patched, body)
            assert want[0] == got[0] and _same(want[1], got[1]), (text[:40], want, got)
            kinds.append(want if want[0] == "error" else type(want[1]).__name__)
    assert {"dict", "list", "int", "float", "str"} <= set(kinds)  # values, not only errors
    assert ("error", "RecursionError") in kinds

    values = st.recursive(
        st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
        max_leaves=20,
    )

    @settings(max_examples=300)
    @given(values, st.booleans())
    def documents(value: Any, ascii_only: bool) -> None:
        body = json.dumps(value, ensure_ascii=ascii_only).encode("utf-8", "surrogatepass")
        want, got = _read_json(original, body), _read_json(patched, body)
        assert want[0] == got[0] and _same(want[1], got[1])

    @settings(max_examples=300)
    @given(st.text(alphabet='{}[]",:0123456789.eE+-\\u tnrfalsNIy\x00\ud800é'))
    def fragments(text: str) -> None:
        body = text.encode("utf-8", "surrogatepass")
        want, got = _read_json(original, body), _read_json(patched, body)
        assert want[0] == got[0] and _same(want[1], got[1])

    documents()
    fragments()


def test_json_bodies_are_not_read_by_the_standard_library(
    undo: list[tuple[Any, str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    from moto.core import parse

    reads: list[str] = []

    class CountingJson:
        @staticmethod
        def loads(s: Any, **kw: Any) -> Any:
            reads.append(s)
            return json.loads(s, **kw)

    monkeypatch.setattr(parse, "json", CountingJson)
    _save(undo, parse.BaseJSONParser, "_parse_body_as_json")
    embedded_aws._decode_json_bodies_with_msgspec()
    body = json.dumps({"QueueUrl": "q", "Entries": [{"Id": "1", "MessageBody": '{"a": 1}'}]})
    assert _json_parser()._parse_body_as_json(body.encode()) == json.loads(body)
    assert reads == []
    nan = _json_parser()._parse_body_as_json(b"NaN")
    assert isinstance(nan, float) and nan != nan  # moto's own reading decided: json.loads
    assert reads == ["NaN"]


def _outcome(call: Any, *args: Any) -> tuple[str, Any]:
    try:
        return ("value", call(*args))
    except Exception as e:  # the kind of failure is part of the answer
        return ("error", type(e).__name__)


def test_plain_bodies_skip_query_string_splitting_with_parse_qsl_answers(
    undo: list[tuple[Any, str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    import urllib.parse

    from hypothesis import given, settings
    from hypothesis import strategies as st
    from moto.core import responses

    original = urllib.parse.parse_qsl
    calls: list[Any] = []

    def counting(*args: Any, **kwargs: Any) -> Any:
        calls.append(args)
        return original(*args, **kwargs)

    _save(undo, responses, "parse_qsl")
    for module in (urllib.parse, responses):  # moto's calls and the patch's are counted
        monkeypatch.setattr(module, "parse_qsl", counting)
    embedded_aws._skip_query_string_parsing_of_plain_bodies()
    patched = responses.parse_qsl  # type: ignore[attr-defined]

    body = json.dumps({"QueueUrl": "q", "Entries": [{"Id": str(i)} for i in range(100)]})
    assert patched(body, keep_blank_values=True) == original(body, keep_blank_values=True)
    assert calls == []

    @settings(max_examples=500)
    @given(st.text(alphabet='ab{}":é &=+%;2F\x00'), st.booleans())
    def same(text: str, keep_blank: bool) -> None:
        assert patched(text, keep_blank_values=keep_blank) == original(
            text, keep_blank_values=keep_blank
        )
        assert _outcome(patched, text.encode(), keep_blank) == _outcome(
            original, text.encode(), keep_blank
        )

    same()
    with pytest.raises(ValueError):
        patched("a&b", True, True)  # strict_parsing: parse_qsl's own refusal


def test_request_ids_are_written_into_xml_answers_only_and_not_searched_for_elsewhere(
    undo: list[tuple[Any, str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    import re

    from moto.core import responses

    original = responses.BaseResponse._enrich_response
    searched: list[Any] = []

    class CountingRe:
        @staticmethod
        def sub(pattern: str, repl: str, string: Any) -> Any:
            searched.append(string)
            return re.sub(pattern, repl, string)

    monkeypatch.setattr(responses, "re", CountingRe)
    _save(undo, responses.BaseResponse, "_enrich_response")
    embedded_aws._look_for_request_ids_only_where_there_is_one()
    patched = responses.BaseResponse._enrich_response
    bodies: list[Any] = [
        json.dumps({"Messages": [{"Body": "x" * 50_000}] * 10}), "", b"<RequestId>b</RequestId>",
        "<R><RequestId>old</RequestId></R>", "<a/>\n<RequestId>\n</RequestId>", None, {"k": 1},
    ]  # fmt: skip
    for body in bodies:
        want_headers: dict[str, Any] = {"status": 200, "a": "b"}
        got_headers: dict[str, Any] = {"status": 200, "a": "b"}
        want = original(want_headers, body)
        searched.clear()
        got = patched(got_headers, body)
        if isinstance(body, str) and body and "<RequestId>" not in body:
            assert all(string is not body for string in searched)  # not even looked at
        assert want[0] is want_headers and got[0] is got_headers
        want_id, got_id = want_headers.pop("x-amzn-requestid"), got_headers.pop("x-amzn-requestid")
        assert want_headers == got_headers == {"status": "200", "a": "b"}
        assert len(want_id) == len(got_id) == 52
        if isinstance(body, str) and "<RequestId>" in body:
            assert got[1] == body.replace(">old<", f">{got_id}<") or got[1] == re.sub(
                r"(?<=<RequestId>).*(?=<\/RequestId>)", got_id, body
            )
        else:
            assert _same(got[1], want[1]) and _same(got[1], body)


def test_message_digests_are_computed_once_per_body(
    undo: list[tuple[Any, str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    import copy
    import hashlib

    from moto.sqs import models

    hashes: list[int] = []

    def md5_hash(data: Any = None) -> Any:
        hashes.append(1)
        return hashlib.md5(usedforsecurity=False)

    monkeypatch.setattr(models, "md5_hash", md5_hash)
    _save(undo, models.Message, "body_md5")
    embedded_aws._remember_message_digests()
    message = models.Message("id", '{"pack": ["é"]}')
    want = hashlib.md5('{"pack": ["é"]}'.encode()).hexdigest()
    assert message.body_md5 == want and message.body_md5 == want
    assert copy.deepcopy(message).body_md5 == want  # a receive hands out a deep copy
    assert len(hashes) == 1
    message.body = "other"
    assert message.body_md5 == hashlib.md5(b"other").hexdigest() and len(hashes) == 2


def test_a_queue_scan_reads_the_clock_once_and_lists_what_moto_lists(
    undo: list[tuple[Any, str]], backend: models.SQSBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    from moto.core import utils

    original = vars(models.Queue)["messages"]
    queue = backend.create_queue("scan")
    for i in range(30):
        backend.send_message("scan", f"m{i}", delay_seconds=60 if i % 3 == 0 else None)
    backend.receive_message("scan", 5, 0, 600)  # five in flight, ten delayed, fifteen ready
    reads: list[int] = []
    utcnow = utils.utcnow

    def counting() -> Any:
        reads.append(1)
        return utcnow()

    monkeypatch.setattr(utils, "utcnow", counting)
    want = original.fget(queue)
    moto_reads, reads[:] = len(reads), []
    _save(undo, models.Queue, "messages")
    embedded_aws._read_the_clock_once_per_queue_scan()
    got = queue.messages
    assert got == want and len(got) == 15
    assert len(reads) == 1 and moto_reads == 30 + 25  # visible? then delayed?


def test_requests_read_their_form_without_flask_debug_helpers() -> None:
    from flask import request
    from moto.moto_server.werkzeug_app import BackendRequest, create_backend_app
    from werkzeug.datastructures import ImmutableMultiDict

    app = create_backend_app("sqs")
    assert app.debug and app.request_class is BackendRequest
    body = b'{"QueueUrl": "q"}'
    headers = {"Content-Type": "application/x-amz-json-1.0"}

    def read() -> tuple[Any, ...]:
        with app.test_request_context("/", method="POST", data=body, headers=headers):
            return type(request.files), dict(request.form), dict(request.files), request.data

    debug_files, *answers = read()
    assert debug_files is not ImmutableMultiDict  # Flask's debug helper: a class per request
    own = BackendRequest.__dict__.get("_load_form_data")  # inherited from Flask's Request
    try:
        embedded_aws._skip_flask_debug_form_helper()
        files, *same = read()
    finally:  # inherited again, as before
        if own is None:
            del BackendRequest._load_form_data
        else:
            BackendRequest._load_form_data = own  # type: ignore[method-assign]
    assert files is ImmutableMultiDict and same == answers == [{}, {}, body]


def test_member_values_are_picked_without_a_context_each_with_moto_answers(
    undo: list[tuple[Any, str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    from moto.core import serialize

    built: list[int] = []

    class CountedContext(serialize.AttributePickerContext):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            built.append(1)
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(serialize, "AttributePickerContext", CountedContext)
    before = _answers()
    moto_built, built[:] = len(built), []
    _save(undo, serialize.ResponseSerializer, "get_value")
    embedded_aws._pick_member_values_directly()
    assert _answers() == before
    first = len(built)
    assert _answers() == before  # names remembered: no context at all
    assert moto_built > 400 and first < moto_built / 3 and len(built) == first


SQS_JSON_HEADERS = {
    "Content-Type": "application/x-amz-json-1.0",
    "Authorization": "AWS4-HMAC-SHA256 Credential=testing/20260131/us-east-1/sqs/aws4_request, "
    "SignedHeaders=host, Signature=x",
}  # fmt: skip


def _batch(queue: str, *entries: dict[str, Any], **extra: Any) -> bytes:
    return json.dumps({"QueueUrl": f"http://localhost/123456789012/{queue}",
                       "Entries": list(entries), **extra}).encode()  # fmt: skip


def _entries(n: int, size: int = 10, **fields: Any) -> list[dict[str, Any]]:
    return [{"Id": f"m{i}", "MessageBody": "é" * size + str(i), **fields} for i in range(n)]


# SendMessageBatch requests answered by the fast path (True) or left to moto's (False).
BATCHES: list[tuple[bool, bytes]] = [
    (True, _batch("q", *_entries(10, 50_000))),
    (True, _batch("q", {"Id": "é-1", "MessageBody": '{"k": "\\"\u2028😀"}', "DelaySeconds": 5},
                  {"Id": "late", "MessageBody": "x", "DelaySeconds": 901},  # a failure entry
                  {"Id": "n", "MessageBody": "y", "DelaySeconds": None, "Unknown": 1})),
    (True, _batch("q", {"Id": "a", "MessageBody": "x", "MessageAttributes": {
        "s": {"DataType": "String", "StringValue": "v+%"},
        "n": {"DataType": "Number", "StringValue": "3"},
        "b": {"DataType": "Binary", "BinaryValue": "AAE="}}})),
    (True, _batch("f.fifo", *_entries(3, MessageGroupId="g", MessageDeduplicationId="d"))),
    (True, _batch("c.fifo", *_entries(2, MessageGroupId="g"))),  # content-based dedup
    (False, _batch("q", {"Id": "bad id!", "MessageBody": "x"})),  # InvalidBatchEntryId
    (False, _batch("q", *[{"Id": "1", "MessageBody": "x"}] * 2)),  # ids not distinct
    (False, _batch("q", *[{"Id": f"{i}", "MessageBody": "x" * 600_000} for i in "ab"])),  # too long
    (False, _batch("q", *_entries(11))),  # too many entries
    (False, _batch("q")),  # empty
    (False, _batch("missing", *_entries(1))),  # QueueDoesNotExist
    (False, _batch("f.fifo", *_entries(1))),  # no MessageGroupId
    (False, _batch("f.fifo", *_entries(1, MessageGroupId="g", DelaySeconds=2))),
    (False, _batch("q", {"Id": "a", "MessageBody": "x",
                         "MessageAttributes": {"bad name!": {"DataType": "String",
                                                             "StringValue": "v"}}})),
    (False, _batch("q", {"Id": "a", "MessageBody": "x",
                         "MessageAttributes": {"a": {"DataType": "Nope", "StringValue": "v"}}})),
    (False, _batch("q", {"Id": 1, "MessageBody": "x"})),  # moto's parser keeps the int
    (False, _batch("q", {"Id": "a", "MessageBody": "x", "DelaySeconds": "5"})),  # converted
    (False, _batch("q", {"Id": "a", "MessageBody": "x&Action=ListQueues"})),  # a query string
    (False, b"[1]"),
    (False, b"{not json"),
    (False, b'{"QueueUrl": "q", "Entries": [{"Id": "a", "MessageBody": "\xff"}]}'),  # not UTF-8
]  # fmt: skip


def _call_app(app: Any, body: bytes, **headers: str) -> tuple[Any, ...]:
    from werkzeug.test import EnvironBuilder

    sent: dict[str, str] = {**SQS_JSON_HEADERS, "X-Amz-Target": "AmazonSQS.SendMessageBatch"}
    environ = EnvironBuilder(
        path="/", method="POST", data=body, base_url="http://localhost:4566",
        headers=list({**sent, **headers}.items()),
    ).get_environ()  # fmt: skip
    started: list[Any] = []
    try:
        answer = b"".join(app(environ, lambda status, pairs, *_: started.append((status, pairs))))
    except Exception as e:  # moto's 500 (Flask in debug mode lets it through)
        return ("raised", type(e).__name__)
    status, pairs = started[0]
    kept = [(k, v) for k, v in pairs if k.lower() not in RANDOM_HEADERS - {"content-length"}]
    return status, kept, _masked(answer, "http://localhost")


def _sqs_answers(app: Any) -> list[tuple[Any, ...]]:
    """Every batch of BATCHES sent to fresh queues: the answers and what the queues then hold."""
    from moto.core.models import DEFAULT_ACCOUNT_ID

    backend = models.sqs_backends[DEFAULT_ACCOUNT_ID]["us-east-1"]
    heard = []
    for _, body in BATCHES:
        backend.reset()
        backend.create_queue("q")
        backend.create_queue("f.fifo", FifoQueue="true")
        backend.create_queue("c.fifo", FifoQueue="true", ContentBasedDeduplication="true")
        answer = _call_app(app, body)
        held = [
            (q.name, m.body, m.message_attributes, m.group_id, m.deduplication_id,
             round((m.delayed_until - (m.sent_timestamp or 0)) / 1000) if m.delayed_until else 0)
            for q in backend.queues.values() for m in q._messages
        ]  # fmt: skip
        heard.append((answer, held))
    backend.reset()
    return heard


def test_message_batches_are_sent_without_moto_request_stack_with_moto_answers(
    undo: list[tuple[Any, str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    from moto.core import responses, serialize
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app

    walked: list[str] = []
    for owner, name in ((responses.BaseResponse, "setup_class"),
                        (serialize.ResponseSerializer, "serialize")):  # fmt: skip
        method = getattr(owner, name)

        def counting(*args: Any, _method: Any = method, _name: str = name, **kw: Any) -> Any:
            walked.append(_name)
            return _method(*args, **kw)

        monkeypatch.setattr(owner, name, counting)
    app = DomainDispatcherApplication(create_backend_app)
    want = _sqs_answers(app)
    moto_walks = [walked.count("setup_class"), walked.count("serialize")]
    _save(undo, DomainDispatcherApplication, "__call__")
    embedded_aws._send_message_batches_directly()
    walked.clear()
    got = _sqs_answers(app)
    for (answer, held), (moto_answer, moto_held), (_, body) in zip(got, want, BATCHES, strict=True):
        assert answer == moto_answer and held == moto_held, body[:200]
    direct = sum(1 for fast, _ in BATCHES if fast)
    refused = len(BATCHES) - direct
    assert moto_walks[0] == len(BATCHES) and moto_walks[1] > direct
    # the direct ones neither set up moto's response class nor walk its serializer
    assert [walked.count("setup_class"), walked.count("serialize")] == [
        refused,
        moto_walks[1] - direct,
    ]
    assert any(b'"Failed": [{"Id": "late"' in a[2].encode() for (a, _) in got)
    assert [h for _, h in got[:5]] and all(h for _, h in got[:5])  # messages were sent
    cors = _call_app(app, BATCHES[0][1], Origin="http://x")  # CORS answers: moto's own
    assert walked.count("setup_class") == refused + 1 and cors[0] == "400 BAD REQUEST"


def test_random_characters_are_drawn_in_one_loop_with_moto_strings_and_state(
    undo: list[tuple[Any, str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    import random

    from moto.moto_api._internal import mock_random, moto_random
    from moto.sqs import utils

    def draws() -> list[Any]:
        """Strings moto draws, from a few seeds, and the generator's state after each."""
        seen: list[Any] = []
        for seed in range(40):
            mock_random.seed(seed)
            seen += [
                models.generate_receipt_handle(), utils.generate_receipt_handle(),  # type: ignore[attr-defined]
                mock_random.get_random_string(), mock_random.get_random_string(52),
                mock_random.get_random_string(7, include_digits=False, lower_case=True),
                [mock_random.choice(s) for s in ("0123456789", "ab", "x", [1, 2, 3]) * 5],
                mock_random.get_random_hex(), str(mock_random.uuid4()), mock_random.getstate(),
            ]  # fmt: skip
        return seen

    chosen: list[int] = []
    below = random.Random._randbelow_with_getrandbits  # type: ignore[attr-defined]

    def counting(self: Any, n: int) -> int:  # Random.choice's draw of each character
        chosen.append(n)
        return int(below(self, n))

    rng = moto_random.MotoRandom
    monkeypatch.setattr(rng, "_randbelow", counting)
    want = draws()
    moto_draws, chosen[:] = len(chosen), []
    monkeypatch.setattr(rng, "choice", rng.choice)  # inherited: taken away again after the test
    for owner, name in ((rng, "get_random_string"), (utils, "generate_receipt_handle"),
                        (models, "generate_receipt_handle")):  # fmt: skip
        _save(undo, owner, name)
    monkeypatch.setattr(rng, "_randbelow", below)  # moto's own, as the patch expects
    embedded_aws._draw_random_characters_directly()
    monkeypatch.setattr(rng, "_randbelow", counting)
    assert draws() == want
    assert moto_draws == 40 * (2 * 185 + 20 + 52 + 7 + 20 + 8) and chosen == []
    with pytest.raises(IndexError):
        mock_random.choice("")
    mock_random.seed(None)


# ---- The patched endpoint answers as moto's own server does --------------------------------------


@pytest.fixture()
def two_endpoints() -> Iterator[tuple[str, str]]:
    """A fresh embedded endpoint (every patch) and a fresh moto server of the same moto (none)."""
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
