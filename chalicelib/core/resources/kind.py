"""A resource kind as data: its names and its pure functions (parse, admit, the API shape and the
storage item). The control plane serves every kind through one generic service driven by this."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Generic

from chalicelib.core.resources.meta import R


@dataclass(frozen=True)
class ResourceKind(Generic[R]):
    store_kind: str  # the ResourceStore's kind, and the word in error messages: "broker"
    api_version: str  # "eventing.knative.dev/v1"
    kind: str  # "Broker"
    plural: str  # "brokers": the path segment and the kind in a Status answer
    parse: Callable[[str, object, str | None], R]  # (namespace, body, name in the path)
    admit: Callable[[R, R | None, str, datetime], R]  # (parsed, stored, new uid, now)
    to_json: Callable[[R, Mapping[str, Any]], dict[str, Any]]  # (resource, status)
    to_item: Callable[[R], dict[str, Any]]
    from_item: Callable[[Mapping[str, Any]], R]

    @property
    def list_kind(self) -> str:
        return f"{self.kind}List"
