"""The xRegistry endpoint registry (design.md §9) over the ResourceStore.

Generated endpoints (brokers, triggers, the control plane) are derived on each read from the
stored brokers and triggers and the event types seen; only their stamps (epoch, modifiedat) are
stored, as kind ``registry`` in namespace ``stamps``, written only when what an endpoint shows
has changed. User-defined endpoints are stored as kind ``registry`` in namespace ``endpoints``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any

from chalicelib import logs
from chalicelib.config import APP_NAME, Settings
from chalicelib.core.archive import rfc3339
from chalicelib.core.clock import utcnow
from chalicelib.core.errors import ConflictError, NotFoundError, Problem, ValidationError
from chalicelib.core.registry import entities as reg
from chalicelib.core.registry import writes
from chalicelib.core.registry.model import model
from chalicelib.core.registry.validation import GENERATED_PREFIX, parse_endpoint
from chalicelib.core.registry.view import (
    Entity,
    Inline,
    MessageEntity,
    Root,
    Urls,
    endpoint_xid,
    generated_entity,
    parse_inline,
    render_endpoint,
    render_endpoints,
    render_message,
    render_messages,
    render_meta,
    render_root,
    render_version,
    render_versions,
    stored_entity,
)
from chalicelib.core.resources.broker import BROKERS, Broker
from chalicelib.core.resources.trigger import TRIGGERS
from chalicelib.ports import ResourceStore, StoredItem
from chalicelib.services.event_types import SAMPLE_KIND, sample_types
from chalicelib.services.resources import Resources

log = logs.get("registry")

KIND = "registry"
USER = "endpoints"
STAMPS = "stamps"
ROOT_STAMP = "/"
STAMP_ATTEMPTS = 3


class Registry:
    def __init__(
        self,
        store: ResourceStore,
        settings: Settings,
        metrics_types: Callable[[], list[reg.ObservedType]] = list,
        clock: Callable[[], datetime] = utcnow,
    ) -> None:
        self._store = store
        self._brokers = Resources(store, BROKERS)
        self._triggers = Resources(store, TRIGGERS)
        self._base = settings.public_url
        self._signed = not settings.local_mode
        self._registryid = f"{APP_NAME}-{settings.stage}"
        self._metrics_types = metrics_types
        self._clock = clock
        self.urls = Urls(settings.public_url)

    # ---- reads ----------------------------------------------------------------------------------

    def root(self, inline: Sequence[str] | None) -> dict[str, Any]:
        flags = parse_inline(inline, "root")
        entities = self._all()
        return render_root(self._root(entities), entities, flags, self.urls, model())

    def model(self) -> dict[str, Any]:
        return model()

    def endpoints(self, inline: Sequence[str] | None) -> dict[str, Any]:
        flags = parse_inline(inline, "endpoints")
        return render_endpoints(self._all(), flags, self.urls)

    def endpoint(self, endpoint_id: str, inline: Sequence[str] | None) -> dict[str, Any]:
        flags = parse_inline(inline, "endpoints")
        return render_endpoint(self._one(endpoint_id), flags, self.urls)

    def messages(self, endpoint_id: str, inline: Sequence[str] | None) -> dict[str, Any]:
        flags = parse_inline(inline, "messages")
        return render_messages(self._one(endpoint_id), flags, self.urls)

    def message(
        self, endpoint_id: str, message_id: str, inline: Sequence[str] | None
    ) -> dict[str, Any]:
        flags: Inline = parse_inline(inline, "messages")
        return render_message(endpoint_id, self._message(endpoint_id, message_id), flags, self.urls)

    def message_meta(self, endpoint_id: str, message_id: str) -> dict[str, Any]:
        return render_meta(endpoint_id, self._message(endpoint_id, message_id), self.urls)

    def message_versions(self, endpoint_id: str, message_id: str) -> dict[str, Any]:
        return render_versions(endpoint_id, self._message(endpoint_id, message_id), self.urls)

    def message_version(self, endpoint_id: str, message_id: str, version_id: str) -> dict[str, Any]:
        m = self._message(endpoint_id, message_id)
        if version_id != m.version:
            raise NotFoundError(
                f"{endpoint_xid(endpoint_id)}/messages/{message_id} has no "
                f"version {version_id!r} (its only version is {m.version!r})"
            )
        return render_version(endpoint_id, m, self.urls)

    # ---- writes ---------------------------------------------------------------------------------

    def put_endpoint(self, endpoint_id: str, body: Any) -> tuple[dict[str, Any], bool]:
        """Create or replace a user-defined endpoint; returns it (as GET shows it) and whether it
        was created."""
        self._refuse_generated(endpoint_id, "replaced")
        request = parse_endpoint(endpoint_id, body)
        existing = self._store.get(KIND, USER, endpoint_id)
        if existing is None:
            self._unique(endpoint_id)
        xid = endpoint_xid(endpoint_id)
        doc = writes.write_endpoint(
            existing.doc if existing else None, request, self._now(), xid=xid
        )
        stored = self._store.put(
            KIND, USER, endpoint_id, doc, existing.version if existing else None
        )
        return render_endpoint(stored_entity(endpoint_id, stored.doc), frozenset(), self.urls), (
            existing is None
        )

    def delete_endpoint(self, endpoint_id: str, epoch: str | None) -> None:
        self._refuse_generated(endpoint_id, "deleted")
        item = self._user_item(endpoint_id)
        writes.check_epoch(epoch, int(item.doc["epoch"]), endpoint_xid(endpoint_id))
        if not self._store.delete(KIND, USER, endpoint_id):
            raise NotFoundError(f"endpoint {endpoint_id!r} does not exist")

    def delete_message(self, endpoint_id: str, message_id: str, epoch: str | None) -> None:
        self._refuse_generated(endpoint_id, "changed")
        item = self._user_item(endpoint_id)
        if message_id not in (item.doc.get("messages") or {}):
            raise NotFoundError(f"endpoint {endpoint_id!r} has no message {message_id!r}")
        doc = writes.delete_message(
            item.doc, message_id, epoch, self._now(), xid=endpoint_xid(endpoint_id)
        )
        self._store.put(KIND, USER, endpoint_id, doc, item.version)

    def location(self, endpoint_id: str) -> str:
        return self.urls.of(endpoint_xid(endpoint_id))

    # ---- entities -------------------------------------------------------------------------------

    def _all(self) -> list[Entity]:
        brokers = {(s.namespace, s.name): s.resource for s in self._brokers.list()}
        seen = reg.summarize(self._observed(self._store.list(SAMPLE_KIND), self._metrics_types()))
        definitions = [reg.control_plane_definition(self._base, self._signed, "")]
        definitions += [
            reg.broker_definition(b, self._base, seen.get(key, ())) for key, b in brokers.items()
        ]
        for stored in self._triggers.list():
            t = stored.resource
            broker = brokers.get((t.namespace, t.broker))
            definitions.append(reg.trigger_definition(t, broker, self._base))
        stamps = {s.name: s for s in self._store.list(KIND, STAMPS)}
        entities = [self._stamped(d, stamps.get(d.id)) for d in definitions]
        users = [stored_entity(s.name, s.doc) for s in self._store.list(KIND, USER)]
        return entities + users

    def _one(self, endpoint_id: str) -> Entity:
        ref = reg.parse_generated_id(endpoint_id)
        if ref is None:
            return stored_entity(endpoint_id, self._user_item(endpoint_id).doc)
        d = self._definition(ref, endpoint_id)
        return self._stamped(d, self._store.get(KIND, STAMPS, endpoint_id))

    def _definition(self, ref: reg.GeneratedRef, endpoint_id: str) -> reg.Definition:
        if ref.kind == "controlplane":
            return reg.control_plane_definition(self._base, self._signed, "")
        broker = self._broker(ref.namespace, ref.broker)
        if ref.kind == "broker" and broker is not None:
            sample = self._store.get(SAMPLE_KIND, ref.namespace, ref.broker)
            metrics = [
                o
                for o in self._metrics_types()
                if (o.namespace, o.broker) == (ref.namespace, ref.broker)
            ]
            seen = reg.summarize(self._observed([sample] if sample else [], metrics))
            return reg.broker_definition(
                broker, self._base, seen.get((ref.namespace, ref.broker), ())
            )
        if ref.kind == "trigger":
            found = self._triggers.get(ref.namespace, ref.trigger)
            if found is not None and found.resource.broker == ref.broker:
                return reg.trigger_definition(found.resource, broker, self._base)
        raise NotFoundError(f"endpoint {endpoint_id!r} does not exist")

    def _broker(self, namespace: str, name: str) -> Broker | None:
        found = self._brokers.get(namespace, name)
        return found.resource if found else None

    def _message(self, endpoint_id: str, message_id: str) -> MessageEntity:
        m = self._one(endpoint_id).message(message_id)
        if m is None:
            raise NotFoundError(f"endpoint {endpoint_id!r} has no message {message_id!r}")
        return m

    def _user_item(self, endpoint_id: str) -> StoredItem:
        item = self._store.get(KIND, USER, endpoint_id)
        if item is None:
            raise NotFoundError(f"endpoint {endpoint_id!r} does not exist")
        return item

    @staticmethod
    def _observed(
        samples: Iterable[StoredItem], metrics: Iterable[reg.ObservedType]
    ) -> list[reg.ObservedType]:
        out = list(metrics)
        for s in samples:
            try:
                out += sample_types(s.namespace, s.name, s.doc)
            except (KeyError, TypeError, ValueError) as exc:
                log.warning("event type sample of %s/%s unreadable: %s", s.namespace, s.name, exc)
        return out

    # ---- stamps ---------------------------------------------------------------------------------

    def _stamped(self, d: reg.Definition, item: StoredItem | None) -> Entity:
        """The entity with its stamps advanced, storing them when they moved (optimistically: on
        a race the other writer's stamps are taken and advanced again)."""
        for _ in range(STAMP_ATTEMPTS):
            old = reg.EndpointStamps.from_json(item.doc) if item else None
            if not d.created:  # the control plane exists since the registry first showed it
                d = replace(d, created=old.endpoint.createdat if old else self._now())
            new = reg.stamp_definition(d, old, self._now())
            if new == old:
                break
            try:
                self._store.put(KIND, STAMPS, d.id, new.to_json(), item.version if item else None)
                break
            except ConflictError:
                item = self._store.get(KIND, STAMPS, d.id)
        return generated_entity(d, new)

    def _root(self, entities: Sequence[Entity]) -> Root:
        name = "serverless-broker"
        description = "Brokers, triggers and the event types they carry, as xRegistry endpoints."
        print_ = reg.fingerprint([name, description, sorted(e.id for e in entities)])
        item = self._store.get(KIND, STAMPS, ROOT_STAMP)
        for _ in range(STAMP_ATTEMPTS):
            old = reg.Stamp.from_json(item.doc) if item else None
            now = self._now()
            stamp = reg.advance(old, print_, old.createdat if old else now, now)
            if stamp == old:
                break
            try:
                self._store.put(
                    KIND, STAMPS, ROOT_STAMP, stamp.to_json(), item.version if item else None
                )
                break
            except ConflictError:
                item = self._store.get(KIND, STAMPS, ROOT_STAMP)
        return Root(
            self._registryid, stamp.epoch, stamp.createdat, stamp.modifiedat, name, description
        )

    # ---- helpers --------------------------------------------------------------------------------

    def _now(self) -> str:
        return rfc3339(self._clock())

    def _refuse_generated(self, endpoint_id: str, what: str) -> None:
        if endpoint_id.startswith(GENERATED_PREFIX) and reg.parse_generated_id(endpoint_id):
            raise ValidationError(
                [
                    Problem(
                        "endpointid",
                        f"endpoint {endpoint_id!r} is generated by the broker from its brokers and "
                        f"triggers and cannot be {what}; change the Broker or Trigger instead",
                    )
                ]
            )

    def _unique(self, endpoint_id: str) -> None:
        lowered = endpoint_id.lower()
        for item in self._store.list(KIND, USER):
            if item.name.lower() == lowered:
                raise ConflictError(
                    f"endpoint ids are unique case-insensitively: {item.name!r} exists"
                )
