"""Every example in the spec texts we build from (shared/specs), decoded and re-encoded.

Placeholders in the texts ("... base64 encoded string ...", "... further attributes omitted ...")
are not valid events; each test says how it fills them in, and where the placeholder itself is
tried, what the codec must say about it.
"""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from chalicelib.core.cloudevents.codec import (
    decode_http,
    encode_binary,
    encode_structured,
    from_json,
    to_json,
    validate,
)
from chalicelib.core.cloudevents.event import ABSENT, CloudEvent, MapValue
from chalicelib.core.cloudevents.percent_encoding import decode_header_value, encode_header_value
from chalicelib.core.errors import ValidationError

STRUCTURED = {"content-type": "application/cloudevents+json; charset=utf-8"}
BATCH = {"content-type": "application/cloudevents-batch+json; charset=utf-8"}
THRIFT = bytes(range(256))  # stands in for "... base64 encoded string ..."


def structured(obj: Any, legacy: bool = False) -> CloudEvent:
    (event,) = decode_http(STRUCTURED, json.dumps(obj).encode(), legacy=legacy)
    return event


# --- cloudevents/spec.md "Example" ------------------------------------------------------------

SPEC_EXAMPLE = {
    "specversion": "1.0",
    "type": "com.github.pull_request.opened",
    "source": "https://github.com/cloudevents/spec/pull",
    "subject": "123",
    "id": "A234-1234-1234",
    "time": "2018-04-05T17:31:00Z",
    "comexampleextension1": "value",
    "comexampleothervalue": 5,
    "datacontenttype": "text/xml",
    "data": '<much wow="xml"/>',
}


def test_spec_example_keeps_types_and_turns_xml_text_into_bytes() -> None:
    event = structured(SPEC_EXAMPLE)
    assert event.attributes["comexampleothervalue"] == 5
    assert event.data == b'<much wow="xml"/>'
    assert event.json_data is ABSENT
    assert json.loads(encode_structured(event)[1]) == SPEC_EXAMPLE


@pytest.mark.parametrize(
    "source",
    [
        "https://github.com/cloudevents",
        "mailto:cncf-wg-serverless@lists.cncf.io",
        "urn:uuid:6e8bc430-9c3a-11d9-9669-0800200c9a66",
        "/cloudevents/spec/pull/123",
        "/sensors/tn-1234567/alerts",
        "1-555-123-4567",
    ],
)
def test_every_source_example_is_a_uri_reference(source: str) -> None:
    assert structured(dict(SPEC_EXAMPLE, source=source)).source == source


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("type", "com.github.pull_request.opened"),
        ("type", "com.example.object.deleted.v2"),
        ("subject", "mynewfile.jpg"),
        ("subject", "partnerid/5:clientid/100"),
        ("source", "https://example.com/storage/tenant/container"),
        ("source", "https://example.com/eCommerce/crm"),
    ],
)
def test_attribute_examples(name: str, value: str) -> None:
    assert structured(dict(SPEC_EXAMPLE, **{name: value})).attributes[name] == value


# --- formats/json-format.md §2.3 (attribute mappings) and §3.2 (events and their binary form) ---


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("type", "com.example.someevent"),
        ("specversion", "1.0"),
        ("source", "/mycontext"),
        ("subject", "larger-context"),
        ("subject", None),
        ("id", "1234-1234-1234"),
        ("time", "2018-04-05T17:31:00Z"),
        ("time", None),
        ("datacontenttype", "application/json"),
    ],
)
def test_json_attribute_mapping_table(name: str, value: str | None) -> None:
    base = {"specversion": "1.0", "type": "t", "source": "/s", "id": "1"}
    event = structured(dict(base, **{name: value}))
    assert event.attributes.get(name) == value  # null is the same as absent


JSON_BASE = {
    "specversion": "1.0",
    "type": "com.example.someevent",
    "source": "/mycontext",
    "time": "2018-04-05T17:31:00Z",
    "comexampleextension1": "value",
    "comexampleothervalue": 5,
}
BINARY_BASE = {
    "ce-specversion": "1.0",
    "ce-type": "com.example.someevent",
    "ce-source": "/mycontext",
    "ce-time": "2018-04-05T17:31:00Z",
    "ce-comexampleextension1": "value",
    "ce-comexampleothervalue": "5",
}
APPINFO = {"appinfoA": "abc", "appinfoB": 123, "appinfoC": True}

