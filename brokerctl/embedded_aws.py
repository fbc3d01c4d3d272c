"""The embedded AWS endpoint of local mode: a real moto server over HTTP on loopback, in a process
of its own (``python -m brokerctl.embedded_aws``).

Its own process, because moto's request handling is pure Python: sharing an interpreter (and its
lock) with the broker's ingress, pollers and delivery made every AWS call wait on the broker's work
and the other way round. It exits with the process that started it. Its HTTP/1.1 handler keeps
connections open (werkzeug's development server closes each one), so the broker's clients reuse
them instead of opening a TCP connection per AWS call.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from typing import Any

from brokerctl.processes import end_process

READY_LINE = "embedded AWS endpoint ready"


def _disable_moto_lambda_invocation() -> None:
    """moto answers SendMessage on a queue with an event source mapping by receiving the messages
    itself and invoking the function in Docker (absent here), which bumps receive counts and
    steals messages. On AWS the Lambda poller does that, and in local mode our event-source
    emulation plays the poller, so the queue must not see moto's own mapping registry."""
    from moto.sqs import models

    def _get(self: Any) -> dict[str, Any]:
        return {}

    def _set(self: Any, value: Any) -> None:
        return None

    models.Queue.lambda_event_source_mappings = property(_get, _set)  # type: ignore[assignment]


_JAVA_DATE = (("yyyy", "%Y"), ("MM", "%m"), ("dd", "%d"), ("HH", "%H"), ("mm", "%M"), ("ss", "%S"))


def _render_firehose_timestamp_prefixes() -> None:
    """Firehose evaluates ``!{timestamp:yyyy/MM/dd/HH}`` in an S3 prefix and then adds no date
    folder of its own; moto keeps the expression as text and appends ``YYYY/MM/DD/HH/``. Objects
    land where AWS puts them (``archive/2026/01/31/12/...``), so that a replay lists the hours of
    its range locally as on AWS (docs/replay.md)."""
    import re

    from moto.core.utils import utcnow
    from moto.firehose import models
    from moto.moto_api._internal import mock_random

    expression = re.compile(r"!\{timestamp:([^}]*)\}")

    def strftime(java: str, now: Any) -> str:
        for token, directive in _JAVA_DATE:
            java = java.replace(token, directive)
        return str(now.strftime(java))

    def _format_s3_object_path(delivery_stream_name: str, version_id: str, prefix: str) -> str:
        now = utcnow()
        if expression.search(prefix):
            folder = expression.sub(lambda m: strftime(m.group(1), now), prefix)
        else:
            folder = f"{prefix}{'' if prefix.endswith('/') or not prefix else '/'}"
            folder += now.strftime("%Y/%m/%d/%H/")
        return (
            f"{folder}{delivery_stream_name}-{version_id}-"
            f"{now.strftime('%Y-%m-%d-%H-%M-%S')}-{mock_random.uuid4()}"
        )

    models.FirehoseBackend._format_s3_object_path = staticmethod(  # type: ignore[method-assign]
        _format_s3_object_path
    )


def _read_retention_directly() -> None:
    """moto checks each message it hands out against the queue's retention period by computing
    every attribute of the queue, three of which walk all its messages: a receive from a queue
    holding N messages (retries waiting out their backoff) cost O(10 N) clock reads, and a queue
    of a thousand such messages kept the endpoint's CPU busy. The same check, reading the one
    attribute it needs."""
    from moto.core.utils import unix_time
    from moto.sqs import models

    def is_message_valid_based_on_retention_period(
        self: Any, queue_name: str, message: Any
    ) -> bool:
        retention = int(self.get_queue(queue_name).message_retention_period)
        return bool(retention + message.sent_timestamp / 1000 > unix_time())

    models.SQSBackend.is_message_valid_based_on_retention_period = (  # type: ignore[method-assign]
        is_message_valid_based_on_retention_period
    )


def _compute_queue_attributes_on_demand() -> None:
    """moto builds every attribute of a queue whenever one is read, three of them by walking all
    its messages, and every SendMessage reads one (``ContentBasedDeduplication``, which a standard
    queue does not even have): a send to a queue holding N messages cost O(N), so a burst made
    the endpoint quadratic. The attributes become a mapping that computes only what is read,
    with the same keys and values as moto's dict."""
    from moto.core.utils import camelcase_to_underscores
    from moto.sqs import models

    build_all = vars(models.Queue)["attributes"].fget
    assert build_all is not None

    class QueueAttributes(Mapping[str, Any]):
        def __init__(self, queue: Any) -> None:
            self._queue = queue

        def _names(self) -> list[str]:
            q = self._queue
            names = list(q.BASE_ATTRIBUTES)
            if q.fifo_queue:
                names += q.FIFO_ATTRIBUTES
            if q.kms_master_key_id:
                names += q.KMS_ATTRIBUTES
            return names

        def __iter__(self) -> Iterator[str]:
            return iter(self._names())

        def __len__(self) -> int:
            return len(self._names())

        def __getitem__(self, name: str) -> Any:
            if name not in self._names():
                raise KeyError(name)
            q = self._queue
            if name == "RedrivePolicy" and q.redrive_policy:
                return json.dumps(q.redrive_policy)
            value = getattr(q, camelcase_to_underscores(name))
            return str(value).lower() if isinstance(value, bool) else value

    models.Queue.attributes = property(QueueAttributes)  # type: ignore[assignment,method-assign]
    models.Queue.attributes_as_moto_builds_them = property(build_all)  # type: ignore[attr-defined]


