"""Validation rules (design.md §2.1), content modes, limits and replies, one table each."""

from __future__ import annotations

import json
from typing import Any

import pytest

from chalicelib.core.cloudevents.codec import (
    Limits,
    decode_http,
    decode_response,
    encode_binary,
    from_json,
    validate,
)
from chalicelib.core.cloudevents.context_attributes import (
    is_absolute_uri,
    is_media_type,
    is_rfc3339,
    is_uri_reference,
    is_valid_string,
)
from chalicelib.core.cloudevents.event import CloudEvent, MapValue
from chalicelib.core.errors import PayloadTooLargeError, ValidationError

STRUCTURED = {"content-type": "application/cloudevents+json"}
BATCH = {"content-type": "application/cloudevents-batch+json"}
MINIMAL = {"specversion": "1.0", "id": "1", "source": "/s", "type": "t"}
BINARY = {"ce-specversion": "1.0", "ce-id": "1", "ce-source": "/s", "ce-type": "t"}


def problems_of(obj: Any, legacy: bool = False) -> list[str]:
    with pytest.raises(ValidationError) as err:
        decode_http(STRUCTURED, json.dumps(obj).encode(), legacy=legacy)
    return [p.field for p in err.value.problems]


@pytest.mark.parametrize(
    "value",
    [
        "2018-04-05T17:31:00Z",
        "2018-04-05t17:31:00z",
        "2018-04-05T17:31:00.123456789+05:30",
        "2016-12-31T23:59:60Z",  # leap second
        "2024-02-29T00:00:00-00:00",
        "2000-02-29T00:00:00Z",
        "0000-01-01T00:00:00Z",
    ],
)
def test_rfc3339_valid(value: str) -> None:
    assert is_rfc3339(value)


@pytest.mark.parametrize(
    "value",
    [
        "2018-04-05",
        "2018-04-05 17:31:00Z",
        "2018-04-05T17:31:00",  # no offset
        "2018-04-05T17:31Z",
        "2018-13-05T17:31:00Z",
        "2018-04-31T17:31:00Z",
        "2023-02-29T00:00:00Z",
        "1900-02-29T00:00:00Z",
        "2018-04-05T24:00:00Z",
        "2018-04-05T17:60:00Z",
        "2018-04-05T17:31:61Z",
        "2018-04-05T17:31:00+24:00",
        "2018-04-05T17:31:00.Z",
        "٢٠١٨-04-05T17:31:00Z",  # non-ASCII digits
        "20180405T173100Z",
    ],
)
def test_rfc3339_invalid(value: str) -> None:
    assert not is_rfc3339(value)


@pytest.mark.parametrize(
    ("value", "reference", "absolute"),
    [
        ("https://example.com/a?b=c#d", True, True),
        ("urn:uuid:6e8bc430-9c3a-11d9-9669-0800200c9a66", True, True),
        ("http://[::1]:8080/x", True, True),
        ("http://[v1.fe]/", True, True),
        ("//host/path", True, False),
        ("/a/b%20c", True, False),
        ("1-555-123-4567", True, False),
        ("", True, False),
        ("a b", False, False),
        ("/café", False, False),
        ("%zz", False, False),
        ("1a:b", False, False),  # scheme must start with a letter; no colon in a first segment
        ("http://[::g]/", False, False),
        ("http://exa mple.com", False, False),
        ("#frag", True, False),
    ],
)
def test_uri_grammar(value: str, reference: bool, absolute: bool) -> None:
    assert is_uri_reference(value) is reference
    assert is_absolute_uri(value) is absolute


@pytest.mark.parametrize(
    ("value", "ok"),
    [
        ("application/json", True),
        ("text/plain; charset=utf-8", True),
        ('multipart/form-data;boundary="a b"', True),
        ("application/vnd.apache.thrift.binary", True),
        ("TEXT/Plain; CharSet=utf-8", True),
        ("json", False),
        ("text/", False),
        ("text/plain; charset", False),
        ("text/plain;;", False),
        ("not a/type", False),
    ],
)
def test_media_type(value: str, ok: bool) -> None:
    assert is_media_type(value) is ok


@pytest.mark.parametrize(
    ("value", "ok"),
    [
        ("hello wörld 😀", True),
        ("no\u00a0break", True),
        ("new\nline", False),
        ("del\x7f", False),
        ("c1\x85", False),
        ("lone\ud800", False),
        ("nonchar\ufffe", False),
        ("nonchar\U0010ffff", False),
        ("nonchar\ufdd0", False),
    ],
)
def test_string_type(value: str, ok: bool) -> None:
    assert is_valid_string(value) is ok