# (structured event, its binary headers, its binary body) as json-format §3.2 shows them
JSON_FORMAT_EXAMPLES = [
    pytest.param(
        dict(
            JSON_BASE,
            id="A234-1234-1234",
            datacontenttype="application/vnd.apache.thrift.binary",
            data_base64=base64.b64encode(THRIFT).decode(),
        ),
        dict(
            BINARY_BASE,
            **{"ce-id": "A234-1234-1234", "content-type": "application/vnd.apache.thrift.binary"},
        ),
        THRIFT,
        id="binary-data",
    ),
    pytest.param(
        dict(
            JSON_BASE,
            id="B234-1234-1234",
            unsetextension=None,
            datacontenttype="application/xml",
            data='<much wow="xml"/>',
        ),
        dict(BINARY_BASE, **{"ce-id": "B234-1234-1234", "content-type": "application/xml"}),
        b'<much wow="xml"/>',
        id="xml-string-data",
    ),
    pytest.param(
        dict(
            JSON_BASE,
            subject=None,
            id="C234-1234-1234",
            datacontenttype="application/json",
            data=APPINFO,
        ),
        dict(BINARY_BASE, **{"ce-id": "C234-1234-1234", "content-type": "application/json"}),
        APPINFO,
        id="json-object-data",
    ),
    pytest.param(
        dict(
            JSON_BASE,
            subject=None,
            id="C234-1234-1234",
            datacontenttype="application/json",
            data=1.5,
        ),
        dict(BINARY_BASE, **{"ce-id": "C234-1234-1234", "content-type": "application/json"}),
        1.5,
        id="json-number-data",
    ),
    pytest.param(
        dict(JSON_BASE, subject=None, id="D234-1234-1234", data="I'm just a string"),
        dict(BINARY_BASE, **{"ce-id": "D234-1234-1234", "content-type": "application/json"}),
        b'"I\'m just a string"',
        id="json-string-data-no-content-type",
    ),
    pytest.param(
        {
            "specversion": "1.0",
            "type": "com.example.someevent",
            "source": "/mycontext",
            "id": "D234-1234-1234",
            "data_base64": "eyAieHl6IjogMTIzIH0=",
        },
        {
            "ce-specversion": "1.0",
            "ce-type": "com.example.someevent",
            "ce-source": "/mycontext",
            "ce-id": "D234-1234-1234",
        },
        b'{ "xyz": 123 }',
        id="base64-without-content-type",
    ),
]


@pytest.mark.parametrize(("obj", "headers", "body"), JSON_FORMAT_EXAMPLES)
def test_json_format_example_reencoded_in_binary_mode(
    obj: dict[str, Any], headers: dict[str, str], body: Any
) -> None:
    event = structured(obj)
    got_headers, got_body = encode_binary(event)
    assert got_headers == headers
    if isinstance(body, bytes):
        assert got_body == body
    else:  # the text shows pretty-printed JSON; ours is compact and JSON-equal
        assert json.loads(got_body) == body
    # and the binary message decodes back to the same attributes
    (again,) = decode_http(headers, got_body)
    expected = {k: str(v) for k, v in event.attributes.items()}
    if "content-type" in headers:
        expected["datacontenttype"] = headers["content-type"]
    assert again.attributes == expected


@pytest.mark.parametrize(("obj", "headers", "body"), JSON_FORMAT_EXAMPLES)
def test_json_format_example_survives_to_json(obj: Any, headers: Any, body: Any) -> None:
    event = structured(obj)
    assert from_json(to_json(event)) == event
    assert validate(event) == []


def test_json_format_binary_placeholder_is_not_base64() -> None:
    obj = dict(JSON_BASE, id="A", data_base64="... base64 encoded string ...")
    with pytest.raises(ValidationError) as err:
        structured(obj)
    assert [p.field for p in err.value.problems] == ["data_base64"]


def test_json_batch_example_and_empty_batch() -> None:
    batch = [
        dict(
            JSON_BASE,
            source="/mycontext/4",
            id="B234-1234-1234",
            datacontenttype="application/vnd.apache.thrift.binary",
            data_base64=base64.b64encode(THRIFT).decode(),
        ),
        dict(
            JSON_BASE,
            type="com.example.someotherevent",
            source="/mycontext/9",
            id="C234-1234-1234",
            time="2018-04-05T17:31:05Z",
            datacontenttype="application/json",
            data=APPINFO,
        ),
    ]
    first, second = decode_http(BATCH, json.dumps(batch).encode())
    assert first.data == THRIFT
    assert second.json_data == APPINFO
    assert decode_http(BATCH, b"[]") == []


