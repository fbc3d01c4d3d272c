"""The JSON ``data`` of an event, as filters see it (``eventPattern``'s ``data`` and CESQL's
``data.`` paths).

An event has JSON data when it arrived in structured mode with a JSON ``data`` member (its
``datacontenttype`` JSON or absent), or when its bytes (binary mode, ``data_base64``) are declared
JSON by ``datacontenttype`` (``*/json``, ``*/*+json``) and parse as JSON within the broker's JSON
limits. Bytes without a JSON content type, bytes that do not parse, and events without data have
none (``ABSENT``): terms that read data then simply do not match.

Parsing bytes once per event, not once per trigger: the last event's answer is remembered (one
entry, so the cache is bounded by one event, already bounded by the ingress size limit).
"""

from __future__ import annotations

import json
from typing import Any

from chalicelib.core.cloudevents.event import ABSENT, CloudEvent
from chalicelib.core.cloudevents.json_format import is_json_content_type
from chalicelib.core.limits import MAX_JSON_DEPTH, json_depth

_last: tuple[CloudEvent | None, Any] = (None, ABSENT)


def json_data(event: CloudEvent) -> Any:
    """The event's data as a JSON value (``None`` for JSON null), or ``ABSENT``."""
    global _last
    if event.json_data is not ABSENT:
        return event.json_data
    raw = event.data
    if raw is None:
        return ABSENT
    content_type = event.attributes.get("datacontenttype")
    if not isinstance(content_type, str) or not is_json_content_type(content_type):
        return ABSENT
    seen, value = _last
    if seen is event:
        return value
    value = _parse(raw)
    _last = (event, value)
    return value


def _parse(raw: bytes) -> Any:
    if json_depth(raw) > MAX_JSON_DEPTH:
        return ABSENT
    try:
        return json.loads(raw)
    except ValueError:  # UnicodeDecodeError and JSONDecodeError: declared JSON, but it is not
        return ABSENT


MAX_PATH_SEGMENTS = 32


def lookup(value: Any, path: tuple[str, ...]) -> Any:
    """The JSON value at ``path`` (object members by name; an all-digit segment also indexes an
    array), or ``ABSENT``."""
    for segment in path:
        if isinstance(value, dict):
            value = value.get(segment, ABSENT)
        elif isinstance(value, list) and segment.isdigit() and int(segment) < len(value):
            value = value[int(segment)]
        else:
            return ABSENT
        if value is ABSENT:
            return ABSENT
    return value


def data_at(event: CloudEvent, path: tuple[str, ...]) -> Any:
    """The value at ``data.<path>`` of the event's JSON data, or ``ABSENT``."""
    data = json_data(event)
    return ABSENT if data is ABSENT else lookup(data, path)


def data_text(event: CloudEvent, dotted: str) -> str | None:
    """The text the trigger index files a ``data.a.b`` hint under: a string as is, an integer
    (or integral number) within 32 bits in decimal, a boolean as ``true``/``false``; ``None``
    for anything else, which no exact CESQL term can equal without an error."""
    value = data_at(event, tuple(dotted.split(".")[1:]))
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    number = integral(value)
    return None if number is None else str(number)


def integral(value: Any) -> int | None:
    """A JSON number as a CESQL Integer (32-bit), or ``None`` if it is not one."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if isinstance(value, float):
        if not value.is_integer():
            return None
        value = int(value)
    return value if -(2**31) <= value < 2**31 else None
