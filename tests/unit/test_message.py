"""The SQS message format: round trips, size, versioning and pass-through headers."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings

from chalicelib.core.cloudevents.event import CloudEvent
from chalicelib.core.cloudevents.sqs_message import (
    MESSAGE_VERSION,
    SQS_MAX_MESSAGE_BYTES,
    ClaimCheck,
    QueuedEvent,
    decode_event_blob,
    decode_message,
    encode_event_blob,
    encode_message,
    encoded_size,
    fits_inline,
    passthrough_headers,
)
from chalicelib.core.errors import ValidationError
from tests.unit.test_codec_properties import events

EVENT = CloudEvent({"specversion": "1.0", "id": "1", "source": "/s", "type": "t"}, b"\x00\xff")


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(events(typed=True) | events(typed=True, version="0.3"))
def test_inline_round_trip(event: CloudEvent) -> None:
    q = QueuedEvent("ns", "default", "trig", event, None, {"x-request-id": "r"})
    text = encode_message(q)
    assert decode_message(text) == q
    assert encoded_size(q) == len(text.encode("utf-8"))
    assert decode_event_blob(encode_event_blob(event)) == event


def test_claim_check_round_trip_and_shape() -> None:
    q = QueuedEvent("ns", "b", "t", None, ClaimCheck("bucket", "claims/1", 5_000_000), {})
    doc = json.loads(encode_message(q))
    assert doc == {
        "v": MESSAGE_VERSION,
        "namespace": "ns",
        "broker": "b",
        "trigger": "t",
        "claim": {"bucket": "bucket", "key": "claims/1", "size": 5_000_000},
        "headers": {},
    }
    assert decode_message(encode_message(q)) == q


def test_exactly_one_of_event_and_claim() -> None:
    with pytest.raises(ValueError):
        QueuedEvent("ns", "b", "t", None, None, {})
    with pytest.raises(ValueError):
        QueuedEvent("ns", "b", "t", EVENT, ClaimCheck("b", "k", 1), {})


def test_size_decides_inline_or_claim() -> None:
    small = QueuedEvent("ns", "b", "t", EVENT, None, {})
    assert fits_inline(small)
    big_event = CloudEvent(EVENT.attributes, b"x" * SQS_MAX_MESSAGE_BYTES)
    assert not fits_inline(QueuedEvent("ns", "b", "t", big_event, None, {}))


def test_message_text_is_sqs_safe() -> None:
    event = CloudEvent(EVENT.attributes, json_data=["\ufffe", "\ud800", "é"])
    text = encode_message(QueuedEvent("ns", "b", "t", event, None, {}))
    assert text.isascii()
    assert decode_message(text).event == event


@pytest.mark.parametrize(
    "text",
    [
        "not json",
        "[]",
        json.dumps({"v": 2, "namespace": "n", "broker": "b", "trigger": "t", "claim": {}}),
        json.dumps({"v": 1, "namespace": "n", "broker": "b", "trigger": "t"}),
        json.dumps({"v": 1, "namespace": "", "broker": "b", "trigger": "t", "event": {}}),
        json.dumps(
            {"v": 1, "namespace": "n", "broker": "b", "trigger": "t", "claim": {"bucket": 1}}
        ),
        json.dumps(
            {
                "v": 1,
                "namespace": "n",
                "broker": "b",
                "trigger": "t",
                "event": {"specversion": "1.0"},
                "headers": {"a": 1},
            }
        ),
    ],
)
def test_malformed_messages(text: str) -> None:
    with pytest.raises(ValidationError):
        decode_message(text)


def test_passthrough_headers() -> None:
    headers = {
        "Knative-Hello": "world",
        "X-Request-Id": "r1",
        "X-B3-TraceId": "abc",
        "Retry-After": "5",
        "traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
        "TraceState": "k=v",
        "ce-id": "1",
        "Content-Type": "application/json",
        "Authorization": "Bearer x",
        "foo": "bar",
    }
    assert passthrough_headers(headers) == {
        "knative-hello": "world",
        "x-request-id": "r1",
        "x-b3-traceid": "abc",
        "retry-after": "5",
        "traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
        "tracestate": "k=v",
    }


def _queued(event: dict[str, object]) -> str:
    return json.dumps(
        {"v": 1, "namespace": "ns", "broker": "b", "trigger": "t", "event": event, "headers": {}}
    )


def test_queued_events_are_trusted_for_attribute_syntax_not_for_required_attributes() -> None:
    # The ingress validated the event before queueing it: syntax is not checked twice...
    odd = {"specversion": "1.0", "id": "1", "source": "/s", "type": "t", "time": "yesterday"}
    assert decode_message(_queued(odd)).event.get("time") == "yesterday"  # type: ignore[union-attr]
    # ...but an event without what every delivery needs is a poison message, named as such.
    with pytest.raises(ValidationError) as caught:
        decode_message(_queued({"specversion": "1.0", "source": "/s", "type": "t"}))
    assert [p.field for p in caught.value.problems] == ["event.id"]
    with pytest.raises(ValidationError) as caught:
        decode_message(_queued({"specversion": "9.9", "id": "1", "source": "/s", "type": "t"}))
    assert [p.field for p in caught.value.problems] == ["event.specversion"]