# --- bindings/http-protocol-binding.md ----------------------------------------------------------


def test_http_binary_example_request_and_response() -> None:
    headers = {
        "ce-specversion": "1.0",
        "ce-type": "com.example.someevent",
        "ce-time": "2018-04-05T03:56:24Z",
        "ce-id": "1234-1234-1234",
        "ce-source": "/mycontext/subcontext",
        "Content-Type": "application/json; charset=utf-8",
        "Content-Length": "16",
        "Host": "webhook.example.com",
    }
    body = b'{\n    "a": 1\n}\n'
    (event,) = decode_http(headers, body)
    assert event.data == body  # byte-identical
    assert event.attributes["datacontenttype"] == "application/json; charset=utf-8"
    out_headers, out_body = encode_binary(event)
    assert out_body == body
    assert out_headers["content-type"] == "application/json; charset=utf-8"


def test_http_structured_example_with_and_without_charset() -> None:
    obj = {"specversion": "1.0", "type": "com.example.someevent", "source": "/s", "id": "1"}
    for content_type in (
        "application/cloudevents+json; charset=utf-8",
        "application/cloudevents+json; charset=UTF-8",
        "Application/CloudEvents+JSON",
    ):
        (event,) = decode_http({"Content-Type": content_type}, json.dumps(obj).encode())
        assert event.attributes == obj


@pytest.mark.parametrize(
    ("encoded", "decoded"),
    [
        ("Euro%20%E2%82%AC%20%F0%9F%98%80", "Euro € 😀"),  # §3.1.3.2 example
        ("euro%20%e2%82%ac", "euro €"),  # decoders MUST accept lower-case hex
        ("%41", "A"),  # unnecessarily encoded: MUST be accepted
        ("%2541", "%41"),  # exactly one round
        ('"quoted value"', "quoted value"),  # RFC 7230 quoted-string from older senders
        ('"say \\"hi\\" \\\\ bye"', 'say "hi" \\ bye'),
        ('"a%20b"', "a b"),  # unquote, then percent-decode
        ("100%", "100%"),  # a lone % from an older sender stays
    ],
)
def test_percent_decoding(encoded: str, decoded: str) -> None:
    assert decode_header_value(encoded) == decoded


def test_percent_encoding_example_and_must_encode_set() -> None:
    assert encode_header_value("Euro € 😀") == "Euro%20%E2%82%AC%20%F0%9F%98%80"
    assert encode_header_value('a "b" 100%') == "a%20%22b%22%20100%25"
    assert encode_header_value("tab\there\x7f") == "tab%09here%7F"
    assert encode_header_value("plain-ASCII_!#$&'()*+,/:;<=>?@[]^`{|}~") == (
        "plain-ASCII_!#$&'()*+,/:;<=>?@[]^`{|}~"
    )


@pytest.mark.parametrize("bad", ["%C0%A0", "%FF", "%E2%82", '"unterminated', '"a"b"'])
def test_invalid_header_values_are_rejected(bad: str) -> None:
    headers = {"ce-specversion": "1.0", "ce-id": "1", "ce-source": "/s", "ce-type": "t"}
    with pytest.raises(ValidationError) as err:
        decode_http({**headers, "ce-subject": bad}, b"")
    assert [p.field for p in err.value.problems] == ["ce-subject"]


# --- v0.3: spec.md, json-format.md, http-transport-binding.md ----------------------------------

V03_EXAMPLE = {
    "specversion": "0.3",
    "type": "com.github.pull.create",
    "source": "https://github.com/cloudevents/spec/pull",
    "subject": "123",
    "id": "A234-1234-1234",
    "time": "2018-04-05T17:31:00Z",
    "comexampleextension1": "value",
    "comexampleextension2": {"othervalue": 5},
    "datacontenttype": "text/xml",
    "data": '<much wow="xml"/>',
}


def test_v03_spec_example_with_a_map_extension() -> None:
    event = structured(V03_EXAMPLE)
    ext = event.attributes["comexampleextension2"]
    assert isinstance(ext, MapValue) and ext.entries() == {"othervalue": 5}
    assert event.data == b'<much wow="xml"/>'
    assert json.loads(encode_structured(event)[1]) == V03_EXAMPLE
    headers, body = encode_binary(event)
    assert headers["ce-comexampleextension2-othervalue"] == "5"  # 0.3 binding §3.1.3.1
    (back,) = decode_http(headers, body)
    assert back.attributes["comexampleextension2"] == MapValue.of({"othervalue": "5"})


