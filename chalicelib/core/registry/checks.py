"""Small typed checks shared by the endpoint and message validators of the xRegistry endpoint
registry: each appends a Problem (dotted field path, message) and returns the value when it is
usable, so that a validator reports every problem of a document at once."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from datetime import datetime
from typing import Any

from chalicelib.core.clock import rfc3339
from chalicelib.core.cloudevents.context_attributes import (
    is_absolute_uri,
    is_media_type,
    is_rfc3339,
)
from chalicelib.core.cloudevents.context_attributes import is_uri_reference as _is_uri_reference
from chalicelib.core.errors import Problem
from chalicelib.core.names import quote

# core spec "<SINGULAR>id": RFC 3986 unreserved characters, ':' or '@'; starts with ALPHA, DIGIT
# or '_'; 1 to 128 characters.
ID_PATTERN = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._~:@-]{0,127}")
# core spec "Attributes": 1 to 63 of [a-z0-9_], not starting with a digit.
ATTRIBUTE_PATTERN = re.compile(r"[a-z_][a-z0-9_]{0,62}")
# core spec "map" keys: 1 to 63 of [a-z0-9:-_.], starting with a letter or digit.
MAP_KEY_PATTERN = re.compile(r"[a-z0-9][a-z0-9:._-]{0,62}")
# RFC 9110 token: a method or header field name.
TOKEN_PATTERN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
# RFC 6570 level 1 expressions, which any protocol option string may hold.
_PLACEHOLDER = re.compile(r"\{[A-Za-z0-9_.%]+\}")


class Checks:
    """Collects problems under a path prefix."""

    def __init__(self, problems: list[Problem], prefix: str = "") -> None:
        self.problems = problems
        self.prefix = prefix

    def at(self, key: str) -> str:
        if not key:
            return self.prefix or "body"
        return f"{self.prefix}.{key}" if self.prefix else key

    def under(self, key: str) -> Checks:
        return Checks(self.problems, self.at(key))

    def add(self, key: str, message: str) -> None:
        self.problems.append(Problem(self.at(key), message))

    # ---- shapes ---------------------------------------------------------------------------------

    def object(self, doc: Mapping[str, Any], key: str) -> dict[str, Any] | None:
        value = doc.get(key)
        if value is None:
            return None
        if not isinstance(value, Mapping):
            self.add(key, f"must be an object, got {quote(value)}")
            return None
        return dict(value)

    def string(self, doc: Mapping[str, Any], key: str, *, non_empty: bool = True) -> str | None:
        value = doc.get(key)
        if value is None:
            return None
        if not isinstance(value, str):
            self.add(key, f"must be a string, got {quote(value)}")
            return None
        if non_empty and not value:
            self.add(key, "must be a non-empty string")
            return None
        return value

    def boolean(self, doc: Mapping[str, Any], key: str) -> bool | None:
        value = doc.get(key)
        if value is None:
            return None
        if not isinstance(value, bool):
            self.add(key, f"must be true or false, got {quote(value)}")
            return None
        return value

    def integer(
        self, doc: Mapping[str, Any], key: str, low: int | None = None, high: int | None = None
    ) -> int | None:
        value = doc.get(key)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int):
            self.add(key, f"must be an integer, got {quote(value)}")
            return None
        if (low is not None and value < low) or (high is not None and value > high):
            bounds = f"from {low} to {high}" if high is not None else f"at least {low}"
            self.add(key, f"must be an integer {bounds}, got {value}")
            return None
        return value

    def choice(self, doc: Mapping[str, Any], key: str, allowed: Sequence[Any]) -> Any:
        value = doc.get(key)
        if value is None:
            return None
        if isinstance(value, bool) or value not in allowed:
            shown = ", ".join(quote(a) for a in allowed)
            self.add(key, f"must be one of {shown} (case-sensitive), got {quote(value)}")
            return None
        return value

    def string_map(self, doc: Mapping[str, Any], key: str) -> dict[str, str] | None:
        """A map of non-empty strings to non-empty strings."""
        value = self.object(doc, key)
        if value is None:
            return None
        for k, v in value.items():
            if not k:
                self.add(key, "keys must be non-empty strings")
            if not isinstance(v, str) or not v:
                self.add(f"{key}.{k}", f"must be a non-empty string, got {quote(v)}")
        return value

    def objects(self, value: Any, key: str) -> Iterator[tuple[Checks, Mapping[str, Any]]]:
        """Each object of the array ``value`` (found at ``key``) with the checks under its index;
        a problem for every element that is not an object, or for a value that is not an array."""
        if not isinstance(value, list):
            self.add(key, f"must be an array of objects, got {quote(value)}")
            return
        for i, element in enumerate(value):
            at = self.under(f"{key}[{i}]")
            if isinstance(element, Mapping):
                yield at, element
            else:
                at.add("", f"must be an object, got {quote(element)}")

    def string_list(
        self, doc: Mapping[str, Any], key: str, *, non_empty: bool = False
    ) -> list[str] | None:
        value = doc.get(key)
        if value is None:
            return None
        if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
            self.add(key, f"must be an array of non-empty strings, got {quote(value)}")
            return None
        if non_empty and not value:
            self.add(key, "must be a non-empty array")
            return None
        return value

    # ---- value types ----------------------------------------------------------------------------

    def timestamp(self, doc: Mapping[str, Any], key: str) -> str | None:
        value = self.string(doc, key)
        if value is None:
            return None
        if not is_rfc3339(value):
            self.add(key, f"must be an RFC 3339 timestamp, got {quote(value)}")
            return None
        return normalize_timestamp(value)

    def url(self, doc: Mapping[str, Any], key: str, *, absolute: bool = False) -> str | None:
        value = self.string(doc, key)
        if value is None:
            return None
        ok = is_absolute_uri(value) if absolute else is_uri_reference(value)
        if not ok:
            what = "an absolute URI" if absolute else "a URI (absolute, or relative)"
            self.add(key, f"must be {what}, got {quote(value)}")
            return None
        return value

    def media_type(self, doc: Mapping[str, Any], key: str) -> str | None:
        value = self.string(doc, key)
        if value is not None and not is_media_type(value):
            self.add(
                key, f"must be an RFC 2046 media type such as application/json, got {quote(value)}"
            )
            return None
        return value

    def labels(self, doc: Mapping[str, Any], key: str = "labels") -> dict[str, str] | None:
        value = self.object(doc, key)
        if value is None:
            return None
        for k, v in value.items():
            if not MAP_KEY_PATTERN.fullmatch(k):
                self.add(
                    f"{key}.{k}",
                    "label keys are 1-63 of a-z, 0-9, ':', '-', '_', '.', starting with a letter "
                    "or digit",
                )
            if not isinstance(v, str):
                self.add(f"{key}.{k}", f"label values must be strings, got {quote(v)}")
        return value


def is_uri_reference(value: str) -> bool:
    return bool(value) and _is_uri_reference(value)


def without_placeholders(value: str) -> str:
    """``value`` with each RFC 6570 level 1 expression replaced by a harmless literal, so that a
    templated URI (``mqtt://{host}/t``) can be checked as a URI."""
    return _PLACEHOLDER.sub("x", value)


def normalize_timestamp(value: str) -> str:
    """RFC 3339 text in UTC with a ``Z`` (core spec: servers return UTC timestamps)."""
    text = value.replace("z", "Z").replace("t", "T")
    return rfc3339(datetime.fromisoformat(text.replace("Z", "+00:00")), "auto")


def check_attribute_names(doc: Mapping[str, Any], checks: Checks) -> None:
    for name in doc:
        if not isinstance(name, str) or not ATTRIBUTE_PATTERN.fullmatch(name):
            checks.add(
                str(name),
                "attribute names are 1-63 of a-z, 0-9 and '_', not starting with a digit",
            )