def _list_handler_methods_once() -> None:
    """moto lists the methods of a service's response class with ``inspect.getmembers`` on every
    request to find the action's handler: a twentieth of the endpoint's CPU. The classes do not
    change while it runs, so each is listed once."""
    import functools

    from moto.core import responses, utils

    listed = functools.cache(utils.method_names_from_class)
    responses.method_names_from_class = listed  # type: ignore[attr-defined]


# Bound on the remembered attribute names (one per model class, attribute and shape: a few
# thousand for every service; cleared if ever reached).
MAX_REMEMBERED_ALIASES = 65536


def _remember_attribute_aliases() -> None:
    """moto's response serializer finds each value of an answer by asking six alias providers
    which attribute names to try, for every attribute of every item: four fifths of the endpoint's
    CPU in a DynamoDB Query of 500 items, and a fifth of every SQS call. The names depend only on
    the picker, the source object's class (and its ``Meta``), the attribute and the model shape,
    so they are remembered by those."""
    from moto.core import serialize

    remembered: dict[tuple[Any, ...], tuple[str, ...]] = {}

    def remembering(cls: Any) -> None:
        compute = cls.get_possible_keys

        def get_possible_keys(self: Any, context: Any) -> tuple[str, ...]:
            obj = context.obj
            key = (
                cls, tuple(self.alias_providers), type(obj), getattr(obj, "Meta", None),
                context.key, context.shape,
            )  # fmt: skip
            try:
                return remembered[key]
            except KeyError:
                pass
            except TypeError:  # something unhashable: not remembered
                return tuple(compute(self, context))
            names = tuple(compute(self, context))
            if len(remembered) >= MAX_REMEMBERED_ALIASES:
                remembered.clear()
            remembered[key] = names
            return names

        cls.get_possible_keys = get_possible_keys

    remembering(serialize.AttributePicker)
    remembering(serialize.XFormedAttributePicker)


def _lock_deletes() -> None:
    """moto's queue appends a sent message under the queue's lock, but deletes by rebuilding its
    message list without it: two deletes at once (two batches of one queue finishing together)
    could undo one another, and a delete racing a send could drop the new message. Deletes take
    the same lock."""
    from moto.sqs import models

    delete = models.Queue.delete_message

    def delete_message(self: Any, receipt_handle: str) -> None:
        with self._messages_lock:
            delete(self, receipt_handle)

    models.Queue.delete_message = delete_message  # type: ignore[method-assign]


