"""CloudEvents over HTTP: binary, structured and batch modes, the JSON format, and validation.

Pure functions over ``(headers, body)``. Decoding collects every problem and raises one
``ValidationError``; it never reshapes what the producer sent (no invented ``id`` or ``time``, no
version upgrade, data kept byte-identical or JSON-equal). The cloudevents SDK is deliberately not
used here: it fills in missing attributes and rewrites data (specs/knative-semantics-notes.md §3).

Modes come from ``Content-Type`` (media type, case-insensitive, parameters ignored):
``application/cloudevents+json`` is structured, ``application/cloudevents-batch+json`` is a batch,
anything else is binary, which needs ``ce-specversion``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from chalicelib.core.cloudevents.context_attributes import (
    V1_0,
    VERSIONS,
    SpecVersion,
    check_attributes,
    resolve_version,
)
from chalicelib.core.cloudevents.event import ABSENT, CloudEvent, MapValue
from chalicelib.core.cloudevents.json_format import (
    dumps_utf8,
    event_from_object,
    is_json_content_type,
    parse_json,
    to_json,
    to_wire_json,
)
from chalicelib.core.cloudevents.percent_encoding import (
    NEEDS_ENCODING,
    canonical_string,
    decode_header_value,
    encode_header_value,
    map_headers,
)
from chalicelib.core.errors import PayloadTooLargeError, Problem, ValidationError

__all__ = [
    "BATCH_CONTENT_TYPE",
    "DEFAULT_LIMITS",
    "STRUCTURED_CONTENT_TYPE",
    "Limits",
    "canonical_string",
    "decode_http",
    "decode_response",
    "encode_binary",
    "encode_structured",
    "from_json",
    "is_json_content_type",
    "to_json",
    "validate",
]

STRUCTURED_CONTENT_TYPE = "application/cloudevents+json"
BATCH_CONTENT_TYPE = "application/cloudevents-batch+json"
_CE = "ce-"


@dataclass(frozen=True)
class Limits:
    max_body_bytes: int = 4 * 1024 * 1024
    max_header_count: int = 100
    max_header_bytes: int = 16 * 1024  # names + values, counted in characters
    max_batch_length: int = 100


DEFAULT_LIMITS = Limits()


def decode_http(
    headers: Mapping[str, str],
    body: bytes,
    *,
    legacy: bool = False,
    limits: Limits = DEFAULT_LIMITS,
) -> list[CloudEvent]:
    """Decode a request into its events (one, or 0..N for a batch); all valid or an error."""
    lowered = _lower_headers(headers, body, limits)
    media_type = _media_type(lowered.get("content-type"))
    if media_type == STRUCTURED_CONTENT_TYPE:
        return [_decode_structured(body, legacy)]
    if media_type == BATCH_CONTENT_TYPE:
        return _decode_batch(body, legacy, limits)
    return [_decode_binary(lowered, body, legacy, media_type)]


def decode_response(
    headers: Mapping[str, str],
    body: bytes,
    *,
    legacy: bool = False,
    limits: Limits = DEFAULT_LIMITS,
) -> CloudEvent | None:
    """A subscriber's reply: None unless it claims to be a CloudEvent (``ce-specversion`` or a
    CloudEvents content type); a batch reply is refused."""
    lowered = _lower_headers(headers, body, limits)
    media_type = _media_type(lowered.get("content-type"))
    if media_type == STRUCTURED_CONTENT_TYPE:
        return _decode_structured(body, legacy)
    if media_type.startswith("application/cloudevents"):
        if "ce-specversion" in lowered:
            return _decode_binary(lowered, body, legacy, media_type)
        raise ValidationError([Problem("content-type", f"unsupported reply format {media_type}")])
    if "ce-specversion" not in lowered:
        return None
    return _decode_binary(lowered, body, legacy, media_type)


def validate(event: CloudEvent, *, legacy: bool = False) -> list[Problem]:
    """Every problem with an in-memory event, by attribute name (empty list: valid)."""
    problems: list[Problem] = []
    version, why = resolve_version(event.attributes.get("specversion"), legacy)
    if why is not None:
        problems.append(Problem("specversion", why))
    check_attributes(event.attributes, version or V1_0, _same, problems)
    if event.data is not None and event.json_data is not ABSENT:
        problems.append(Problem("data", "an event holds either bytes or JSON data, not both"))
    if event.data is not None and not isinstance(event.data, bytes):
        problems.append(Problem("data", "binary data must be bytes"))
    return problems


def from_json(
    obj: Mapping[str, Any], *, legacy: bool = False, checked: bool = True, owned: bool = False
) -> CloudEvent:
    """Decode one JSON-format object (already parsed); raises ValidationError. ``checked`` and
    ``owned``: see ``codec_json.event_from_object``."""
    problems: list[Problem] = []
    if type(obj) is not dict:
        obj, owned = dict(obj), True
    event = event_from_object(obj, legacy, "", problems, owned=owned, checked=checked)
    if event is None:
        raise ValidationError(problems)
    return event


def encode_binary(event: CloudEvent, *, omit: str = "") -> tuple[dict[str, str], bytes]:
    """Binary mode: ``Content-Type`` from the data content type, every other attribute (but
    ``omit``) as a percent-encoded ``ce-`` header. JSON data becomes its compact serialisation,
    with ``application/json`` made explicit when the event had no content type (json-format
    §3.1.2)."""
    content_type_attr = VERSIONS.get(event.specversion, V1_0).content_type_attr
    attrs = event.attributes
    # The common case first: every attribute a string that needs no percent-encoding.
    headers = {_CE + name: value for name, value in attrs.items() if type(value) is str}
    strings = len(attrs) - (omit in attrs and type(attrs[omit]) is not str)
    if len(headers) == strings:
        content_type = headers.pop(_CE + content_type_attr, None)
        if omit:
            headers.pop(_CE + omit, None)
        if NEEDS_ENCODING.search("".join(headers.values())) is None:
            if content_type is not None and omit != content_type_attr:
                headers["content-type"] = content_type
            return _with_data(event, headers)
    headers = {}
    for name, value in attrs.items():
        if name == omit:
            continue
        if name == content_type_attr:
            headers["content-type"] = canonical_string(value)
        elif type(value) is MapValue:
            for header, text in map_headers(name, value, _CE):
                headers[header] = encode_header_value(text)
        else:
            headers[_CE + name] = encode_header_value(canonical_string(value))
    return _with_data(event, headers)


def _with_data(event: CloudEvent, headers: dict[str, str]) -> tuple[dict[str, str], bytes]:
    if event.json_data is not ABSENT:
        headers.setdefault("content-type", "application/json")
        return headers, dumps_utf8(event.json_data)
    return headers, event.data or b""


def encode_structured(event: CloudEvent) -> tuple[dict[str, str], bytes]:
    return {"content-type": STRUCTURED_CONTENT_TYPE}, dumps_utf8(to_wire_json(event))


def _same(name: str) -> str:
    return name


def _lower_headers(headers: Mapping[str, str], body: bytes, limits: Limits) -> dict[str, str]:
    if len(body) > limits.max_body_bytes:
        raise PayloadTooLargeError(
            f"body of {len(body)} bytes exceeds the limit of {limits.max_body_bytes} bytes"
        )
    if len(headers) > limits.max_header_count:
        raise ValidationError([Problem("headers", f"more than {limits.max_header_count} headers")])
    lowered = {name.lower(): value for name, value in headers.items()}
    problems: list[Problem] = []
    if len(lowered) != len(headers):
        seen: dict[str, str] = {}
        for name, value in headers.items():
            if seen.setdefault(name.lower(), value) != value:
                problems.append(Problem(name.lower(), "header given twice with different values"))
    size = sum(map(len, lowered)) + sum(map(len, lowered.values()))
    if size > limits.max_header_bytes:
        problems.append(Problem("headers", f"headers exceed {limits.max_header_bytes} bytes"))
    if problems:
        raise ValidationError(problems)
    return lowered


def _media_type(content_type: str | None) -> str:
    if not content_type:
        return ""
    return content_type.split(";", 1)[0].strip().lower()


def _decode_structured(body: bytes, legacy: bool) -> CloudEvent:
    problems: list[Problem] = []
    event = structured_event(body, legacy, "body", problems)
    if event is None:
        raise ValidationError(problems)
    return event


def structured_event(
    data: bytes, legacy: bool, field: str, problems: list[Problem]
) -> CloudEvent | None:
    """A structured-mode event (the JSON format) from ``data`` (HTTP's body, a Kafka record's
    value); None with its problems named, JSON syntax under ``field``."""
    try:
        obj = parse_json(data)
    except ValueError as exc:
        problems.append(Problem(field, str(exc)))
        return None
    return event_from_object(obj, legacy, "", problems, owned=True)


def binary_rules(
    attrs: Mapping[str, Any], legacy: bool, media_type: str, header: str, problems: list[Problem]
) -> SpecVersion:
    """The rules a binary-mode event is judged by: its specversion's, or 1.0's with the problem
    named under ``header`` (the binding's name for it: ``ce-specversion``, ``ce_specversion``)."""
    version, why = resolve_version(attrs.get("specversion"), legacy)
    if why is not None:
        if "specversion" not in attrs:
            why = f"binary mode needs the {header} header"
            if media_type.startswith("application/cloudevents"):
                why = f"unsupported event format {media_type} (and no {header} header)"
        problems.append(Problem(header, why))
    return version or V1_0


def _decode_batch(body: bytes, legacy: bool, limits: Limits) -> list[CloudEvent]:
    try:
        items = parse_json(body)
    except ValueError as exc:
        raise ValidationError([Problem("body", str(exc))]) from None
    if type(items) is not list:
        raise ValidationError([Problem("body", "a batch must be a JSON array")])
    if len(items) > limits.max_batch_length:
        raise ValidationError(
            [Problem("body", f"batch of {len(items)} events exceeds {limits.max_batch_length}")]
        )
    problems: list[Problem] = []
    events: list[CloudEvent] = []
    first_version: object = None
    for i, item in enumerate(items):
        event = event_from_object(item, legacy, f"[{i}].", problems, owned=True)
        if event is None:
            continue
        if first_version is None:
            first_version = event.specversion
        elif event.specversion != first_version:
            problems.append(
                Problem(f"[{i}].specversion", "all events in a batch need the same specversion")
            )
        events.append(event)
    if problems:
        raise ValidationError(problems)
    return events


def _decode_binary(
    headers: dict[str, str], body: bytes, legacy: bool, media_type: str
) -> CloudEvent:
    problems: list[Problem] = []
    attrs: dict[str, Any] = {}
    for header, raw in headers.items():
        if header.startswith(_CE):
            try:
                attrs[header[3:]] = decode_header_value(raw)
            except ValueError as exc:
                problems.append(Problem(header, str(exc)))
    rules = binary_rules(attrs, legacy, media_type, "ce-specversion", problems)
    content_type_attr = rules.content_type_attr
    if content_type_attr in attrs:
        problems.append(
            Problem(_CE + content_type_attr, "not allowed in binary mode: use Content-Type")
        )
    if rules.allows_maps:
        _fold_maps(attrs, problems)
    content_type = headers.get("content-type", "").strip()
    if content_type:
        attrs[content_type_attr] = content_type

    def field(name: str) -> str:
        return "content-type" if name == content_type_attr else _CE + name

    check_attributes(attrs, rules, field, problems)
    if problems:
        raise ValidationError(problems)
    return CloudEvent(attrs, body or None)


def _fold_maps(attrs: dict[str, Any], problems: list[Problem]) -> None:
    """0.3 binding §3.1.3.1: ``ce-<map>-<key>`` headers are the entries of Map ``<map>``."""
    maps: dict[str, dict[str, str]] = {}
    for name in [n for n in attrs if "-" in n]:
        map_name, _, key = name.partition("-")
        maps.setdefault(map_name, {})[key] = attrs.pop(name)
    for map_name, entries in maps.items():
        if map_name in attrs:
            problems.append(Problem(_CE + map_name, "both a value and Map entries were given"))
        else:
            attrs[map_name] = MapValue.of(entries)