@pytest.mark.parametrize(
    ("change", "fields"),
    [
        ({"id": None}, ["id"]),  # JSON null is absent: required missing
        ({"id": ""}, ["id"]),
        ({"id": 5}, ["id"]),
        ({"source": ""}, ["source"]),
        ({"source": "not a uri"}, ["source"]),
        ({"type": None}, ["type"]),
        ({"specversion": None}, ["specversion"]),
        ({"specversion": 1.0}, ["specversion"]),
        ({"specversion": "2.0"}, ["specversion"]),
        ({"specversion": "0.2"}, ["specversion"]),
        ({"time": "yesterday"}, ["time"]),
        ({"time": 12}, ["time"]),
        ({"subject": ""}, ["subject"]),
        ({"dataschema": "/relative"}, ["dataschema"]),
        ({"dataschema": ""}, ["dataschema"]),
        ({"datacontenttype": "json"}, ["datacontenttype"]),
        ({"Upper": "x"}, ["Upper"]),
        ({"with_underscore": "x"}, ["with_underscore"]),
        ({"": "x"}, [""]),
        ({"ext": 1.5}, ["ext"]),
        ({"ext": [1]}, ["ext"]),
        ({"ext": {"a": 1}}, ["ext"]),  # no Map type in 1.0
        ({"ext": 2**31}, ["ext"]),
        ({"ext": "line\nbreak"}, ["ext"]),
        ({"data": 1, "data_base64": "AA=="}, ["data_base64"]),
        ({"data_base64": "AA"}, ["data_base64"]),  # padding required
        ({"data_base64": "AB=="}, ["data_base64"]),  # non-canonical: stray bits
        ({"data_base64": "A-_="}, ["data_base64"]),  # URL-safe alphabet
        ({"data_base64": 5}, ["data_base64"]),
        (
            {"id": "", "source": "", "time": "x", "Bad": 1},
            ["Bad", "id", "source", "time"],
        ),  # all at once
    ],
)
def test_structured_problems(change: dict[str, Any], fields: list[str]) -> None:
    assert sorted(problems_of({**MINIMAL, **change})) == sorted(fields)


@pytest.mark.parametrize(
    ("change", "ok"),
    [
        ({"ext": 2**31 - 1}, True),
        ({"ext": -(2**31)}, True),
        ({"ext": True}, True),
        ({"ext9": "x", "9ext": "y"}, True),  # 1.0 allows a leading digit
        ({"subject": None, "dataschema": None}, True),
        ({"dataschema": "https://example.com/schema#/definitions/a"}, True),
        ({"data": None}, True),
        ({"data_base64": None, "data": "x"}, True),
        ({"data_base64": ""}, True),
    ],
)
def test_structured_accepts(change: dict[str, Any], ok: bool) -> None:
    (event,) = decode_http(STRUCTURED, json.dumps({**MINIMAL, **change}).encode())
    assert validate(event) == []


def test_json_null_data_is_a_null_payload_and_absent_data_is_none() -> None:
    (null,) = decode_http(STRUCTURED, json.dumps({**MINIMAL, "data": None}).encode())
    assert null.has_json_data and null.json_data is None
    (absent,) = decode_http(STRUCTURED, json.dumps(MINIMAL).encode())
    assert not absent.has_json_data and absent.data is None


def test_string_data_with_non_json_type_is_bytes_and_json_string_is_kept() -> None:
    obj = {**MINIMAL, "datacontenttype": "text/plain", "data": '{"a":1}'}
    (text,) = decode_http(STRUCTURED, json.dumps(obj).encode())
    assert text.data == b'{"a":1}'
    obj = {**MINIMAL, "datacontenttype": "application/cloudevents+json", "data": '{"a":1}'}
    (js,) = decode_http(STRUCTURED, json.dumps(obj).encode())
    assert js.json_data == '{"a":1}'  # a JSON string is never parsed again


@pytest.mark.parametrize(
    ("body", "field"),
    [
        (b"{", "body"),
        (b"\xff", "body"),
        (b"[1]", "body"),
        (b'{"specversion": NaN}', "body"),
        (b"[" * 100_000 + b"]" * 100_000, "body"),
        (b"", "body"),
    ],
)
def test_unparsable_structured_bodies(body: bytes, field: str) -> None:
    with pytest.raises(ValidationError) as err:
        decode_http(STRUCTURED, body)
    assert [p.field for p in err.value.problems] == [field]


