"""CloudEvents <-> Kafka records (Kafka protocol binding 1.0).

Mode from the ``content-type`` header: ``application/cloudevents+json`` is structured (the value is
a JSON-format event), anything else, or no header, is binary: ``ce_<name>`` headers carry the
attributes as UTF-8 text (no percent-encoding: Kafka headers are bytes), ``content-type`` maps to
``datacontenttype`` and the value is the data, byte for byte; a record without a value is an event
without data. Header names are matched case-insensitively. The record key is never turned into an
attribute; on the way out an opt-in key mapper copies ``partitionkey`` into the key (§3.1).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from chalicelib.core.cloudevents.codec import (
    DEFAULT_LIMITS,
    STRUCTURED_CONTENT_TYPE,
    Limits,
    binary_rules,
    canonical_string,
    structured_event,
)
from chalicelib.core.cloudevents.context_attributes import V1_0, VERSIONS, check_attributes
from chalicelib.core.cloudevents.event import ABSENT, CloudEvent
from chalicelib.core.cloudevents.json_format import dumps_utf8, to_wire_json
from chalicelib.core.errors import PayloadTooLargeError, Problem, ValidationError

_CE = "ce_"
_STRUCTURED_HEADER = ("content-type", b"application/cloudevents+json; charset=UTF-8")


@dataclass(frozen=True)
class KafkaRecord:
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes], ...] = ()


def decode_record(
    record: KafkaRecord, *, legacy: bool = False, limits: Limits = DEFAULT_LIMITS
) -> CloudEvent:
    value = record.value
    if value is not None and len(value) > limits.max_body_bytes:
        raise PayloadTooLargeError(
            f"record value of {len(value)} bytes exceeds {limits.max_body_bytes} bytes"
        )
    problems: list[Problem] = []
    attrs: dict[str, Any] = {}
    content_type: str | None = None
    for name, raw in record.headers:
        key = name.lower()
        if key != "content-type" and not key.startswith(_CE):
            continue
        try:
            text = raw.decode("utf-8")
        except (UnicodeDecodeError, AttributeError):
            problems.append(Problem(key, "header value is not UTF-8 text"))
            continue
        if key == "content-type":
            if content_type is not None and content_type != text:
                problems.append(Problem(key, "header given twice with different values"))
            content_type = text
        elif attrs.setdefault(key[3:], text) != text:
            problems.append(Problem(key, "header given twice with different values"))
    media_type = (content_type or "").split(";", 1)[0].strip().lower()
    if media_type == STRUCTURED_CONTENT_TYPE:
        event = _structured(value, legacy, problems)
    elif media_type.startswith("application/cloudevents-batch"):
        problems.append(Problem("content-type", "the Kafka binding has no batch mode"))
        event = None
    else:
        event = _binary(attrs, content_type, value, legacy, media_type, problems)
    if event is None or problems:
        raise ValidationError(problems)
    return event


def encode_binary_record(event: CloudEvent, *, key_from_partitionkey: bool = True) -> KafkaRecord:
    content_type_attr = VERSIONS.get(event.specversion, V1_0).content_type_attr
    headers: list[tuple[str, bytes]] = []
    for name, attr in event.attributes.items():
        header = "content-type" if name == content_type_attr else _CE + name
        headers.append((header, canonical_string(attr).encode("utf-8", "surrogatepass")))
    value = event.data
    if event.json_data is not ABSENT:
        if content_type_attr not in event.attributes:
            headers.append(("content-type", b"application/json"))
        value = dumps_utf8(event.json_data)
    return KafkaRecord(_key(event, key_from_partitionkey), value, tuple(headers))


def encode_structured_record(
    event: CloudEvent, *, key_from_partitionkey: bool = True
) -> KafkaRecord:
    value = dumps_utf8(to_wire_json(event))
    return KafkaRecord(_key(event, key_from_partitionkey), value, (_STRUCTURED_HEADER,))


def _key(event: CloudEvent, enabled: bool) -> bytes | None:
    partition_key = event.attributes.get("partitionkey") if enabled else None
    if partition_key is None:
        return None
    return canonical_string(partition_key).encode("utf-8", "surrogatepass")


def _structured(value: bytes | None, legacy: bool, problems: list[Problem]) -> CloudEvent | None:
    if value is None:
        problems.append(Problem("value", "a structured-mode record needs a value"))
        return None
    return structured_event(value, legacy, "value", problems)


def _binary(
    attrs: dict[str, Any],
    content_type: str | None,
    value: bytes | None,
    legacy: bool,
    media_type: str,
    problems: list[Problem],
) -> CloudEvent | None:
    rules = binary_rules(attrs, legacy, media_type, "ce_specversion", problems)
    content_type_attr = rules.content_type_attr
    if content_type and attrs.setdefault(content_type_attr, content_type) != content_type:
        problems.append(Problem(_CE + content_type_attr, "differs from the content-type header"))

    def field(name: str) -> str:
        return _CE + name

    check_attributes(attrs, rules, field, problems)
    return None if problems else CloudEvent(attrs, value)
