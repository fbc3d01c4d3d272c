"""Hypothesis: round trips through every mode, a fuzzer on raw input, and the optional JSON
accelerator agreeing with the stdlib path."""

from __future__ import annotations

import json
from datetime import UTC, timedelta, timezone
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chalicelib.core.cloudevents.codec import (
    BATCH_CONTENT_TYPE,
    decode_http,
    decode_response,
    encode_binary,
    encode_structured,
    from_json,
    to_json,
    validate,
)
from chalicelib.core.cloudevents.event import CloudEvent, MapValue
from chalicelib.core.cloudevents.json_format import (
    dumps_utf8,
    dumps_utf8_stdlib,
    parse_json,
    parse_json_stdlib,
    to_wire_json,
)
from chalicelib.core.cloudevents.kafka_binding import (
    KafkaRecord,
    decode_record,
    encode_binary_record,
    encode_structured_record,
)
from chalicelib.core.errors import PayloadTooLargeError, ValidationError

ROUND_TRIP = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
FUZZ = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])

CORE = {"specversion", "id", "source", "type", "time", "subject", "datacontenttype", "dataschema"}
text = st.text(st.characters(exclude_categories=("Cc", "Cs", "Cn")), min_size=1, max_size=30)
names_10 = st.from_regex(r"[a-z0-9]{1,20}", fullmatch=True).filter(
    lambda n: n not in CORE and n != "data"
)
names_03 = st.from_regex(r"[a-z][a-z0-9]{0,19}", fullmatch=True).filter(
    lambda n: n not in CORE | {"schemaurl", "datacontentencoding"} and n != "data"
)
sources = st.sampled_from(
    ["/s", "https://example.com/a?b=c", "urn:uuid:6e8bc430-9c3a", "1-555-123-4567", "//h/p"]
) | st.from_regex(r"/[A-Za-z0-9._~!$&'()*+,;=:@/-]{0,30}", fullmatch=True).filter(
    lambda s: not s.startswith("//")  # "//" starts an authority, which "//::" is not
)
zones = st.sampled_from(
    [UTC, timezone(timedelta(hours=5, minutes=30)), timezone(timedelta(hours=-8))]
)
times = (
    st.datetimes(timezones=zones)
    .map(lambda d: d.isoformat().replace("+00:00", "Z"))
    .filter(lambda t: len(t) > 19 and t[19:20] in {".", "Z", "+", "-"})
)
content_types = st.sampled_from(
    ["text/plain", "application/xml", "application/octet-stream", "text/plain; charset=utf-8"]
)
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12,
)
ints = st.integers(min_value=-(2**31), max_value=2**31 - 1)


@st.composite
def events(draw: st.DrawFn, *, typed: bool, version: str = "1.0") -> CloudEvent:
    attrs: dict[str, Any] = {
        "specversion": version,
        "id": draw(text),
        "source": draw(sources),
        "type": draw(text),
    }
    if draw(st.booleans()):
        attrs["time"] = draw(times)
    if draw(st.booleans()):
        attrs["subject"] = draw(text)
    values = st.one_of(text, ints, st.booleans()) if typed else text
    if typed and version != "1.0":
        # Map keys become header names in binary mode: HTTP tokens only.
        keys = st.from_regex(r"[a-z0-9]{1,5}", fullmatch=True)  # round trips need lower case
        values = values | st.dictionaries(keys, json_values, max_size=3).map(MapValue.of)
    names = names_10 if version == "1.0" else names_03
    attrs.update(draw(st.dictionaries(names, values, max_size=5)))
    kind = draw(st.sampled_from(["none", "bytes", "json"] if typed else ["none", "bytes"]))
    if kind == "json":
        if draw(st.booleans()):
            attrs["datacontenttype"] = draw(st.sampled_from(["application/json", "text/json"]))
        return CloudEvent(attrs, json_data=draw(json_values))
    if draw(st.booleans()):
        attrs["datacontenttype"] = draw(content_types)
    data = draw(st.binary(min_size=1, max_size=64)) if kind == "bytes" else None
    return CloudEvent(attrs, data)


@ROUND_TRIP
@given(events(typed=False))
def test_binary_round_trip(event: CloudEvent) -> None:
    assert validate(event) == []
    headers, body = encode_binary(event)
    assert all(v.isascii() and " " not in v for k, v in headers.items() if k != "content-type")
    assert decode_http(headers, body) == [event]


@ROUND_TRIP
@given(events(typed=True) | events(typed=True, version="0.3"))
def test_structured_and_json_round_trip(event: CloudEvent) -> None:
    assert validate(event) == []
    (back,) = decode_http(*encode_structured(event))
    if event.specversion == "0.3" and "datacontentencoding" not in event.attributes:
        # 0.3 has no data_base64: binary data travels as base64 "data" and says so (0.3 spec)
        back = back.replace_attributes(remove=["datacontentencoding"])
    assert back == event
    assert from_json(json.loads(json.dumps(to_json(event)))) == event


@ROUND_TRIP
@given(st.lists(events(typed=True), max_size=4))
def test_batch_round_trip(batch: list[CloudEvent]) -> None:
    body = dumps_utf8([to_wire_json(e) for e in batch])
    assert decode_http({"content-type": BATCH_CONTENT_TYPE}, body) == batch


