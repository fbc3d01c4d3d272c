"""A resource kind as data: its names and its pure functions (parse, admit, its spec's JSON). The
control plane serves every kind through one generic service driven by this; the API shape and the
storage item are the same for every kind, built here from ``spec_json``."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, Generic

from chalicelib.core.errors import ValidationError
from chalicelib.core.resources.meta import R


@dataclass(frozen=True)
class ResourceKind(Generic[R]):
    store_kind: str  # the ResourceStore's kind, and the word in error messages: "broker"
    api_version: str  # "eventing.knative.dev/v1"
    kind: str  # "Broker"
    plural: str  # "brokers": the path segment and the kind in a Status answer
    parse: Callable[[str, object, str | None], R]  # (namespace, body, name in the path)
    admit: Callable[[R, R | None, str, datetime], R]  # (parsed, stored, new uid, now)
    spec_json: Callable[[R], dict[str, Any]]
    # How a stored item is parsed again, when it differs from ``parse`` (checks that admission
    # made once, such as compiling filters, are not made again on every read).
    reparse: Callable[[str, dict[str, Any], str], R] | None = None

    @property
    def list_kind(self) -> str:
        return f"{self.kind}List"

    def to_json(self, res: R, status: Mapping[str, Any]) -> dict[str, Any]:
        """The resource in the Kubernetes shape: apiVersion, kind, metadata, spec, status."""
        metadata: dict[str, Any] = {
            "name": res.name,
            "namespace": res.namespace,
            "uid": res.uid,
            "generation": res.generation,
            "creationTimestamp": res.creation_timestamp,
        }
        if res.labels:
            metadata["labels"] = dict(res.labels)
        if res.annotations:
            metadata["annotations"] = dict(res.annotations)
        return {
            "apiVersion": self.api_version,
            "kind": self.kind,
            "metadata": metadata,
            "spec": self.spec_json(res),
            "status": dict(status),
        }

    def to_item(self, res: R) -> dict[str, Any]:
        """A plain JSON-able document to store (strings, ints, lists and dicts only: no floats, so
        DynamoDB takes it as is)."""
        return {
            "kind": self.kind,
            "namespace": res.namespace,
            "name": res.name,
            "uid": res.uid,
            "generation": res.generation,
            "creationTimestamp": res.creation_timestamp,
            "labels": dict(res.labels),
            "annotations": dict(res.annotations),
            "spec": self.spec_json(res),
        }

    def from_item(self, item: Mapping[str, Any]) -> R:
        """The resource ``to_item`` stored, parsed again with its identity restored; ValueError if
        the document does not validate."""
        namespace, name = str(item["namespace"]), str(item["name"])
        labels, annotations = item.get("labels") or {}, item.get("annotations") or {}
        body = {"metadata": {"labels": labels, "annotations": annotations}, "spec": item["spec"]}
        try:
            parsed = (self.reparse or self.parse)(namespace, body, name)
        except ValidationError as err:
            raise ValueError(
                f"stored {self.store_kind} {namespace}/{name} is invalid: {err.detail}"
            ) from err
        return replace(  # type: ignore[type-var]
            parsed,
            uid=str(item["uid"]),
            generation=int(item["generation"]),
            creation_timestamp=str(item["creationTimestamp"]),
        )