def _atomic_dynamodb_writes() -> None:
    """moto checks a write's condition and then writes, with nothing held in between: two
    conditional puts of one item at once (two ingress threads claiming one event's key,
    docs/dedup.md) could both succeed. And a transaction deep-copies every table it names to roll
    back a failure by restoring that copy, which undoes whatever another thread wrote meanwhile,
    at a cost that grows with the table. Here every write takes one lock, and a transaction of
    Puts, Deletes and ConditionChecks checks every condition first and writes only if all hold
    (DynamoDB's all-or-nothing), with moto's answers: CancellationReasons in item order."""
    import threading

    from moto.dynamodb.comparisons import get_filter_expression
    from moto.dynamodb.exceptions import (
        MultipleTransactionsException,
        TransactionCanceledException,
    )
    from moto.dynamodb.models import DynamoDBBackend

    lock = threading.RLock()

    def locked(name: str) -> None:
        write = getattr(DynamoDBBackend, name)

        def method(self: Any, *args: Any, **kwargs: Any) -> Any:
            with lock:
                return write(self, *args, **kwargs)

        setattr(DynamoDBBackend, name, method)

    for name in ("put_item", "delete_item", "update_item"):
        locked(name)
    transact = DynamoDBBackend.transact_write_items

    def transact_write_items(self: Any, transact_items: list[dict[str, Any]]) -> None:
        with lock:
            ops = [next(iter(item.items())) for item in transact_items if len(item) == 1]
            simple = {"Put", "Delete", "ConditionCheck"}
            if len(ops) != len(transact_items) or any(kind not in simple for kind, _ in ops):
                return transact(self, transact_items)  # an Update, or an invalid request
            if len(ops) > 100:
                return transact(self, transact_items)  # moto's own refusal
            seen: set[tuple[str, str]] = set()
            errors: list[tuple[Any, Any, Any]] = []
            for kind, op in ops:
                table = self.get_table(op["TableName"])
                if kind == "Put":
                    names = [table.hash_key_attr, table.range_key_attr]
                    key = {n: op["Item"][n] for n in names if n is not None}
                else:
                    key = op["Key"]
                ident = (op["TableName"], str(sorted(key.items())))
                if ident in seen:
                    raise MultipleTransactionsException()
                seen.add(ident)
                condition = op.get("ConditionExpression")
                holds = condition is None or get_filter_expression(
                    condition,
                    op.get("ExpressionAttributeNames"),
                    op.get("ExpressionAttributeValues"),
                ).expr(self.get_item(op["TableName"], key))
                failed = ("ConditionalCheckFailed", "The conditional request failed", None)
                errors.append((None, None, None) if holds else failed)
            if any(code is not None for code, _, _ in errors):
                raise TransactionCanceledException(errors)
            for kind, op in ops:
                if kind == "Put":
                    self.put_item(op["TableName"], op["Item"])
                elif kind == "Delete":
                    self.delete_item(op["TableName"], op["Key"])
            return None

    DynamoDBBackend.transact_write_items = transact_write_items  # type: ignore[method-assign]


def _remember_backends_by_host() -> None:
    """moto finds the service of every request by listing its own package directory and trying
    each service's URL patterns in turn: a quarter of the endpoint's CPU under load. The answer
    depends only on the host name it infers (``sqs.us-east-1.amazonaws.com``...): remembered."""
    from moto.moto_server import werkzeug_app

    app_class = werkzeug_app.DomainDispatcherApplication
    find = app_class.get_backend_for_host

    def get_backend_for_host(self: Any, host: str | None) -> Any:
        if host is None:
            return None
        known: dict[str, Any] = self.__dict__.setdefault("_backend_by_host", {})
        if host not in known:
            backend = find(self, host)
            if len(known) >= 1024 or backend is None:  # a bounded cache of real answers
                return backend
            known[host] = backend
        return known[host]

    app_class.get_backend_for_host = get_backend_for_host  # type: ignore[method-assign]


# How long a long poll on an empty queue sleeps between checks (moto: 1 s, whatever the queue).
IDLE_QUEUE_WAIT_SECONDS = 5


def _quiet_idle_long_polls() -> None:
    """moto's long poll wakes every second to look for messages whose visibility ran out. A queue
    with no message at all has none to wait for (a send wakes the poll at once), so there it
    sleeps longer: 1,000 idle queues (500 triggers) woke the endpoint 1,000 times a second. A poll
    may end up to that much after its WaitTimeSeconds (clients read for 30 s)."""
    from moto.sqs import models

    def wait_for_messages(self: Any, timeout: int) -> None:
        with self._messages_lock:
            if not self._messages:
                timeout = max(timeout, IDLE_QUEUE_WAIT_SECONDS)
            self._messages_lock.wait_for(lambda: self.messages, timeout=timeout)

    models.Queue.wait_for_messages = wait_for_messages  # type: ignore[method-assign]


def _decode_json_bodies_with_msgspec() -> None:
    """moto reads the body of every JSON-protocol request (SQS, DynamoDB, ...) with the standard
    library's ``json.loads``: two fifths of the endpoint's CPU in a SendMessageBatch of ten 50 KiB
    messages, whose 550 KB of JSON-in-JSON escape every quote. msgspec's decoder (the broker's
    own, chalicelib/core/cloudevents/json_format.py) reads it in a third of the time. Where msgspec
    returns a value, it is the value ``json.loads`` returns (same types, same floats, same last-wins
    duplicate keys); what it refuses (``NaN``, lone surrogates, numbers outside a float, integers
    past Python's 4,300 digits, invalid JSON, nesting past its limit) goes to moto's own reading,
    which returns its value or its error as before. One difference: msgspec's nesting limit is one
    level deeper than ``json.loads``'s on Python 3.12, so a body nested exactly 1,498 deep is read
    where moto would answer 500 (RecursionError); no AWS request nests past a few levels."""
    import msgspec
    from moto.core import parse

    decode = msgspec.json.decode
    read: Any = parse.BaseJSONParser._parse_body_as_json

    def _parse_body_as_json(self: Any, body_contents: Any) -> Any:
        if body_contents and isinstance(body_contents, bytes | str):
            try:
                text = (
                    body_contents
                    if isinstance(body_contents, str)
                    else body_contents.decode(self.DEFAULT_ENCODING)
                )
                return decode(text)
            except (UnicodeError, msgspec.MsgspecError, RecursionError):
                pass  # moto's reading decides, as if this had not been tried
        return read(self, body_contents)

    parse.BaseJSONParser._parse_body_as_json = _parse_body_as_json  # type: ignore[method-assign]


