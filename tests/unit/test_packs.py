"""Packs (docs/replay.md): several events of one trigger in one SQS message. Their codec, its
bounds against a hostile body, and the attributes a message sent back by delivery carries."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chalicelib.core.cloudevents import codec
from chalicelib.core.cloudevents.json_format import dumps_compact
from chalicelib.core.cloudevents.sqs_message import (
    ATTEMPTS_ATTRIBUTE,
    NOT_BEFORE_ATTRIBUTE,
    PACK_MAX_BYTES,
    PACK_MAX_EVENTS,
    SQS_MAX_BATCH_BYTES,
    SQS_MAX_MESSAGE_BYTES,
    QueuedEvent,
    attempts_made,
    decode_message,
    decode_messages,
    encode_message,
    encode_pack,
    not_before,
    pack_head,
    pack_overhead,
)
from chalicelib.core.errors import ValidationError


def _event(i: int, data: str = "hello") -> dict[str, Any]:
    return {
        "specversion": "1.0",
        "id": f"e{i}",
        "source": "/s",
        "type": "t",
        "datacontenttype": "text/plain",
        "data": data,
        "replayname": "r",
    }


def _pack(events: list[dict[str, Any]], headers: dict[str, str] | None = None) -> str:
    head = pack_head("ns", "default", "a", headers or {})
    return encode_pack(head, [dumps_compact(e) for e in events])


def test_a_pack_round_trips_in_order_with_its_trigger_and_headers() -> None:
    events = [_event(i) for i in range(3)]
    body = _pack(events, {"x-request-id": "42"})
    got, packed = decode_messages(body)
    assert packed
    assert [q.event.id for q in got if q.event] == ["e0", "e1", "e2"]
    assert {(q.namespace, q.broker, q.trigger) for q in got} == {("ns", "default", "a")}
    assert all(q.headers == {"x-request-id": "42"} and q.claim is None for q in got)
    assert [codec.to_json(q.event) for q in got if q.event] == events
    # one event of it, as a message of its own, is an ordinary single message
    single = decode_message(encode_message(got[1]))
    assert single.event is not None and codec.to_json(single.event) == events[1]


def test_a_single_message_is_read_by_both_decoders_and_a_pack_only_by_decode_messages() -> None:
    event = codec.from_json(_event(1))
    body = encode_message(QueuedEvent("ns", "default", "a", event, None, {}))
    assert decode_messages(body)[1] is False
    assert decode_messages(body)[0][0].event == decode_message(body).event
    with pytest.raises(ValidationError, match="pack"):
        decode_message(_pack([_event(1)]))


def test_encode_pack_refuses_an_empty_or_overfull_pack() -> None:
    head = pack_head("ns", "default", "a", {})
    with pytest.raises(ValueError):
        encode_pack(head, [])
    with pytest.raises(ValueError):
        encode_pack(head, [dumps_compact(_event(i)) for i in range(PACK_MAX_EVENTS + 1)])
    full = encode_pack(head, [dumps_compact(_event(i)) for i in range(PACK_MAX_EVENTS)])
    assert len(decode_messages(full)[0]) == PACK_MAX_EVENTS


def test_the_bounds_let_ten_packs_share_one_send_message_batch_call() -> None:
    # 1 MiB a call; one pack alone fits a queue made before SQS took 1 MiB (256 KiB).
    assert 10 * PACK_MAX_BYTES < SQS_MAX_BATCH_BYTES and PACK_MAX_BYTES < SQS_MAX_MESSAGE_BYTES
    head = pack_head("ns", "default", "a", {})
    texts = [dumps_compact(_event(i)) for i in range(4)]
    body = encode_pack(head, texts)
    assert len(body.encode()) == pack_overhead(head) + sum(len(t) for t in texts) + 3  # commas


def test_characters_sqs_refuses_are_escaped_and_read_back() -> None:
    events = [_event(0, "a\ufffeb\uffffc"), _event(1, "é")]
    texts = [json.dumps(e, ensure_ascii=False) for e in events]
    body = encode_pack(pack_head("ns", "default", "a", {}), texts)
    assert "\ufffe" not in body and "\uffff" not in body
    got, _ = decode_messages(body)
    assert [q.event.data for q in got if q.event] == [d.encode() for d in ("a\ufffeb\uffffc", "é")]


def _doc(**changes: Any) -> str:
    doc: dict[str, Any] = json.loads(_pack([_event(0), _event(1)]))
    for key, value in changes.items():
        if value is None:
            doc.pop(key, None)
        else:
            doc[key] = value
    return json.dumps(doc)


@pytest.mark.parametrize(
    ("body", "field"),
    [
        (_doc(pack=[_event(i) for i in range(PACK_MAX_EVENTS + 1)]), "pack"),
        (_doc(pack=[]), "pack"),
        (_doc(pack={"0": _event(0)}), "pack"),
        (_doc(pack=[_event(0), "e1"]), "pack[1]"),
        (_doc(pack=[_event(0), {**_event(1), "id": ""}]), "pack[1].id"),
        (_doc(pack=[{**_event(0), "source": 7}, _event(1)]), "pack[0].source"),
        (_doc(pack=[_event(0), None]), "pack[1]"),
        (_doc(event=_event(3)), "pack"),
        (_doc(claim={"bucket": "b", "key": "k", "size": 1}), "pack"),
        (_doc(namespace=""), "namespace"),
        (_doc(trigger=None), "trigger"),
        (_doc(headers={"a": 1}), "headers"),
        (_doc(v=2), "v"),
        (_doc(pack=[_event(0, "x" * SQS_MAX_MESSAGE_BYTES)]), "message"),
    ],
)
def test_a_hostile_pack_is_refused_whole_naming_the_problem(body: str, field: str) -> None:
    with pytest.raises(ValidationError) as caught:
        decode_messages(body)
    assert field in [p.field for p in caught.value.problems]


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=12,
)


@settings(max_examples=300, deadline=None)
@given(entries=_json, base=st.sampled_from([{}, {"v": 1}, json.loads(_pack([_event(0)]))]))
def test_any_json_under_pack_decodes_or_is_a_validation_error(entries: Any, base: Any) -> None:
    body = json.dumps({**base, "pack": entries})
    try:
        got, packed = decode_messages(body)
    except ValidationError:
        return
    assert packed and 1 <= len(got) <= PACK_MAX_EVENTS


def test_the_attributes_delivery_sends_back_are_read_from_lambdas_record_shape() -> None:
    carried = {
        ATTEMPTS_ATTRIBUTE: {"stringValue": "3", "dataType": "String"},
        NOT_BEFORE_ATTRIBUTE: {"stringValue": "1767225600", "dataType": "String"},
    }
    assert attempts_made(carried) == 3
    assert not_before(carried) == 1767225600
    assert attempts_made({}) == 0 and not_before({}) == 0


@pytest.mark.parametrize(
    "value",
    [
        {"stringValue": "-1"},
        {"stringValue": "3.5"},
        {"stringValue": ""},
        {"stringValue": "1" * 13},  # past any real count or time: refused, not parsed
        {"stringValue": "٣"},  # a digit int() would read
        {"stringValue": 3},
        {"StringValue": "3"},  # boto3's shape, not Lambda's
        "3",
        None,
    ],
)
def test_a_malformed_attribute_counts_as_absent(value: Any) -> None:
    assert attempts_made({ATTEMPTS_ATTRIBUTE: value}) == 0