@ROUND_TRIP
@given(events(typed=False), st.booleans())
def test_kafka_binary_round_trip(event: CloudEvent, keyed: bool) -> None:
    record = encode_binary_record(event, key_from_partitionkey=keyed)
    assert decode_record(record) == event


@ROUND_TRIP
@given(events(typed=True))
def test_kafka_structured_round_trip(event: CloudEvent) -> None:
    assert decode_record(encode_structured_record(event)) == event


header_names = (
    st.sampled_from(
        ["ce-specversion", "ce-id", "ce-source", "ce-type", "ce-time", "content-type", "CE-Id"]
    )
    | st.text(max_size=12).map(lambda s: "ce-" + s)
    | st.text(max_size=8)
)
header_values = st.sampled_from(["1.0", "0.3", "0.1", "application/cloudevents+json"]) | st.text(
    max_size=20
)
bodies = (
    st.binary(max_size=64)
    | json_values.map(lambda v: json.dumps(v).encode())
    | st.builds(
        lambda obj: json.dumps(obj).encode(),
        st.dictionaries(
            st.sampled_from(
                ["specversion", "id", "source", "type", "data", "data_base64", "time", "x", "X"]
            ),
            st.sampled_from(["1.0", "0.3", "0.2", "", "/s", "AA==", None, 5]) | json_values,
        ),
    )
)


@FUZZ
@given(st.dictionaries(header_names, header_values, max_size=8), bodies, st.booleans())
def test_fuzz_decoders_only_raise_ours_and_never_accept_invalid(
    headers: dict[str, str], body: bytes, legacy: bool
) -> None:
    for decode in (decode_http, _decode_response_list):
        try:
            events = decode(headers, body, legacy=legacy)
        except (ValidationError, PayloadTooLargeError):
            continue
        for event in events:
            assert validate(event, legacy=legacy) == []
    record = KafkaRecord(
        None, body, tuple((k.replace("-", "_"), v.encode()) for k, v in headers.items())
    )
    try:
        event = decode_record(record, legacy=legacy)
    except ValidationError:
        return
    assert validate(event, legacy=legacy) == []


def _decode_response_list(
    headers: dict[str, str], body: bytes, *, legacy: bool
) -> list[CloudEvent]:
    event = decode_response(headers, body, legacy=legacy)
    return [] if event is None else [event]


@FUZZ
@given(bodies)
def test_json_accelerator_agrees_with_stdlib(body: bytes) -> None:
    try:
        expected: Any = parse_json_stdlib(body)
    except ValueError:
        expected = ValueError
    try:
        got: Any = parse_json(body)
    except ValueError:
        got = ValueError
    assert got == expected or (expected != expected and got != got)


@ROUND_TRIP
@given(json_values)
def test_json_writers_agree(value: Any) -> None:
    assert json.loads(dumps_utf8(value)) == json.loads(dumps_utf8_stdlib(value)) == value


def test_out_of_range_number_in_data_cannot_be_encoded() -> None:
    """1e400 overflows a double into infinity, which no JSON encoder writes: the codec refuses to
    write it (never invalid JSON) and the ingress answers 400 before storing anything
    (tests/functional/test_ingress.py)."""
    (event,) = decode_http(
        {"content-type": "application/cloudevents+json"},
        b'{"specversion":"1.0","id":"1","source":"/s","type":"t","data":[1e400,"\\ud800"]}',
    )
    assert event.json_data[0] == float("inf")
    with pytest.raises(ValueError):
        encode_binary(event)


@ROUND_TRIP
@given(
    events(typed=False) | events(typed=True) | events(typed=True, version="0.3"),
    st.sampled_from(["datacontenttype", "subject", "id", "knativebrokerttl", "first"]),
    st.one_of(st.none(), ints, text),
)
def test_binary_omit_is_encoding_the_event_without_that_attribute(
    event: CloudEvent, omit: str, ttl: int | str | None
) -> None:
    if ttl is not None:
        event = event.replace_attributes({"knativebrokerttl": ttl})
    name = next(iter(sorted(event.attributes))) if omit == "first" else omit
    expected = encode_binary(event.replace_attributes(remove=(name,)))
    assert encode_binary(event, omit=name) == expected
    assert encode_binary(event) == encode_binary(event, omit="absent")


@given(event=st.sampled_from(["1.0", "0.3"]).flatmap(lambda v: events(typed=True, version=v)))
@settings(max_examples=300, deadline=None)
def test_every_accepted_event_can_be_encoded_for_delivery(event: CloudEvent) -> None:
    """What ingress accepts, delivery can write (issue 16 defect 5): binary-mode header names
    and values are what an HTTP client sends without refusing them (no CR, LF or other control
    characters, names are tokens)."""
    import re

    token = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
    for headers, _ in (encode_binary(event), encode_structured(event)):
        for name, value in headers.items():
            assert token.fullmatch(name), name
            assert not any(ord(c) < 0x20 or ord(c) == 0x7F for c in value if c != "\t"), value