def _skip_query_string_parsing_of_plain_bodies() -> None:
    """moto reads every request body as a query string too (``parse_qsl``), JSON ones included:
    a body with no ``&``, ``=``, ``+`` or ``%`` is one field named by the whole body with an empty
    value, but ``parse_qsl`` finds that out by splitting it twice, a sixth of a millisecond per
    550 KB SendMessageBatch. Such a body gets that one field at once; any other goes to
    ``parse_qsl``."""
    from urllib.parse import parse_qsl as parse

    from moto.core import responses

    def parse_qsl(qs: Any, keep_blank_values: bool = False, *args: Any, **kwargs: Any) -> Any:
        if (
            keep_blank_values and not args and not kwargs and type(qs) is str and qs
            and "&" not in qs and "=" not in qs and "+" not in qs and "%" not in qs
        ):  # fmt: skip
            return [(qs, "")]
        return parse(qs, keep_blank_values, *args, **kwargs)

    responses.parse_qsl = parse_qsl  # type: ignore[attr-defined]


def _look_for_request_ids_only_where_there_is_one() -> None:
    """moto writes its request id into an XML answer's ``<RequestId>`` element with a regular
    expression run over every answer, JSON ones and a ReceiveMessage of ten 50 KiB messages
    included: a sixth of such a receive's CPU. Without the text ``<RequestId>`` the expression
    cannot match and the answer leaves unchanged, so there moto's enrichment runs on the headers
    alone."""
    from moto.core import responses

    enrich = responses.BaseResponse._enrich_response

    def _enrich_response(headers: dict[str, str], body: Any) -> tuple[dict[str, str], Any]:
        if isinstance(body, str) and "<RequestId>" not in body:
            headers, _ = enrich(headers, "")
            return headers, body
        return enrich(headers, body)

    responses.BaseResponse._enrich_response = staticmethod(_enrich_response)  # type: ignore[method-assign]


def _remember_message_digests() -> None:
    """moto computes a message's MD5 (``MD5OfBody``) whenever it is read: at the send and again
    at every receive, 0.7 ms for a receive of ten 50 KiB messages. A message's body does not
    change, so its digest is remembered with the body it was computed from and computed again
    only if the body is another object."""
    from moto.sqs import models

    compute = vars(models.Message)["body_md5"].fget
    assert compute is not None

    def body_md5(self: Any) -> str:
        body = self.body
        remembered = self.__dict__.get("_remembered_body_md5")
        if remembered is not None and remembered[0] is body:
            return str(remembered[1])
        digest = compute(self)
        self.__dict__["_remembered_body_md5"] = (body, digest)
        return str(digest)

    models.Message.body_md5 = property(body_md5)  # type: ignore[assignment,method-assign]


def _read_the_clock_once_per_queue_scan() -> None:
    """moto lists a queue's receivable messages by asking each message whether it is visible and
    whether it is delayed, and each question reads the clock (two datetimes each): a receive from
    a queue holding N messages made 4 N datetimes, half a receive's CPU with 2,000 messages in
    flight. The same two comparisons, against one reading of the clock per scan: the answer moto
    gives at that instant."""
    from moto.core.utils import unix_time_millis
    from moto.sqs import models

    def messages(self: Any) -> list[Any]:
        now = unix_time_millis()
        return [m for m in self._messages if now > m.visible_at and not now < m.delayed_until]

    models.Queue.messages = property(messages)  # type: ignore[assignment,method-assign]


def _skip_flask_debug_form_helper() -> None:
    """moto runs its Flask apps in debug mode, where Flask, for every request that is not a form
    upload, builds a new class to give ``request.files`` a friendlier error for browser forms
    missing their enctype. moto reads ``request.files[...]`` only when it holds files, where no
    class is built: the request reads its form data as werkzeug's (Flask's parent) does."""
    from moto.moto_server.werkzeug_app import BackendRequest
    from werkzeug.wrappers import Request as WerkzeugRequest

    BackendRequest._load_form_data = WerkzeugRequest._load_form_data  # type: ignore[method-assign]


