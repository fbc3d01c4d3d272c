"""The log sink of an IntegrationSink (``spec.log``, Knative's; docs/targets.md): each event
written as one structured line of the delivery function's log instead of being sent anywhere.

Its address is a ``log:`` URI in the form of the Camel log component Knative runs for it
(``log:NAME?level=INFO&showHeaders=false&...``): the trigger's route carries it like any other
target URI, and this module reads it back. Pure: the line is built here, written by
services/delivery_aws.py. Bounded: an attribute value is cut at MAX_VALUE_CHARS, the data at
MAX_DATA_CHARS, and the cut is said in the line."""

from __future__ import annotations

import base64
import json
import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, quote, urlencode

from chalicelib.core.cloudevents.event import CloudEvent

SCHEME = "log:"
# Camel's LoggingLevel, and the Python level each writes at (TRACE has none: DEBUG's).
LEVELS: dict[str, int | None] = {
    "TRACE": logging.DEBUG,
    "DEBUG": logging.DEBUG,
    "INFO": logging.INFO,
    "WARN": logging.WARNING,
    "ERROR": logging.ERROR,
    "OFF": None,
}
LOGGER_NAME = re.compile(r"[A-Za-z0-9._-]{1,128}")
MARKER = re.compile(r"[A-Za-z0-9._-]{1,64}")
MAX_VALUE_CHARS = 1024
MAX_DATA_CHARS = 8192
MASK = "xxxxx"
# What logMask hides, as Camel's masking formatter does: values of keys naming a credential.
_SECRET_KEY = re.compile(r"pass(word|phrase)|secret|token|access_?key|api_?key", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class LogSpec:
    """``spec.log`` with Knative's defaults; the fields that have a meaning outside Camel."""

    logger_name: str = "log-sink"
    level: str = "INFO"
    show_headers: bool = False  # the event's attributes (Camel's headers are ce-* attributes)
    show_body: bool = True  # the event's data
    multiline: bool = False  # the message puts each part on a line of its own
    log_mask: bool = False  # values of credential-like keys are masked
    marker: str | None = None

    def uri(self) -> str:
        """The sink's address (status.address.url, the trigger's subscriberUri)."""
        options: list[tuple[str, str]] = [
            ("level", self.level),
            ("showHeaders", _flag(self.show_headers)),
            ("showBody", _flag(self.show_body)),
            ("multiline", _flag(self.multiline)),
            ("logMask", _flag(self.log_mask)),
        ]
        if self.marker is not None:
            options.append(("marker", self.marker))
        return f"{SCHEME}{quote(self.logger_name, safe='')}?{urlencode(options)}"


def _flag(value: bool) -> str:
    return "true" if value else "false"


def parse_uri(uri: str) -> LogSpec | None:
    """The LogSpec a ``log:`` URI of ``LogSpec.uri`` names; None for anything else."""
    if not uri.startswith(SCHEME):
        return None
    name, _, query = uri[len(SCHEME) :].partition("?")
    options = dict(parse_qsl(query))
    level = options.get("level", "INFO")
    marker = options.get("marker")
    if not LOGGER_NAME.fullmatch(name) or level not in LEVELS:
        return None
    if marker is not None and not MARKER.fullmatch(marker):
        return None
    return LogSpec(
        logger_name=name,
        level=level,
        show_headers=options.get("showHeaders") == "true",
        show_body=options.get("showBody", "true") == "true",
        multiline=options.get("multiline") == "true",
        log_mask=options.get("logMask") == "true",
        marker=marker,
    )


@dataclass(frozen=True, slots=True)
class LogLine:
    level: int
    message: str
    keys: dict[str, Any]  # the line's structured keys (``extra``)


def line(spec: LogSpec, event: CloudEvent, trigger: str) -> LogLine | None:
    """The line that writes ``event``; None when the level is OFF (the event is dropped)."""
    level = LEVELS[spec.level]
    if level is None:
        return None
    keys: dict[str, Any] = {
        "sink_logger": spec.logger_name,
        "trigger": trigger,
        "event_id": _cut(event.id)[0],
        "event_source": _cut(event.source)[0],
        "event_type": _cut(event.type)[0],
    }
    if spec.marker is not None:
        keys["marker"] = spec.marker
    parts = [f"event {keys['event_id']} of type {keys['event_type']} from {keys['event_source']}"]
    if spec.show_headers:
        attributes: dict[str, str] = {}
        for name, value in event.attributes.items():
            text = MASK if spec.log_mask and _SECRET_KEY.search(name) else str(value)
            attributes[name] = _cut(text)[0]
        keys["attributes"] = attributes
        parts.append("attributes: " + json.dumps(attributes, sort_keys=True))
    if spec.show_body and (event.data is not None or event.has_json_data):
        data, cut = _cut(_data_text(event, spec.log_mask), MAX_DATA_CHARS)
        keys["data"] = data
        if cut:
            keys["data_truncated"] = True
        parts.append(f"data: {data}")
    separator = "\n" if spec.multiline else ", "
    return LogLine(level, separator.join(parts), keys)


def _data_text(event: CloudEvent, mask: bool) -> str:
    if event.has_json_data:
        value = event.json_data
    else:
        data = event.data or b""
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            return "base64:" + base64.b64encode(data[:MAX_DATA_CHARS]).decode()
        if not mask or "json" not in str(event.get("datacontenttype") or "").lower():
            return text
        try:
            value = json.loads(text)
        except (ValueError, RecursionError):  # not JSON after all: shown as it came
            return text
    return json.dumps(_masked(value) if mask else value, ensure_ascii=False)


def _masked(value: Any) -> Any:
    """``value`` with the values of credential-like keys masked."""
    if isinstance(value, Mapping):
        return {k: MASK if _SECRET_KEY.search(str(k)) else _masked(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_masked(v) for v in value]
    return value


def _cut(text: str, limit: int = MAX_VALUE_CHARS) -> tuple[str, bool]:
    return (text, False) if len(text) <= limit else (text[:limit], True)