@pytest.mark.parametrize(
    ("headers", "fields"),
    [
        ({"ce-id": "1", "ce-source": "/s", "ce-type": "t"}, ["ce-specversion"]),
        ({**BINARY, "ce-id": ""}, ["ce-id"]),
        ({k: v for k, v in BINARY.items() if k != "ce-id"}, ["ce-id"]),
        ({**BINARY, "ce-datacontenttype": "text/plain"}, ["ce-datacontenttype"]),
        ({**BINARY, "content-type": "nonsense"}, ["content-type"]),
        ({**BINARY, "ce-my-ext": "x"}, ["ce-my-ext"]),  # no Map flattening in 1.0
        ({**BINARY, "ce-data": "x"}, ["ce-data"]),
        ({**BINARY, "ce-time": "2018-04-05"}, ["ce-time"]),
        ({**BINARY, "ce-ext": "%0A"}, ["ce-ext"]),  # decodes to a control character
        ({**BINARY, "CE-ID": "2"}, ["ce-id"]),  # the same header twice, different values
        ({**BINARY, "ce-specversion": "0.1"}, ["ce-specversion"]),
    ],
)
def test_binary_problems(headers: dict[str, str], fields: list[str]) -> None:
    with pytest.raises(ValidationError) as err:
        decode_http(headers, b"x")
    assert [p.field for p in err.value.problems] == fields


def test_binary_header_names_are_case_insensitive_and_data_is_byte_identical() -> None:
    body = bytes(range(256))
    headers = {"CE-SpecVersion": "1.0", "Ce-Id": "1", "ce-SOURCE": "/s", "cE-type": "t"}
    (event,) = decode_http({**headers, "Content-Type": "application/octet-stream"}, body)
    assert event.attributes == {**MINIMAL, "datacontenttype": "application/octet-stream"}
    assert event.data == body
    (empty,) = decode_http(headers, b"")
    assert empty.data is None and "datacontenttype" not in empty.attributes


@pytest.mark.parametrize(
    ("content_type", "mode"),
    [
        ("application/cloudevents+json", "structured"),
        ("APPLICATION/CLOUDEVENTS+JSON ; charset=utf-8", "structured"),
        ("application/cloudevents-batch+json", "batch"),
        ("application/json", "binary"),
        ("application/cloudevents+avro", "binary"),  # unknown format: binary (spec §3)
        ("", "binary"),
    ],
)
def test_content_mode(content_type: str, mode: str) -> None:
    structured = json.dumps(MINIMAL).encode()
    bodies = {"structured": structured, "batch": b"[" + structured + b"]", "binary": b"raw"}
    headers = {**BINARY, "ce-id": "from-header", "content-type": content_type}
    events = decode_http(headers, bodies[mode])
    assert len(events) == 1
    assert events[0].id == ("from-header" if mode == "binary" else "1")  # structured wins


def test_unknown_cloudevents_format_without_ce_headers_says_so() -> None:
    with pytest.raises(ValidationError) as err:
        decode_http({"content-type": "application/cloudevents+avro"}, b"x")
    assert "application/cloudevents+avro" in err.value.problems[0].message


def test_batch_problems_name_the_index_and_nothing_is_returned() -> None:
    good = dict(MINIMAL)
    batch = [good, {**good, "source": ""}, 7, {**good, "specversion": "0.3"}]
    with pytest.raises(ValidationError) as err:
        decode_http(
            {"content-type": "application/cloudevents-batch+json"}, json.dumps(batch).encode()
        )
    assert [p.field for p in err.value.problems] == ["[1].source", "[2]", "[3].specversion"]
    with pytest.raises(ValidationError):
        decode_http(BATCH, b"{}")


def test_limits() -> None:
    limits = Limits(max_body_bytes=10, max_header_count=5, max_header_bytes=60, max_batch_length=1)
    with pytest.raises(PayloadTooLargeError):
        decode_http(BINARY, b"x" * 11, limits=limits)
    assert decode_http(BINARY, b"x" * 10, limits=limits)
    with pytest.raises(ValidationError) as err:
        decode_http({**BINARY, "a": "1", "b": "2"}, b"", limits=limits)
    assert err.value.problems[0].field == "headers"
    with pytest.raises(ValidationError):
        decode_http({**BINARY, "x": "y" * 40}, b"", limits=limits)
    batch = json.dumps([MINIMAL, MINIMAL]).encode()
    with pytest.raises(ValidationError):
        decode_http(
            {"content-type": "application/cloudevents-batch+json"},
            batch,
            limits=Limits(max_batch_length=1),
        )


