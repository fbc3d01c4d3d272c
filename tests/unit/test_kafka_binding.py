"""Kafka binding (shared/specs/cloudevents-kafka-binding.md): both examples, modes, key mapping."""

from __future__ import annotations

import json

import pytest

from chalicelib.core.cloudevents.codec import Limits
from chalicelib.core.cloudevents.event import CloudEvent
from chalicelib.core.cloudevents.kafka_binding import (
    KafkaRecord,
    decode_record,
    encode_binary_record,
    encode_structured_record,
)
from chalicelib.core.errors import PayloadTooLargeError, ValidationError

# §3.2.5, with the header values as plain text (the quotes in the text are notation).
BINARY_EXAMPLE = KafkaRecord(
    key=b"mykey",
    value=b"\x00\x01avro-bytes",
    headers=(
        ("ce_specversion", b"1.0"),
        ("ce_type", b"com.example.someevent"),
        ("ce_source", b"/mycontext/subcontext"),
        ("ce_id", b"1234-1234-1234"),
        ("ce_time", b"2018-04-05T03:56:24Z"),
        ("content-type", b"application/avro"),
    ),
)
# §3.3.4, with "... application data encoded in XML ..." as an XML string.
STRUCTURED_EXAMPLE = KafkaRecord(
    key=b"mykey",
    value=json.dumps(
        {
            "specversion": "1.0",
            "type": "com.example.someevent",
            "source": "/mycontext/subcontext",
            "id": "1234-1234-1234",
            "time": "2018-04-05T03:56:24Z",
            "datacontenttype": "application/xml",
            "data": '<much wow="xml"/>',
        }
    ).encode(),
    headers=(("content-type", b"application/cloudevents+json; charset=UTF-8"),),
)


def test_binary_example() -> None:
    event = decode_record(BINARY_EXAMPLE)
    assert event.attributes["datacontenttype"] == "application/avro"
    assert event.data == b"\x00\x01avro-bytes"
    assert encode_binary_record(event).headers == BINARY_EXAMPLE.headers
    assert encode_binary_record(event).key is None  # no partitionkey: the key mapper adds none


def test_structured_example() -> None:
    event = decode_record(STRUCTURED_EXAMPLE)
    assert event.data == b'<much wow="xml"/>'
    assert event.id == "1234-1234-1234"
    record = encode_structured_record(event)
    assert record.headers == (("content-type", b"application/cloudevents+json; charset=UTF-8"),)
    assert decode_record(record) == event


def test_no_data_is_a_record_without_value_and_structured_keeps_a_value() -> None:
    event = CloudEvent({"specversion": "1.0", "id": "1", "source": "/s", "type": "t"})
    assert encode_binary_record(event).value is None  # a tombstone in compacted topics
    assert decode_record(encode_binary_record(event)) == event
    assert encode_structured_record(event).value is not None


def test_key_mapper_copies_partitionkey_and_keeps_the_attribute() -> None:
    event = CloudEvent(
        {"specversion": "1.0", "id": "1", "source": "/s", "type": "t", "partitionkey": "p-1"}
    )
    for encode in (encode_binary_record, encode_structured_record):
        record = encode(event)
        assert record.key == b"p-1"
        assert decode_record(record).attributes["partitionkey"] == "p-1"
        assert encode(event, key_from_partitionkey=False).key is None


def test_json_data_in_binary_mode_makes_content_type_explicit() -> None:
    event = CloudEvent(
        {"specversion": "1.0", "id": "1", "source": "/s", "type": "t"}, json_data={"a": 1}
    )
    record = encode_binary_record(event)
    assert ("content-type", b"application/json") in record.headers
    assert json.loads(record.value or b"") == {"a": 1}


@pytest.mark.parametrize(
    ("headers", "value", "fields"),
    [
        ((("ce_id", b"1"),), b"x", ["ce_specversion", "ce_source", "ce_type"]),
        ((*BINARY_EXAMPLE.headers, ("ce_id", b"2")), b"x", ["ce_id"]),
        ((*BINARY_EXAMPLE.headers, ("ce_subject", b"\xff")), b"x", ["ce_subject"]),
        (
            (*BINARY_EXAMPLE.headers, ("ce_datacontenttype", b"text/plain")),
            b"x",
            ["ce_datacontenttype"],
        ),
        ((("content-type", b"application/cloudevents+json"),), None, ["value"]),
        ((("content-type", b"application/cloudevents+json"),), b"{", ["value"]),
        ((("content-type", b"application/cloudevents-batch+json"),), b"[]", ["content-type"]),
        (
            (("content-type", b"application/cloudevents+avro"),),
            b"x",
            ["ce_specversion", "ce_id", "ce_source", "ce_type"],
        ),
    ],
)
def test_invalid_records(
    headers: tuple[tuple[str, bytes], ...], value: bytes | None, fields: list[str]
) -> None:
    with pytest.raises(ValidationError) as err:
        decode_record(KafkaRecord(None, value, headers))
    assert [p.field for p in err.value.problems] == fields


def test_header_names_case_insensitive_no_percent_decoding_and_limits() -> None:
    headers = tuple((name.upper(), value) for name, value in BINARY_EXAMPLE.headers)
    event = decode_record(KafkaRecord(None, b"x", (*headers, ("CE_SUBJECT", b"100%20"))))
    assert event.attributes["subject"] == "100%20"  # Kafka headers are bytes: no %-encoding
    with pytest.raises(PayloadTooLargeError):
        decode_record(BINARY_EXAMPLE, limits=Limits(max_body_bytes=3))


def test_legacy_versions_need_opt_in() -> None:
    headers = (("ce_specversion", b"0.2"), ("ce_id", b"1"), ("ce_source", b"/s"), ("ce_type", b"t"))
    with pytest.raises(ValidationError):
        decode_record(KafkaRecord(None, None, headers))
    assert decode_record(KafkaRecord(None, None, headers), legacy=True).specversion == "0.2"
