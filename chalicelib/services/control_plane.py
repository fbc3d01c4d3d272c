"""Control plane: Brokers and Triggers as Knative resources (DESIGN.md §2.2).

Every write validates first (all problems at once), stores with optimistic concurrency, then
provisions through a plan (reconcile.plan) executed by the Provisioner. Status is computed from
stored facts and the broker's existence each time it is read; Ready is derived, never stored.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from chalicelib.config import Settings
from chalicelib.core import reconcile
from chalicelib.core.clock import utcnow
from chalicelib.core.errors import BrokerError, ConflictError, NotFoundError
from chalicelib.core.resources import conditions
from chalicelib.core.resources import eventing as resources
from chalicelib.core.resources.eventing import Broker, Trigger
from chalicelib.ports import Queues, ResourceStore, StoredItem
from chalicelib.services.provisioner import Provisioner
from chalicelib.services.routing import BROKER, TRIGGER, ConfigCache
from chalicelib.services.tokens import Tokens

log = logging.getLogger("broker.control_plane")

API_VERSION = "eventing.knative.dev/v1"


def _iso(moment: datetime | None) -> str | None:
    return moment.isoformat() if moment else None


def _parse_iso(text: object) -> datetime | None:
    return datetime.fromisoformat(text) if isinstance(text, str) and text else None


class ControlPlane:
    def __init__(
        self,
        store: ResourceStore,
        provisioner: Provisioner,
        settings: Settings,
        cache: ConfigCache,
        queues: Queues,
        tokens: Tokens,
        clock: Callable[[], datetime] = utcnow,
        uid_factory: Callable[[], str] = lambda: str(uuid.uuid4()),
    ) -> None:
        self._store = store
        self._tokens = tokens
        self._provisioner = provisioner
        self._public_url = settings.public_url
        self._ttl = settings.cache_ttl_seconds
        self._prefix = settings.queue_prefix
        self._cache = cache
        self._queues = queues
        self._clock = clock
        self._uid = uid_factory

    # ---- brokers -------------------------------------------------------------------------------

    def list_brokers(self, namespace: str) -> dict[str, Any]:
        items = [self._broker_json(s) for s in self._store.list(BROKER, namespace)]
        return {"apiVersion": API_VERSION, "kind": "BrokerList", "items": items}

    def get_broker(self, namespace: str, name: str) -> dict[str, Any]:
        return self._broker_json(self._require(BROKER, namespace, name))

    def create_broker(self, namespace: str, body: Any) -> dict[str, Any]:
        parsed = resources.parse_broker(namespace, body, path_name=None)
        if self._store.get(BROKER, namespace, parsed.name) is not None:
            raise ConflictError(f'broker "{namespace}/{parsed.name}" already exists')
        return self._save_broker(parsed, None)[0]

    def put_broker(self, namespace: str, name: str, body: Any) -> tuple[dict[str, Any], bool]:
        parsed = resources.parse_broker(namespace, body, path_name=name)
        existing = self._store.get(BROKER, namespace, name)
        _check_precondition(body, existing)
        return self._save_broker(parsed, existing)

    def _save_broker(
        self, parsed: Broker, existing: StoredItem | None
    ) -> tuple[dict[str, Any], bool]:
        now = self._clock()
        old = resources.broker_from_item(existing.doc["resource"]) if existing else None
        broker = resources.admit_broker(parsed, old, uid_factory=self._uid, now=now)
        state = dict(existing.doc.get("state", {})) if existing else {"stored_at": _iso(now)}
        doc = {"resource": resources.broker_to_item(broker), "state": state}
        stored = self._store.put(
            BROKER, broker.namespace, broker.name, doc, existing.version if existing else None
        )
        self._cache.invalidate(broker.namespace, broker.name)
        # Triggers created before their broker (or whose delivery follows the broker's) get
        # their queues now.
        for item in self._triggers_of(broker.namespace, broker.name):
            self._provision(item, broker)
        return self._broker_json(stored), existing is None

    def delete_broker(self, namespace: str, name: str) -> dict[str, Any]:
        self._require(BROKER, namespace, name)
        triggers = self._triggers_of(namespace, name)
        keys = [(namespace, name, t.name) for t in triggers]
        self._provisioner.execute(
            reconcile.plan_removal(self._provisioner.config, keys, self._provisioner.observe(keys))
        )
        # Tokens go before the broker: a re-created broker must not accept its predecessor's.
        self._tokens.revoke_all(namespace, name)
        self._store.delete(BROKER, namespace, name)
        for item in triggers:
            self._set_state(item, {"provisioned_at": None, "dependencies_ok": None, "message": ""})
        self._cache.invalidate(namespace, name)
        return _status_ok("brokers", name, {"triggersLeftNotReady": [t.name for t in triggers]})

    def _broker_json(self, item: StoredItem) -> dict[str, Any]:
        broker = resources.broker_from_item(item.doc["resource"])
        state = item.doc.get("state", {})
        status = conditions.broker_status(
            broker,
            address_url=resources.ingress_url(self._public_url, broker.namespace, broker.name),
            now=self._clock(),
            propagation_ttl_s=self._ttl,
            provisioned_at=_parse_iso(state.get("stored_at")),
            previous=item.doc.get("status"),
        )
        version = self._remember_status(item, status)
        return _with_version(resources.broker_to_json(broker, status), version)

    # ---- triggers ------------------------------------------------------------------------------

    def list_triggers(self, namespace: str) -> dict[str, Any]:
        brokers = {s.name: s for s in self._store.list(BROKER, namespace)}
        items = [
            self._trigger_json(s, brokers.get(s.doc["resource"]["spec"].get("broker", "")))
            for s in self._store.list(TRIGGER, namespace)
        ]
        return {"apiVersion": API_VERSION, "kind": "TriggerList", "items": items}

    def get_trigger(self, namespace: str, name: str) -> dict[str, Any]:
        return self._trigger_json(self._require(TRIGGER, namespace, name))

    def create_trigger(self, namespace: str, body: Any) -> dict[str, Any]:
        parsed = resources.parse_trigger(namespace, body, path_name=None)
        if self._store.get(TRIGGER, namespace, parsed.name) is not None:
            raise ConflictError(f'trigger "{namespace}/{parsed.name}" already exists')
        return self._save_trigger(parsed, None)[0]

    def put_trigger(self, namespace: str, name: str, body: Any) -> tuple[dict[str, Any], bool]:
        parsed = resources.parse_trigger(namespace, body, path_name=name)
        existing = self._store.get(TRIGGER, namespace, name)
        _check_precondition(body, existing)
        return self._save_trigger(parsed, existing)

    def _save_trigger(
        self, parsed: Trigger, existing: StoredItem | None
    ) -> tuple[dict[str, Any], bool]:
        now = self._clock()
        old = resources.trigger_from_item(existing.doc["resource"]) if existing else None
        trigger = resources.admit_trigger(parsed, old, uid_factory=self._uid, now=now)
        doc = dict(existing.doc) if existing else {"state": {}}
        doc["resource"] = resources.trigger_to_item(trigger)
        stored = self._store.put(
            TRIGGER, trigger.namespace, trigger.name, doc, existing.version if existing else None
        )
        broker_item = self._store.get(BROKER, trigger.namespace, trigger.broker)
        broker = resources.broker_from_item(broker_item.doc["resource"]) if broker_item else None
        stored = self._provision(stored, broker)
        self._cache.invalidate(trigger.namespace, trigger.broker)
        return self._trigger_json(stored), existing is None

    def delete_trigger(self, namespace: str, name: str) -> dict[str, Any]:
        item = self._require(TRIGGER, namespace, name)
        trigger = resources.trigger_from_item(item.doc["resource"])
        key = (namespace, trigger.broker, name)
        dlq = self._provisioner.dlq_of(key)
        pending = self._queues.depth(dlq) if self._queues.get(dlq) else 0
        self._provisioner.execute(
            reconcile.plan_removal(
                self._provisioner.config, [key], self._provisioner.observe([key])
            )
        )
        self._store.delete(TRIGGER, namespace, name)
        self._cache.invalidate(namespace, trigger.broker)
        return _status_ok("triggers", name, {"deadLettersDiscarded": pending})

    def broker_of_trigger(self, namespace: str, name: str) -> str:
        item = self._require(TRIGGER, namespace, name)
        return resources.trigger_from_item(item.doc["resource"]).broker

    def _trigger_json(
        self, item: StoredItem, broker_item: StoredItem | bool | None = False
    ) -> dict[str, Any]:
        trigger = resources.trigger_from_item(item.doc["resource"])
        if broker_item is False:
            broker_item = self._store.get(BROKER, trigger.namespace, trigger.broker)
        broker = (
            resources.broker_from_item(broker_item.doc["resource"])
            if isinstance(broker_item, StoredItem)
            else None
        )
        state = item.doc.get("state", {})
        status = conditions.trigger_status(
            trigger,
            broker,
            dependencies_ok=state.get("dependencies_ok"),
            dependency_message=state.get("message", ""),
            now=self._clock(),
            propagation_ttl_s=self._ttl,
            provisioned_at=_parse_iso(state.get("provisioned_at")),
            previous=item.doc.get("status"),
        )
        version = self._remember_status(item, status)
        return _with_version(resources.trigger_to_json(trigger, status), version)

    def _remember_status(self, item: StoredItem, status: Mapping[str, Any]) -> int:
        """Store the status when a condition changed, so lastTransitionTime keeps the time of the
        transition instead of the time of the read (as Knative's controllers write status).
        Returns the item's version afterwards (its resourceVersion)."""
        stored = item.doc.get("status") or {}
        if _transitions(stored) == _transitions(status):
            return item.version
        doc = dict(item.doc)
        doc["status"] = dict(status)
        try:
            return self._store.put(item.kind, item.namespace, item.name, doc, item.version).version
        except ConflictError:  # a concurrent write wins; the next read records the transition
            return item.version

    # ---- provisioning --------------------------------------------------------------------------

    def _provision(self, item: StoredItem, broker: Broker | None) -> StoredItem:
        """Plan and apply one trigger's queues and mappings, and record the outcome."""
        trigger = resources.trigger_from_item(item.doc["resource"])
        key = reconcile.trigger_key(trigger)
        state: dict[str, Any]
        try:
            actions = reconcile.plan_trigger(
                self._provisioner.config, trigger, broker, self._provisioner.observe([key])
            )
            self._provisioner.execute(actions)
        except BrokerError as exc:
            log.warning("provisioning %s failed: %s", key, exc)
            state = {
                "provisioned_at": item.doc.get("state", {}).get("provisioned_at"),
                "dependencies_ok": False,
                "message": f"Provisioning failed, the reconciler will retry: {exc.detail}",
            }
            return self._set_state(item, state)
        if broker is None:
            state = {"provisioned_at": None, "dependencies_ok": None, "message": ""}
        else:
            state = {"provisioned_at": _iso(self._clock()), "dependencies_ok": True, "message": ""}
        return self._set_state(item, state)

    def _set_state(self, item: StoredItem, state: Mapping[str, Any]) -> StoredItem:
        doc = dict(item.doc)
        doc["state"] = dict(state)
        try:
            return self._store.put(item.kind, item.namespace, item.name, doc, item.version)
        except ConflictError:
            # Someone changed it meanwhile; their write provisions again, the reconciler repairs.
            return item

    def reconcile_all(self) -> list[str]:
        """The scheduled repair: plan every trigger against everything that exists, apply, and
        record which triggers had drift."""
        brokers = {
            (s.namespace, s.name): resources.broker_from_item(s.doc["resource"])
            for s in self._store.list(BROKER)
        }
        items = self._store.list(TRIGGER)
        triggers = [resources.trigger_from_item(s.doc["resource"]) for s in items]
        desired = reconcile.DesiredState(
            self._provisioner.config, tuple(brokers.values()), tuple(triggers)
        )
        actions = reconcile.plan(desired, self._provisioner.observe())
        done = self._provisioner.execute(actions)
        touched = {a.queue_name if hasattr(a, "queue_name") else a.name for a in actions}
        for item, trigger in zip(items, triggers, strict=True):
            key = reconcile.trigger_key(trigger)
            broker = brokers.get((trigger.namespace, trigger.broker))
            state = item.doc.get("state", {})
            if broker is None:
                if state.get("provisioned_at") or state.get("dependencies_ok") is not None:
                    self._set_state(
                        item, {"provisioned_at": None, "dependencies_ok": None, "message": ""}
                    )
                continue
            mine = set(self._provisioner.queue_names(key))
            if mine & touched or not state.get("dependencies_ok"):
                self._set_state(
                    item,
                    {"provisioned_at": _iso(self._clock()), "dependencies_ok": True, "message": ""},
                )
        if done:
            log.warning("reconciler repaired drift: %s", "; ".join(done))
            self._cache.invalidate()
        return done

    # ---- helpers -------------------------------------------------------------------------------

    def _require(self, kind: str, namespace: str, name: str) -> StoredItem:
        item = self._store.get(kind, namespace, name)
        if item is None:
            raise NotFoundError(f'{kind} "{namespace}/{name}" does not exist')
        return item

    def _triggers_of(self, namespace: str, broker: str) -> list[StoredItem]:
        items = self._store.list(TRIGGER, namespace)
        return [s for s in items if resources.trigger_from_item(s.doc["resource"]).broker == broker]


def _check_precondition(body: Any, existing: StoredItem | None) -> None:
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


def _with_version(doc: dict[str, Any], version: int) -> dict[str, Any]:
    doc["metadata"]["resourceVersion"] = str(version)
    return doc


def _transitions(status: Mapping[str, Any]) -> list[tuple[str, str, str]]:
    return sorted(
        (str(c.get("type")), str(c.get("status")), str(c.get("reason", "")))
        for c in status.get("conditions", [])
    )


def _status_ok(kind: str, name: str, details: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Status",
        "status": "Success",
        "details": {"name": name, "kind": kind, **details},
    }