def test_legacy_versions_only_when_allowed() -> None:
    for version in ("0.1", "0.2"):
        headers = {**BINARY, "ce-specversion": version, "content-type": "text/plain"}
        with pytest.raises(ValidationError):
            decode_http(headers, b"x")
        (event,) = decode_http(headers, b"x", legacy=True)
        assert event.attributes["contenttype"] == "text/plain"  # the seed spec's name
        assert encode_binary(event) == (
            {k: v for k, v in headers.items()} | {"content-type": "text/plain"},
            b"x",
        )


def test_v03_rules() -> None:
    v03 = {**MINIMAL, "specversion": "0.3"}
    assert problems_of({**v03, "9lives": "x"}) == ["9lives"]
    (event,) = decode_http(STRUCTURED, json.dumps({**v03, "schemaurl": "/rel"}).encode())
    assert event.attributes["schemaurl"] == "/rel"  # 0.3 schemaurl is a URI-reference
    assert problems_of({**v03, "datacontentencoding": "base64", "data": "!!"}) == ["data"]
    assert problems_of({**v03, "datacontentencoding": "7bit", "data": "x"}) == [
        "datacontentencoding"
    ]
    (ignored,) = decode_http(
        STRUCTURED, json.dumps({**v03, "datacontentencoding": "base64", "data": {"a": 1}}).encode()
    )
    assert ignored.json_data == {"a": 1}  # not a String: the encoding MUST be ignored


def test_binary_v03_map_headers_fold_into_one_attribute() -> None:
    headers = {**BINARY, "ce-specversion": "0.3", "ce-ext-a": "1", "ce-ext-b": "two%20words"}
    (event,) = decode_http(headers, b"")
    assert event.attributes["ext"] == MapValue.of({"a": "1", "b": "two words"})
    with pytest.raises(ValidationError) as err:
        decode_http({**headers, "ce-ext": "scalar"}, b"")
    assert [p.field for p in err.value.problems] == ["ce-ext"]


@pytest.mark.parametrize(
    ("event", "fields"),
    [
        (CloudEvent(MINIMAL), []),
        (CloudEvent({**MINIMAL, "ext": 1.5}), ["ext"]),  # type: ignore[dict-item]
        (CloudEvent(MINIMAL, data=b"x", json_data={"a": 1}), ["data"]),
        (CloudEvent({**MINIMAL, "ext": MapValue("[1]"), "specversion": "0.3"}), ["ext"]),
        (CloudEvent({**MINIMAL, "ext": MapValue.of({"a": 1})}), ["ext"]),
        (CloudEvent({"id": "1"}), ["specversion", "source", "type"]),
    ],
)
def test_validate_in_memory_events(event: CloudEvent, fields: list[str]) -> None:
    assert sorted(p.field for p in validate(event)) == sorted(fields)


def test_from_json_takes_any_mapping_and_raises() -> None:
    assert from_json(dict(MINIMAL)).attributes == MINIMAL
    with pytest.raises(ValidationError):
        from_json({"id": "1"})


@pytest.mark.parametrize(
    ("headers", "body", "expected"),
    [
        ({}, b"", None),
        ({"content-type": "application/json"}, b'{"specversion": "1.0"}', None),
        ({"content-type": "text/plain"}, b"hello", None),
        (BINARY, b"", "1"),
        ({"content-type": "application/cloudevents+json"}, json.dumps(MINIMAL).encode(), "1"),
    ],
)
def test_decode_response(headers: dict[str, str], body: bytes, expected: str | None) -> None:
    event = decode_response(headers, body)
    assert (event.id if event else None) == expected


@pytest.mark.parametrize(
    ("headers", "body"),
    [
        ({**BINARY, "ce-id": ""}, b""),
        ({"content-type": "application/cloudevents+json"}, b"{}"),
        ({"content-type": "application/cloudevents+json"}, b"not json"),
        ({"content-type": "application/cloudevents-batch+json"}, b"[]"),
        ({"ce-specversion": "9.9"}, b""),
    ],
)
def test_decode_response_claims_but_invalid(headers: dict[str, str], body: bytes) -> None:
    with pytest.raises(ValidationError):
        decode_response(headers, body)
