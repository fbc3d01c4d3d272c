"""A Destination's ``ref`` (Knative's KReference): the kinds of this namespace a subscriber or a
dead-letter sink may name instead of a ``uri``, resolved by the broker when it routes
(services/routing.py), since there is no Kubernetes here to resolve them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

from chalicelib.core.errors import Problem
from chalicelib.core.names import name_problems
from chalicelib.core.resources.fields import json_object as _object
from chalicelib.core.resources.fields import unknown_fields as _unknown_fields


class RefKind(NamedTuple):
    api_version: str
    kind: str


TRANSFORM = RefKind("eventing.knative.dev/v1alpha1", "EventTransform")  # docs/transforms.md
SINK = RefKind("sinks.knative.dev/v1alpha1", "IntegrationSink")  # docs/targets.md


def parse_ref(
    value: Mapping[str, object],
    path: str,
    namespace: str | None,
    kinds: tuple[RefKind, ...],
    problems: list[Problem],
) -> tuple[RefKind, str] | None:
    """The kind and name ``value["ref"]`` names, one of ``kinds`` in ``namespace``; None with
    the problems said. ``value`` is the Destination, which has nothing beside its ref.
    ``namespace``: the resource's, which a ref may repeat; None when the parser does not know it
    (a broker's or trigger's delivery), where a ref names no namespace."""
    _unknown_fields(value, ("ref",), path, problems)
    ref = _object(value.get("ref"), f"{path}.ref", problems)
    _unknown_fields(ref, ("apiVersion", "kind", "name", "namespace"), f"{path}.ref", problems)
    kind = next(
        (k for k in kinds if (ref.get("apiVersion"), ref.get("kind")) == (k.api_version, k.kind)),
        None,
    )
    if kind is None:
        named = " or ".join(f'{k.kind} (apiVersion "{k.api_version}")' for k in kinds)
        problems.append(
            Problem(
                f"{path}.ref",
                f"only a ref to an {named} is supported; for anything else put its absolute "
                "http(s) URL or ARN in uri",
            )
        )
    if "namespace" in ref and ref.get("namespace") != namespace:
        problems.append(
            Problem(f"{path}.ref.namespace", "must be the same namespace (or left out)")
        )
    what = f"{kind.kind} name" if kind else "name"
    found = name_problems(ref.get("name"), f"{path}.ref.name", what=what)
    problems += found
    if kind is None or found:
        return None
    return kind, str(ref.get("name"))


def ref_json(kind: RefKind, name: str) -> dict[str, dict[str, str]]:
    return {"ref": {"apiVersion": kind.api_version, "kind": kind.kind, "name": name}}