def _pick_member_values_directly() -> None:
    """moto's serializer finds every member of every structure of an answer by building a context
    (with the member's dotted path, joined anew) for its attribute picker, which tries each
    possible name with a lookup that raises and catches ``KeyError`` for every name a dict lacks:
    a DynamoDB AttributeValue has ten members and one value, so a Query of ten items of five
    attributes made 500 contexts and 900 exceptions, half of the call's CPU. For moto's own
    pickers without response transformers (SQS, DynamoDB, S3: the path is read by nothing else),
    the picker's steps are taken as they are: the same names in the same order (remembered by
    picker, source class and ``Meta``, member and shape, as in ``_remember_attribute_aliases``),
    the first one present wins, else None; a plain dict is asked with ``dict.get``, which finds
    what ``obj[name]`` finds. Any other picker gets moto's own call."""
    from moto.core import serialize, utils
    from moto.core.constants import MISSING

    moto_get_value = serialize.ResponseSerializer.get_value
    dotted = utils.get_value  # a name with a dot walks a path: moto's own lookup
    pickers = (serialize.AttributePicker, serialize.XFormedAttributePicker)
    remembered: dict[tuple[Any, ...], tuple[str, ...]] = {}

    def names_of(self: Any, picker: Any, value: Any, key: str, shape: Any) -> tuple[str, ...]:
        ident = (
            type(picker), tuple(picker.alias_providers), type(value),
            getattr(value, "Meta", None), key, shape,
        )  # fmt: skip
        try:
            return remembered[ident]
        except KeyError:
            pass
        context = serialize.AttributePickerContext(
            obj=value, key=key, shape=shape, operation_model=self.operation_model,
            service_model=self.operation_model.service_model, key_path=".".join(self.path),
        )  # fmt: skip
        names = tuple(picker.get_possible_keys(context))
        if len(remembered) >= MAX_REMEMBERED_ALIASES:
            remembered.clear()
        remembered[ident] = names
        return names

    def get_value(self: Any, value: Any, key: str, shape: Any) -> Any:
        picker = self._value_picker
        if type(picker) not in pickers or picker.response_transformers:
            return moto_get_value(self, value, key, shape)
        try:
            names = names_of(self, picker, value, key, shape)
        except TypeError:  # something unhashable: moto's own way
            return moto_get_value(self, value, key, shape)
        plain = type(value) is dict
        for name in names:
            if plain and "." not in name:
                found = value.get(name, MISSING)
            else:
                found = dotted(value, name, MISSING)
            if found is not MISSING:
                return found
        return None

    serialize.ResponseSerializer.get_value = get_value  # type: ignore[method-assign]


# How much of a SendMessageBatch request body the fast path reads (SQS refuses a batch over
# 1 MiB of bodies; a larger request is left to moto's own path).
MAX_DIRECT_BATCH_BYTES = 4 * 1024 * 1024


