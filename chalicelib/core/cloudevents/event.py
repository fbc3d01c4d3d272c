"""The CloudEvent value the broker carries from ingress to delivery.

The broker never reshapes what a producer sent: ``attributes`` holds every context attribute
(``specversion`` included, ``data`` excluded) with the JSON type it arrived with (binary mode gives
strings; structured mode may give integers and booleans for extensions), and the data is kept in
its original form: raw bytes for binary mode and ``data_base64``, or the parsed JSON value for
structured ``data`` (so it is re-emitted JSON-equal without guessing).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

AttributeValue = str | int | bool


class MapValue(str):
    """A ``Map``-typed attribute value (CloudEvents 0.3 and the legacy 0.1/0.2 seed spec), held as
    its compact JSON object text: the canonical string encoding of ``Map`` in those versions.

    Being a ``str`` keeps ``AttributeValue`` unchanged for code that only reads attributes, while
    the codec still knows to re-emit it as a JSON object in structured mode and to flatten it into
    ``ce-<name>-<key>`` headers in binary mode (0.3 HTTP binding §3.1.3.1).
    """

    __slots__ = ()

    def entries(self) -> dict[str, Any]:
        value = json.loads(self)
        if not isinstance(value, dict):
            raise ValueError("a MapValue holds a JSON object")
        return value

    @classmethod
    def of(cls, entries: Mapping[str, Any]) -> MapValue:
        return cls(json.dumps(entries, separators=(",", ":"), ensure_ascii=False))


class _Absent:
    """Marker for 'no structured JSON data' (distinct from JSON ``null``)."""

    _instance: _Absent | None = None

    def __new__(cls) -> _Absent:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "ABSENT"

    def __bool__(self) -> bool:
        return False


ABSENT: Any = _Absent()


@dataclass(frozen=True, slots=True)
class CloudEvent:
    """An event as received. Exactly one of ``data`` (bytes) and ``json_data`` is used:

    - ``data`` is the raw payload (binary-mode body, decoded ``data_base64``, or a structured
      string ``data`` encoded as UTF-8 when the content type is not JSON); ``None`` = no data.
    - ``json_data`` is a structured-mode ``data`` member whose content type is JSON (or absent);
      ``ABSENT`` when not used. JSON ``null`` is kept as ``None``.
    """

    attributes: Mapping[str, AttributeValue]
    data: bytes | None = None
    json_data: Any = field(default=ABSENT)

    @property
    def specversion(self) -> str:
        return str(self.attributes.get("specversion", ""))

    @property
    def id(self) -> str:
        return str(self.attributes.get("id", ""))

    @property
    def source(self) -> str:
        return str(self.attributes.get("source", ""))

    @property
    def type(self) -> str:
        return str(self.attributes.get("type", ""))

    def get(self, name: str) -> AttributeValue | None:
        return self.attributes.get(name)

    @property
    def has_json_data(self) -> bool:
        return self.json_data is not ABSENT

    def replace_attributes(
        self, set: Mapping[str, AttributeValue] | None = None, remove: Iterable[str] = ()
    ) -> CloudEvent:
        """A copy with attributes added/overwritten and others removed; the data is shared."""
        attrs = dict(self.attributes)
        for name in remove:
            attrs.pop(name, None)
        if set:
            attrs.update(set)
        return CloudEvent(attrs, self.data, self.json_data)
