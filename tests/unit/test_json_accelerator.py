"""The JSON accelerator reads exactly what the stdlib reads: same values *and* same types.

`test_codec_properties.py` compares parsed values with ``==``, where ``1 == 1.0``; a parser that
turned a big integer into a float (orjson does, silently, beyond 64 bits) would pass there and
lose digits on the way to a subscriber. These tests compare a type-aware image of the values.
"""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chalicelib.core.cloudevents import json_format
from chalicelib.core.cloudevents.codec import decode_http, encode_structured
from chalicelib.core.cloudevents.json_format import (
    JSON_ACCELERATOR,
    dumps_ascii,
    dumps_utf8,
    parse_json,
    parse_json_stdlib,
)

SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def typed(value: Any) -> Any:
    """A comparable image that tells 1 from 1.0 and -0.0 from 0.0."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return (type(value).__name__, value)
    if isinstance(value, int):
        return ("int", value)
    if isinstance(value, float):
        return ("float", "nan" if math.isnan(value) else value.hex())
    if isinstance(value, list):
        return ("list", [typed(v) for v in value])
    assert isinstance(value, dict)
    return ("dict", sorted((k, typed(v)) for k, v in value.items()))


def outcome(parse: Any, body: bytes) -> Any:
    try:
        return typed(parse(body))
    except ValueError:
        return ValueError


def test_an_accelerator_is_in_use() -> None:
    """The Lambda package and the dev venv carry msgspec (requirements.txt)."""
    assert JSON_ACCELERATOR.startswith("msgspec")


NUMBERS = [
    b"0",
    b"-0",
    b"-0.0",
    b"1.0",
    b"1e16",
    b"1E+2",
    b"5e-324",
    b"1e-400",
    b"0.1",
    b"9223372036854775807",
    b"9223372036854775808",
    b"-9223372036854775808",
    b"-9223372036854775809",
    b"18446744073709551615",
    b"18446744073709551616",
    b"123456789012345678901234567890",
    b"-123456789012345678901234567890",
    b"1" * 400,
    b"1.7976931348623157e308",
    b"1e999",
    b"-1e999",
    b"NaN",
    b"Infinity",
    b"01",
    b"1.",
    b"+1",
]


@pytest.mark.parametrize("literal", NUMBERS, ids=lambda b: b.decode()[:30])
def test_numbers_read_as_the_stdlib_reads_them(literal: bytes) -> None:
    for body in (literal, b'{"data":[' + literal + b"]}"):
        assert outcome(parse_json, body) == outcome(parse_json_stdlib, body)


STRINGS = [
    b'"\\ud800"',  # a lone surrogate: only the stdlib reads it
    b'"\\ud83d\\ude00"',
    b'"\\u0000"',
    b'"\xff"',
    b'"\xed\xa0\x80"',  # a surrogate encoded in UTF-8: invalid
    b'"\xc3\xa9\xe2\x80\xa8"',
    b'{"a":1,"a":2}',
    b"\xef\xbb\xbf{}",
    b"[1,2,]",
    b" {} ",
    b"[" * 3000 + b"]" * 3000,
]


@pytest.mark.parametrize("body", STRINGS, ids=range(len(STRINGS)))
def test_strings_and_structure_read_as_the_stdlib_reads_them(body: bytes) -> None:
    assert outcome(parse_json, body) == outcome(parse_json_stdlib, body)


json_numbers = st.one_of(
    st.integers(),
    st.integers(min_value=-(2**200), max_value=2**200),
    st.floats(allow_nan=False, allow_infinity=False),
)
json_values = st.recursive(
    st.none() | st.booleans() | json_numbers | st.text(),
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(), inner, max_size=5),
    max_leaves=30,
)


@SETTINGS
@given(json_values)
def test_any_document_reads_with_the_same_types(value: Any) -> None:
    for body in (json.dumps(value).encode(), json.dumps(value, ensure_ascii=False).encode()):
        assert outcome(parse_json, body) == outcome(parse_json_stdlib, body)


def test_a_64_kib_event_round_trips_byte_for_byte_through_the_accelerator() -> None:
    data = {"n": [2**64 + i for i in range(2400)], "f": [0.1 * i for i in range(2400)]}
    doc = {"specversion": "1.0", "id": "1", "source": "/s", "type": "t", "data": data}
    body = json.dumps(doc, separators=(",", ":")).encode()
    assert len(body) > 64 * 1024
    (event,) = decode_http({"content-type": "application/cloudevents+json"}, body)
    assert typed(event.json_data) == typed(data)
    _, out = encode_structured(event)
    assert typed(json.loads(out)["data"]) == typed(data)


def test_without_the_accelerator_the_stdlib_reads_the_same(monkeypatch: pytest.MonkeyPatch) -> None:
    body = b'{"a":[18446744073709551616,1.5,"\\u00e9"]}'
    fast = outcome(parse_json, body)
    monkeypatch.setattr(json_format, "_msgspec_decode", None)
    monkeypatch.setattr(json_format, "_msgspec_encode", None)
    assert outcome(parse_json, body) == fast
    assert dumps_utf8(parse_json(body)) == b'{"a":[18446744073709551616,1.5,"\xc3\xa9"]}'


@SETTINGS
@given(json_values)
def test_dumps_ascii_writes_what_dumps_compact_reads_back_or_declines(value: Any) -> None:
    """The replay's fast writer: an ASCII text that reads back to the same typed value, or None
    (then the caller takes ``dumps_compact``)."""
    text = dumps_ascii(value)
    if text is not None:
        assert text.isascii() and typed(parse_json(text.encode())) == typed(value)


def test_dumps_ascii_declines_what_it_must_not_write() -> None:
    assert dumps_ascii({"a": "é"}) is None  # not ASCII: its length is not its size
    assert dumps_ascii({"a": math.inf}) is None  # msgspec writes null: dumps_compact refuses
    assert dumps_ascii({"a": None}) is None  # null at all: declined (cannot tell it from inf)
    assert dumps_ascii({"a": "\ud800"}) is None  # a lone surrogate
    big = {"a": 2**70, "b": [1.5e-300, "x"]}
    assert dumps_ascii(big) == '{"a":1180591620717411303424,"b":[1.5e-300,"x"]}'