def _send_message_batches_directly() -> None:
    """moto answers a SendMessageBatch through its whole generic stack: Flask's request context
    and routing, ``BaseResponse.setup_class`` (headers, the body read in 64 KiB pieces, and read
    again as a query string), its request parser walking the input shape, and its response
    serializer walking the output shape member by member: two thirds of the endpoint's CPU in a
    batch of ten 50 KiB messages, where the rest is reading the JSON and the messages' MD5s.
    Here such a request (POST ``/``, AWS JSON 1.0, no query string, gzip, ``Origin`` or ``&``
    in its body, moto's auth, recorder and pretty-printing off) is answered directly: its body
    decoded by msgspec and taken apart as moto's parser does for well-typed members (strings as
    strings, DelaySeconds an integer; message attributes by moto's parser itself), moto's own
    region, account and IAM visit, moto's own ``SQSResponse.send_message_batch`` (the backend's
    checks, sends and failure entries unchanged), and the answer written as moto's serializer
    writes it: the output shape's members in order, absent ones left out, by ``json.dumps``,
    with moto's and Flask's headers in their order and moto's request id. Anything else, and any
    request its checks refuse (an invalid or duplicate Id, a batch too long, a missing queue...),
    goes to moto's own path with the body it read, before anything was sent: the checks raise
    before the first send, and what could raise after one (a message attribute's MD5, a body
    not text) is tried first. A refused request's account visit is recorded twice (IAM's
    last-used time of the access key, taken again a moment later)."""
    import io
    from enum import Enum

    import msgspec
    from moto import settings
    from moto.core.authorization import ActionAuthenticatorMixin
    from moto.core.parse import JSONParser
    from moto.core.utils import get_service_model
    from moto.iam.models import mark_account_as_visited
    from moto.moto_api import recorder
    from moto.moto_server import werkzeug_app
    from moto.sqs import models
    from moto.sqs.responses import SQSResponse
    from moto.utilities.aws_headers import gen_amzn_requestid_long

    service = get_service_model("sqs")
    operation = service.operation_model("SendMessageBatch")
    map_type = SQSResponse.PROTOCOL_PARSER_MAP_TYPE
    if service.metadata.get("jsonVersion") != "1.0" or map_type is not dict:
        return  # not the moto this was written against: its own path for everything
    request_shape, result_shape = operation.input_shape, operation.output_shape
    entry_shape = request_shape.members["Entries"].member
    plain = {"string": str, "integer": int}  # taken as they come when of this type

    def named(shape: Any) -> list[tuple[str, str, Any]]:
        return [(n, m.serialization.get("name", n), m) for n, m in shape.members.items()]

    entry_members = [(n, j, m, plain.get(m.type_name)) for n, j, m in named(entry_shape)]
    answer_lists: list[tuple[str, list[tuple[str, str]]]] = []
    for name, json_name, member in named(result_shape):
        if json_name != name or member.type_name != "list":
            return
        fields = named(member.member)
        if any(n != j or m.type_name not in ("string", "boolean") for n, j, m in fields):
            return  # the answer holds what this writer does not write as moto does
        answer_lists.append((name, [(n, m.type_name) for n, _, m in fields]))
    if [n for n, _, _ in named(request_shape)] != ["QueueUrl", "Entries"]:
        return

    call = werkzeug_app.DomainDispatcherApplication.__call__
    target = f"{service.metadata['targetPrefix']}.SendMessageBatch"
    content_type = "application/x-amz-json-1.0"
    declined = ("HTTP_ORIGIN", "HTTP_CONTENT_ENCODING", "HTTP_TRANSFER_ENCODING")

    def parse(decoded: Any, parser: Any) -> dict[str, Any] | None:
        """moto's parser's value for a well-typed body, else None (moto's path reads it)."""
        if type(decoded) is not dict:
            return None
        queue_url, entries = decoded.get("QueueUrl"), decoded.get("Entries")
        if type(queue_url) is not str or type(entries) is not list:
            return None
        parsed_entries = []
        for entry in entries:
            if type(entry) is not dict:
                return None
            parsed: dict[str, Any] = {}
            for name, json_name, shape, wanted in entry_members:
                value = entry.get(json_name)
                if value is None:
                    continue
                if wanted is None:  # message attributes: moto's parser
                    parsed[name] = parser._parse_shape(shape, value)
                elif type(value) is wanted:
                    parsed[name] = value
                else:
                    return None  # moto would convert it (or fail): its own path
            parsed_entries.append(parsed)
        return {"QueueUrl": queue_url, "Entries": parsed_entries}

    def string(value: Any) -> Any:  # moto's JSON serializer's strings
        if isinstance(value, Enum):
            value = value.value
        return str(value) if value not in [None, {}, []] else value

    def answer_body(result: Any) -> str:
        written: dict[str, Any] = {}
        for name, fields in answer_lists:
            items = result.get(name)
            if items is None:
                continue
            written[name] = [
                {f: (string(v) if kind == "string" else v) for f, kind in fields
                 if (v := item.get(f)) is not None}
                for item in items
            ]  # fmt: skip
        return json.dumps(written)

    def read(environ: dict[str, Any]) -> bytes | None:
        length = environ.get("CONTENT_LENGTH") or ""
        if not length.isdigit() or int(length) > MAX_DIRECT_BATCH_BYTES:
            return None
        size, stream, parts, got = int(length), environ["wsgi.input"], [], 0
        while got < size:
            part = stream.read(size - got)
            if not part:
                break
            parts.append(part)
            got += len(part)
        body = parts[0] if len(parts) == 1 else b"".join(parts)
        environ["wsgi.input"] = io.BytesIO(body)  # for moto's path, if it answers
        return body if got == size else None

    def send(app: Any, environ: dict[str, Any]) -> tuple[list[tuple[str, str]], bytes] | None:
        if (
            environ.get("REQUEST_METHOD") != "POST" or environ.get("PATH_INFO") != "/"
            or environ.get("CONTENT_TYPE") != content_type or environ.get("QUERY_STRING")
            or environ.get("RAW_URI", "/") != "/" or "HTTP_HOST" not in environ
            or any(name in environ for name in declined) or settings.PRETTIFY_RESPONSES
            or getattr(werkzeug_app, "DISABLE_GLOBAL_CORS", True) or recorder._user_enabled
            or ActionAuthenticatorMixin.request_count >= settings.INITIAL_NO_AUTH_ACTION_COUNT
        ):  # fmt: skip
            return None
        if getattr(app.get_application(environ), "service", None) != "sqs":
            return None
        body = read(environ)
        if body is None or b"&" in body:
            return None  # moto would read fields (an Action...) out of it as a query string
        try:
            parsed = parse(msgspec.json.decode(body), JSONParser(operation))
        except Exception:  # not JSON, or what moto's parser refuses: its path answers
            return None
        if parsed is None:
            return None
        for entry in parsed["Entries"]:
            if entry.get("MessageAttributes"):  # moto computes it after sending: tried first
                probe = models.Message("", "")
                probe.message_attributes = entry["MessageAttributes"]
                try:
                    probe.attribute_md5  # noqa: B018
                except Exception:
                    return None
        request = werkzeug_app.BackendRequest(environ, populate_request=False)
        response = SQSResponse()
        response.headers = request.headers
        response.querystring = {}  # the body's one field, read only for an AWSAccessKeyId
        response.path = "/"
        response.uri_match = {}
        response.params = parsed
        response.region = response.get_region_from_url(request, request.raw_url)
        response.access_key = response.get_access_key()
        response.current_account = response.get_current_account()
        mark_account_as_visited(
            account_id=response.current_account, access_key=response.access_key,
            service="sqs", region=response.region,
        )  # fmt: skip
        try:
            result = response.send_message_batch().result
        except Exception:  # refused before anything was sent: moto's path writes the error
            return None
        ActionAuthenticatorMixin.request_count += 1
        text = answer_body(result).encode()
        request_id = gen_amzn_requestid_long()
        headers = [
            ("Content-Type", content_type), ("server", "amazon.com"),
            ("x-amzn-requestid", request_id), ("Content-Length", str(len(text))),
            ("Access-Control-Allow-Origin", "*"),
        ]  # fmt: skip
        return headers, text

    def __call__(self: Any, environ: dict[str, Any], start_response: Any) -> Any:
        if environ.get("HTTP_X_AMZ_TARGET") == target:
            answered = send(self, environ)
            if answered is not None:
                start_response("200 OK", answered[0])
                return [answered[1]]
        return call(self, environ, start_response)

    werkzeug_app.DomainDispatcherApplication.__call__ = __call__  # type: ignore[method-assign]


