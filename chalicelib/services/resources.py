"""The control plane's one shape for every resource kind (design.md §2.2): CRUD with validation
first (every problem at once), optimistic concurrency (``metadata.resourceVersion``), admission,
status computed when read and remembered when a condition changes, and the kind's own work
(provisioning, clean-up) in its ``Hooks``. Adding a kind is one core module with its
``ResourceKind``, one ``Hooks`` subclass and one container line."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Generic

from chalicelib.core.clock import utcnow
from chalicelib.core.errors import ConflictError, NotFoundError
from chalicelib.core.resources.kind import ResourceKind
from chalicelib.core.resources.meta import R
from chalicelib.ports import ResourceStore, StoredItem


@dataclass(frozen=True)
class Stored(Generic[R]):
    """A resource as stored: the typed value, the control plane's facts about it (``state``), the
    status last remembered, and the version that is its ``resourceVersion``."""

    resource: R
    state: Mapping[str, Any]
    status: Mapping[str, Any] | None
    version: int

    @property
    def namespace(self) -> str:
        return self.resource.namespace

    @property
    def name(self) -> str:
        return self.resource.name


class Resources(Generic[R]):
    """The store as typed resources of one kind: services never read storage documents."""

    def __init__(self, store: ResourceStore, kind: ResourceKind[R]) -> None:
        self._store = store
        self.kind = kind

    def get(self, namespace: str, name: str) -> Stored[R] | None:
        item = self._store.get(self.kind.store_kind, namespace, name)
        return self._typed(item) if item is not None else None

    def require(self, namespace: str, name: str) -> Stored[R]:
        found = self.get(namespace, name)
        if found is None:
            raise NotFoundError(f'{self.kind.store_kind} "{namespace}/{name}" does not exist')
        return found

    def list(self, namespace: str | None = None) -> list[Stored[R]]:
        return [self._typed(i) for i in self._store.list(self.kind.store_kind, namespace)]

    def put(
        self,
        resource: R,
        state: Mapping[str, Any],
        status: Mapping[str, Any] | None,
        expected_version: int | None,
    ) -> Stored[R]:
        """Store, or replace exactly ``expected_version`` (ConflictError otherwise)."""
        doc: dict[str, Any] = {"resource": self.kind.to_item(resource), "state": dict(state)}
        if status is not None:
            doc["status"] = dict(status)
        kind = self.kind.store_kind
        item = self._store.put(kind, resource.namespace, resource.name, doc, expected_version)
        return Stored(resource, doc["state"], status, item.version)

    def with_state(self, stored: Stored[R], state: Mapping[str, Any]) -> Stored[R]:
        """``stored`` with new facts; unchanged if someone wrote meanwhile (their write
        provisions again, and the reconciler repairs)."""
        try:
            return self.put(stored.resource, state, stored.status, stored.version)
        except ConflictError:
            return stored

    def delete(self, namespace: str, name: str) -> bool:
        return self._store.delete(self.kind.store_kind, namespace, name)

    def _typed(self, item: StoredItem) -> Stored[R]:
        doc = item.doc
        return Stored(
            self.kind.from_item(doc["resource"]),
            doc.get("state", {}),
            doc.get("status"),
            item.version,
        )


class Hooks(Generic[R]):
    """What a kind adds to the generic service. Only ``status`` is required."""

    def status(self, stored: Stored[R]) -> dict[str, Any]:
        raise NotImplementedError

    def statuses(self, items: Sequence[Stored[R]]) -> list[dict[str, Any]]:
        """The statuses of a list answer (override to read shared facts once)."""
        return [self.status(s) for s in items]

    def initial_state(self, now: datetime) -> dict[str, Any]:
        return {}

    def check(self, resource: R) -> None:
        """Admission beyond the resource itself (e.g. uniqueness across resources)."""

    def saved(self, stored: Stored[R], existed: bool) -> Stored[R]:
        """After a create or update: provision, and return what is stored afterwards."""
        return stored

    def saved_status(self, stored: Stored[R], existed: bool) -> tuple[Stored[R], dict[str, Any]]:
        """``saved``, then the status the answer carries. A kind whose provisioning reads what
        its status needs (a trigger's broker) overrides this to read it once."""
        stored = self.saved(stored, existed)
        return stored, self.status(stored)

    def removing(self, stored: Stored[R]) -> dict[str, Any]:
        """Before a delete: release what the resource holds; returns the Status details."""
        return {}

    def removed(self, stored: Stored[R]) -> None:
        """After a delete."""


class ResourceService(Generic[R]):
    """CRUD of one kind over its ``Resources``, answering with API-shaped documents."""

    def __init__(
        self,
        resources: Resources[R],
        hooks: Hooks[R],
        clock: Callable[[], datetime] = utcnow,
        uid_factory: Callable[[], str] = lambda: str(uuid.uuid4()),
    ) -> None:
        self.resources = resources
        self.kind = resources.kind
        self._hooks = hooks
        self._clock = clock
        self._uid = uid_factory

    def list(self, namespace: str) -> dict[str, Any]:
        items = self.resources.list(namespace)
        statuses = self._hooks.statuses(items)
        docs = [self._json(s, status) for s, status in zip(items, statuses, strict=True)]
        return {"apiVersion": self.kind.api_version, "kind": self.kind.list_kind, "items": docs}

    def get(self, namespace: str, name: str) -> dict[str, Any]:
        stored = self.resources.require(namespace, name)
        return self._json(stored, self._hooks.status(stored))

    def create(self, namespace: str, body: Any) -> dict[str, Any]:
        parsed = self.kind.parse(namespace, body, None)
        if self.resources.get(namespace, parsed.name) is not None:
            raise ConflictError(
                f'{self.kind.store_kind} "{namespace}/{parsed.name}" already exists'
            )
        return self._save(parsed, None)

    def put(
        self, namespace: str, name: str, body: Any, dry_run: bool = False
    ) -> tuple[dict[str, Any], bool]:
        """Create or replace; True when created. ``dry_run`` (Kubernetes' ``dryRun=All``): the
        same validation and admission, answering the resource as it would be stored, and nothing
        stored or provisioned (``brokerctl apply --dry-run``, ``diff``)."""
        parsed = self.kind.parse(namespace, body, name)
        existing = self.resources.get(namespace, name)
        _check_precondition(body, existing)
        if dry_run:
            resource, _ = self._admit(parsed, existing)
            doc = self.kind.to_json(resource, (existing.status if existing else None) or {})
            if existing is not None:
                doc["metadata"]["resourceVersion"] = str(existing.version)
            return doc, existing is None
        return self._save(parsed, existing), existing is None

    def delete(self, namespace: str, name: str) -> dict[str, Any]:
        stored = self.resources.require(namespace, name)
        details = self._hooks.removing(stored)
        self.resources.delete(namespace, name)
        self._hooks.removed(stored)
        return {
            "apiVersion": "v1",
            "kind": "Status",
            "status": "Success",
            "details": {"name": name, "kind": self.kind.plural, **details},
        }

    def _admit(self, parsed: R, existing: Stored[R] | None) -> tuple[R, datetime]:
        now = self._clock()
        old = existing.resource if existing else None
        resource = self.kind.admit(parsed, old, self._uid(), now)
        self._hooks.check(resource)
        return resource, now

    def _save(self, parsed: R, existing: Stored[R] | None) -> dict[str, Any]:
        resource, now = self._admit(parsed, existing)
        if existing is None:
            state: Mapping[str, Any] = self._hooks.initial_state(now)
            stored = self.resources.put(resource, state, None, None)
        else:
            stored = self.resources.put(resource, existing.state, existing.status, existing.version)
        stored, status = self._hooks.saved_status(stored, existing is not None)
        return self._json(stored, status)

    def _json(self, stored: Stored[R], status: Mapping[str, Any]) -> dict[str, Any]:
        """The API document, remembering the status when a condition changed, so that
        lastTransitionTime keeps the time of the transition instead of the time of the read (as
        Knative's controllers write status)."""
        version = stored.version
        if _transitions(stored.status or {}) != _transitions(status):
            # A concurrent write wins; the next read records the transition.
            with contextlib.suppress(ConflictError):
                put = self.resources.put(stored.resource, stored.state, status, stored.version)
                version = put.version
        doc = self.kind.to_json(stored.resource, status)
        doc["metadata"]["resourceVersion"] = str(version)
        return doc


def _check_precondition(body: Any, existing: Stored[Any] | None) -> None:
    """Kubernetes-style optimistic concurrency for clients: a PUT that carries
    ``metadata.resourceVersion`` applies only to that version of the resource."""
    meta = body.get("metadata") if isinstance(body, Mapping) else None
    expected = meta.get("resourceVersion") if isinstance(meta, Mapping) else None
    if expected is None:
        return
    if existing is None or str(existing.version) != str(expected):
        raise ConflictError(
            "the resource has been modified since resourceVersion "
            f"{expected}; read it again and apply your change to the latest version"
        )


def _transitions(status: Mapping[str, Any]) -> list[tuple[str, str, str]]:
    return sorted(
        (str(c.get("type")), str(c.get("status")), str(c.get("reason", "")))
        for c in status.get("conditions", [])
    )