V03_BASE = {
    "specversion": "0.3",
    "type": "com.example.someevent",
    "source": "/mycontext",
    "time": "2018-04-05T17:31:00Z",
    "comexampleextension1": "value",
    "comexampleextension2": {"otherValue": 5},
}


def test_v03_json_format_examples() -> None:
    text = structured(dict(V03_BASE, id="A", datacontenttype="text/xml", data="<much/>"))
    assert text.data == b"<much/>"
    # The "Binary-valued" example has no datacontentencoding; the 0.3 core text says base64
    # data needs it, so without it the string stays text (see codec_json's docstring).
    thrift = structured(
        dict(
            V03_BASE,
            id="B",
            datacontenttype="application/vnd.apache.thrift.binary",
            data="... base64 encoded string ...",
        )
    )
    assert thrift.data == b"... base64 encoded string ..."
    encoded = structured(
        dict(
            V03_BASE,
            id="B",
            datacontenttype="application/vnd.apache.thrift.binary",
            datacontentencoding="base64",
            data=base64.b64encode(THRIFT).decode(),
        )
    )
    assert encoded.data == THRIFT
    assert from_json(to_json(encoded)) == encoded
    json_data = structured(dict(V03_BASE, id="C", datacontenttype="application/json", data=APPINFO))
    assert json_data.json_data == APPINFO


def test_v03_batch_example() -> None:
    batch = [
        dict(V03_BASE, source="/mycontext/4", id="B", datacontenttype="text/plain", data="x"),
        dict(V03_BASE, type="t2", source="/mycontext/9", id="C", data=APPINFO),
    ]
    assert [e.id for e in decode_http(BATCH, json.dumps(batch).encode())] == ["B", "C"]


def test_v03_binary_example_and_names_must_start_with_a_letter() -> None:
    headers = {
        "ce-specversion": "0.3",
        "ce-type": "com.example.someevent",
        "ce-time": "2018-04-05T03:56:24Z",
        "ce-id": "1234-1234-1234",
        "ce-source": "/mycontext/subcontext",
        "Content-Type": "application/json; charset=utf-8",
    }
    (event,) = decode_http(headers, b"{}")
    assert event.specversion == "0.3"  # never upgraded
    with pytest.raises(ValidationError) as err:
        decode_http({**headers, "ce-1abc": "x"}, b"{}")
    assert [p.field for p in err.value.problems] == ["ce-1abc"]
    assert decode_http({**headers, "ce-specversion": "1.0", "ce-1abc": "x"}, b"{}")


# --- cloudevents-0.1.md (the seed spec: 0.1 / 0.2) ---------------------------------------------

SEED_EXAMPLE = {
    "specversion": "0.1",
    "type": "com.github.pull.create",
    "source": "https://github.com/cloudevents/spec/pull/123",
    "id": "A234-1234-1234",
    "time": "2018-04-05T17:31:00Z",
    "comexampleextension1": "value",
    "comexampleextension2": {"othervalue": 5},
    "contenttype": "text/xml",
    "data": '<much wow="xml"/>',
}


def test_seed_example_is_refused_unless_legacy() -> None:
    with pytest.raises(ValidationError) as err:
        structured(SEED_EXAMPLE)
    assert [p.field for p in err.value.problems] == ["specversion"]
    assert "legacy" in err.value.problems[0].message
    event = structured(SEED_EXAMPLE, legacy=True)
    assert event.data == b'<much wow="xml"/>'  # contenttype drives the data rules
    assert json.loads(encode_structured(event)[1]) == SEED_EXAMPLE  # delivered unchanged
    assert encode_binary(event)[0]["content-type"] == "text/xml"
    assert validate(event, legacy=True) == []
    assert validate(event)[0].field == "specversion"


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"schemaurl": "/relative"}, "schemaurl"),  # type URI: absolute
        ({"contenttype": "not a media type"}, "contenttype"),
        ({"Bad": "x"}, "Bad"),
        ({"9lives": "x"}, "9lives"),  # MUST begin with a lower-case letter
        ({"id": ""}, "id"),
        ({"time": "yesterday"}, "time"),
    ],
)
def test_seed_rules(change: dict[str, str], field: str) -> None:
    with pytest.raises(ValidationError) as err:
        structured({**SEED_EXAMPLE, "specversion": "0.2", **change}, legacy=True)
    assert [p.field for p in err.value.problems] == [field]