def _draw_random_characters_directly() -> None:
    """moto draws each character of its random strings with ``Random.choice``: three Python
    calls, then ``getrandbits``, per character. A ReceiveMessage of ten messages draws 1,850
    (a 185-letter receipt handle each), a fifth of its CPU, and every answer's request id 52.
    The same draws, made in one loop: ``getrandbits`` of the pool's bit length until a value
    falls inside the pool, as ``Random._randbelow`` does, so the same generator state gives the
    same strings (moto's seeded ids included) and leaves the same state behind."""
    import random
    import string

    from moto.moto_api._internal import mock_random as singleton
    from moto.moto_api._internal import moto_random
    from moto.sqs import models, utils

    if (
        moto_random.MotoRandom._randbelow is not random.Random._randbelow_with_getrandbits  # type: ignore[attr-defined]
        or moto_random.MotoRandom.choice is not random.Random.choice
    ):
        return  # moto draws another way: its own

    def draw(source: Any, pool: Any, length: int) -> list[Any]:
        n = len(pool)
        if not n:
            raise IndexError("Cannot choose from an empty sequence")
        k, getrandbits, drawn = n.bit_length(), source.getrandbits, []
        for _ in range(length):
            r = getrandbits(k)
            while r >= n:
                r = getrandbits(k)
            drawn.append(pool[r])
        return drawn

    def choice(self: Any, seq: Any) -> Any:
        return draw(self, seq, 1)[0]

    def get_random_string(
        self: Any, length: int = 20, include_digits: bool = True, lower_case: bool = False
    ) -> str:
        pool = string.ascii_letters + (string.digits if include_digits else "")
        text = "".join(draw(self, pool, length))
        return text.lower() if lower_case else text

    def generate_receipt_handle() -> str:
        return "".join(draw(singleton, string.ascii_lowercase, 185))

    moto_random.MotoRandom.choice = choice  # type: ignore[method-assign]
    moto_random.MotoRandom.get_random_string = get_random_string  # type: ignore[method-assign]
    utils.generate_receipt_handle = generate_receipt_handle
    models.generate_receipt_handle = generate_receipt_handle  # type: ignore[attr-defined]


