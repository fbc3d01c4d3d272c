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
