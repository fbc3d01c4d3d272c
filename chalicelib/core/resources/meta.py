"""What every resource kind shares: the Kubernetes envelope, names, admission (uid, generation,
creationTimestamp).
The API shape and the storage item are ``ResourceKind``'s (kind.py)."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import replace
from datetime import datetime
from typing import Any, NamedTuple, Protocol, TypeVar

from chalicelib.core.clock import rfc3339
from chalicelib.core.errors import Problem
from chalicelib.core.names import name_problems, namespace_problems, quote
from chalicelib.core.resources.fields import json_object, string_map, unknown_fields


class ResourceMeta(Protocol):
    """What every stored resource carries in its ``metadata``."""

    @property
    def name(self) -> str: ...
    @property
    def namespace(self) -> str: ...
    @property
    def uid(self) -> str: ...
    @property
    def generation(self) -> int: ...
    @property
    def creation_timestamp(self) -> str: ...
    @property
    def labels(self) -> Mapping[str, str]: ...
    @property
    def annotations(self) -> Mapping[str, str]: ...


R = TypeVar("R", bound=ResourceMeta)


def format_timestamp(moment: datetime) -> str:
    """RFC 3339 in UTC to the second, as Kubernetes writes ``creationTimestamp``."""
    return rfc3339(moment, "seconds")


# --- parsing -------------------------------------------------------------------------------------


class Envelope(NamedTuple):
    name: str
    labels: dict[str, str]
    annotations: dict[str, str]
    spec: Mapping[str, Any]


def envelope(
    namespace: str,
    body: object,
    api_version: str,
    kind: str,
    path_name: str | None,
    problems: list[Problem],
) -> Envelope:
    """The name, labels, annotations and spec of a request body, with the problems of its
    envelope: the namespace, the top-level fields, ``apiVersion``, ``kind``, the name (the one in
    the path, which a body name must match, or the body's on a POST) and a body namespace that
    differs from the path's."""
    problems += namespace_problems(namespace, "metadata.namespace")
    if not isinstance(body, Mapping):
        problems.append(Problem("body", f"a {kind} must be a JSON object"))
        return Envelope(_name({}, path_name, problems), {}, {}, {})
    unknown_fields(body, ("apiVersion", "kind", "metadata", "spec", "status"), "", problems)
    if body.get("apiVersion", api_version) != api_version:
        problems.append(Problem("apiVersion", f'must be "{api_version}"'))
    if body.get("kind", kind) != kind:
        problems.append(Problem("kind", f'must be "{kind}"'))
    meta = json_object(body.get("metadata"), "metadata", problems)
    body_namespace = meta.get("namespace")
    if body_namespace is not None and body_namespace != namespace:
        problems.append(
            Problem(
                "metadata.namespace",
                f"{quote(body_namespace)} does not match the namespace in the path "
                f"({quote(namespace)})",
            )
        )
    spec = json_object(body.get("spec"), "spec", problems)
    name = _name(meta, path_name, problems)
    labels = string_map(meta.get("labels"), "metadata.labels", problems)
    annotations = string_map(meta.get("annotations"), "metadata.annotations", problems)
    return Envelope(name, labels, annotations, spec)


def _name(meta: Mapping[str, Any], path_name: str | None, problems: list[Problem]) -> str:
    body_name = meta.get("name")
    if path_name is None:
        problems += name_problems(body_name, "metadata.name")
        return body_name if isinstance(body_name, str) else ""
    problems += name_problems(path_name, "metadata.name")
    if body_name is not None and body_name != path_name:
        problems.append(
            Problem(
                "metadata.name",
                f"{quote(body_name)} does not match the name in the path ({quote(path_name)})",
            )
        )
    return path_name


def choice(
    value: object, choices: tuple[str, ...], path: str, problems: list[Problem]
) -> str | None:
    if value is None:
        return None
    if value not in choices:
        expected = " or ".join(f'"{c}"' for c in choices)
        problems.append(Problem(path, f"must be {expected}, got {quote(value)}"))
        return None
    return str(value)


# --- admission -----------------------------------------------------------------------------------


def admitted(
    parsed: R,
    existing: R | None,
    *,
    uid: str,
    now: datetime,
    configuration: Callable[[R], object],
) -> R:
    """The resource to store: ``uid``, generation 1 and ``now`` on create; on update the stored
    uid and creationTimestamp, and the generation bumped only when the ``configuration`` (its spec
    JSON, say) of ``parsed`` differs from that of ``existing``.
    """
    if existing is None:
        return replace(  # type: ignore[type-var]
            parsed, uid=uid, generation=1, creation_timestamp=format_timestamp(now)
        )
    bump = 1 if configuration(parsed) != configuration(existing) else 0
    return replace(  # type: ignore[type-var]
        parsed,
        uid=existing.uid,
        creation_timestamp=existing.creation_timestamp,
        generation=existing.generation + bump,
    )


def immutable_problem(path: str, old: object, new: object, kind: str) -> Problem:
    return Problem(
        path,
        f"is immutable: it is {json.dumps(old)} and the update sets {json.dumps(new)}; "
        f"delete and re-create the {kind} to change it",
    )