def _keep_alive_handler() -> type:
    """moto's request handler, serving HTTP/1.1 keep-alive: werkzeug's development server sends
    ``Connection: close`` on every answer because a request body the application did not read
    would be taken for the next request. Here every request's body is read to its end after the
    answer, so the connection stays usable; a chunked request still closes its connection."""
    from moto.moto_server.werkzeug_app import MotoRequestHandler
    from werkzeug.wsgi import LimitedStream

    class _NothingLeft:
        """Stands in for the socket while werkzeug "discards what is left" after an answer, which
        would otherwise swallow the next request on a kept-alive connection."""

        @staticmethod
        def read(size: int = -1) -> bytes:
            return b""

    class KeepAliveHandler(MotoRequestHandler):
        protocol_version = "HTTP/1.1"
        timeout = 300  # an idle kept-alive connection holds a thread: let it go after 5 min
        _body: Any = None

        def setup(self) -> None:
            super().setup()
            # Headers and body leave in separate writes: without this, Nagle's algorithm holds
            # the body until the client's delayed ACK (~40 ms per call on a kept connection).
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

        def make_environ(self) -> dict[str, Any]:
            environ: dict[str, Any] = super().make_environ()
            if self._body is not None:
                environ["wsgi.input"] = self._body
            return environ

        def send_header(self, keyword: str, value: str) -> None:
            if keyword.lower() == "connection" and value == "close" and self._body is not None:
                return  # the body is read to its end below: the connection carries the next one
            super().send_header(keyword, value)

        def run_wsgi(self) -> None:
            if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                self._body = None  # werkzeug's own handling, which closes the connection
                super().run_wsgi()
                return
            real: Any = self.rfile
            self._body = LimitedStream(real, int(self.headers.get("Content-Length") or 0))
            self.rfile = _NothingLeft()  # type: ignore[assignment]
            try:
                super().run_wsgi()
            finally:
                self.rfile = real
            self._body.exhaust()

        def log_request(self, *args: Any, **kwargs: Any) -> None:
            return None

    return KeepAliveHandler


def serve(host: str, port: int) -> None:
    """Run the moto server in this process until it is killed or its parent exits."""
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app
    from werkzeug.serving import make_server

    from brokerctl.kafka_local import allow_kafka_mappings_in_moto

    _disable_moto_lambda_invocation()
    _render_firehose_timestamp_prefixes()
    _read_retention_directly()
    _lock_deletes()
    _compute_queue_attributes_on_demand()
    _list_handler_methods_once()
    _remember_attribute_aliases()
    _quiet_idle_long_polls()
    _remember_backends_by_host()
    _atomic_dynamodb_writes()
    _decode_json_bodies_with_msgspec()
    _skip_query_string_parsing_of_plain_bodies()
    _look_for_request_ids_only_where_there_is_one()
    _remember_message_digests()
    _read_the_clock_once_per_queue_scan()
    _skip_flask_debug_form_helper()
    _pick_member_values_directly()
    _send_message_batches_directly()
    _draw_random_characters_directly()
    allow_kafka_mappings_in_moto()
    app = DomainDispatcherApplication(create_backend_app)
    server = make_server(host, port, app, threaded=True, request_handler=_keep_alive_handler())
    parent = os.getppid()

    def orphaned() -> None:  # exit with the broker that started us, however it ended
        while os.getppid() == parent:
            time.sleep(1.0)
        os._exit(0)

    threading.Thread(target=orphaned, name="parent-watch", daemon=True).start()
    print(f"{READY_LINE} on http://{host}:{port}", flush=True)
    server.serve_forever()


class EmbeddedAws:
    """Starts and stops the moto server process on ``host:port``."""

    def __init__(self, host: str = "127.0.0.1", port: int = 4566, start_timeout: float = 60.0):
        self.host = host
        self.port = port
        self._timeout = start_timeout
        self._process: subprocess.Popen[str] | None = None
        self._pump: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self) -> str:
        if not port_is_free(self.host, self.port):
            raise OSError(
                f"port {self.port} on {self.host} is in use: set BROKER_AWS_PORT or --aws-port, "
                "or point AWS_ENDPOINT_URL at the emulator already running there"
            )
        self._process = subprocess.Popen(
            [sys.executable, "-m", "brokerctl.embedded_aws", "--host", self.host,
             "--port", str(self.port)],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )  # fmt: skip
        output: list[str] = []

        stdout = self._process.stdout
        assert stdout is not None

        def pump() -> None:  # read its output so it never blocks on a full pipe
            with stdout:
                for line in stdout:
                    if len(output) < 200:
                        output.append(line.rstrip("\n"))

        self._pump = threading.Thread(target=pump, name="moto-output", daemon=True)
        self._pump.start()
        deadline = time.monotonic() + self._timeout
        while not _answers(self.host, self.port):
            if self._process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise OSError("the embedded AWS endpoint did not start:\n" + "\n".join(output))
            time.sleep(0.05)
        return self.url

    def stop(self) -> None:
        process, self._process = self._process, None
        if process is None:
            return
        end_process(process)
        if self._pump is not None:
            self._pump.join(timeout=5)  # it closes the pipe at its end


def _answers(host: str, port: int) -> bool:
    with contextlib.suppress(OSError), socket.create_connection((host, port), timeout=0.5):
        return True
    return False


def port_is_free(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=4566)
    args = parser.parse_args(argv)
    serve(args.host, args.port)
    return 0


if __name__ == "__main__":
    sys.exit(main())
