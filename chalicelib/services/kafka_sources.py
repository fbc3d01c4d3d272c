"""Control plane for KafkaSources (DESIGN.md §10): CRUD under
``/apis/sources.knative.dev/v1/namespaces/{ns}/kafkasources``, stored as kind ``kafkasource``.

Each source gets an SQS failure queue (its invalid records, and Lambda's records of discarded
batches) and one Lambda event source mapping from its topic to the ``kafka_ingress`` function,
enabled while its broker exists. Writes validate first, store with optimistic concurrency, then
provision through a plan (``kafka_source.plan_mappings``); status is computed when read.
"""

from __future__ import annotations

import contextlib
import json
import logging
import uuid
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

from chalicelib.config import Settings
from chalicelib.core import limits
from chalicelib.core.clock import utcnow
from chalicelib.core.errors import (
    BrokerError,
    ConflictError,
    NotFoundError,
)
from chalicelib.core.reconcile import RETENTION_SECONDS
from chalicelib.core.resources import kafka_source as ks
from chalicelib.core.resources.eventing import ingress_url
from chalicelib.ports import KafkaMappings, Queues, ReceivedMessage, ResourceStore, StoredItem
from chalicelib.services.routing import BROKER

log = logging.getLogger("broker.kafka_sources")

KIND = "kafkasource"
LIST_KIND = "KafkaSourceList"
PEEK_VISIBILITY = 30
MAX_LIST = 1000
FAILURE_QUEUE_ATTRIBUTES = {"MessageRetentionPeriod": str(RETENTION_SECONDS)}
KafkaAction = ks.KafkaAction


class KafkaSources:
    def __init__(
        self,
        store: ResourceStore,
        mappings: KafkaMappings,
        queues: Queues,
        settings: Settings,
        clock: Callable[[], datetime] = utcnow,
        uid_factory: Callable[[], str] = lambda: str(uuid.uuid4()),
    ) -> None:
        self._store = store
        self._mappings = mappings
        self._queues = queues
        self._function = settings.kafka_function
        self._prefix = settings.queue_prefix
        self._public_url = settings.public_url
        self._clock = clock
        self._uid = uid_factory

    # ---- CRUD ----------------------------------------------------------------------------------

    def list_sources(self, namespace: str) -> dict[str, Any]:
        items = [self._json(s) for s in self._store.list(KIND, namespace)]
        return {"apiVersion": ks.API_VERSION, "kind": LIST_KIND, "items": items}

    def get_source(self, namespace: str, name: str) -> dict[str, Any]:
        return self._json(self._require(namespace, name))

    def create_source(self, namespace: str, body: Any) -> dict[str, Any]:
        parsed = ks.parse_kafka_source(namespace, body, path_name=None)
        if self._store.get(KIND, namespace, parsed.name) is not None:
            raise ConflictError(f'kafkasource "{namespace}/{parsed.name}" already exists')
        return self._save(parsed, None)[0]

    def put_source(self, namespace: str, name: str, body: Any) -> tuple[dict[str, Any], bool]:
        parsed = ks.parse_kafka_source(namespace, body, path_name=name)
        return self._save(parsed, self._store.get(KIND, namespace, name))

    def delete_source(self, namespace: str, name: str) -> dict[str, Any]:
        item = self._require(namespace, name)
        source = ks.from_item(item.doc["resource"])
        self._execute(ks.plan_mappings(None, False, self._found(source)))
        queue = ks.failure_queue_name(self._prefix, namespace, name)
        pending = self._queues.depth(queue) if self._queues.get(queue) else 0
        self._queues.delete(queue)
        self._store.delete(KIND, namespace, name)
        return {
            "apiVersion": "v1",
            "kind": "Status",
            "status": "Success",
            "details": {"name": name, "kind": "kafkasources", "failuresDiscarded": pending},
        }

    def _save(
        self, parsed: ks.KafkaSource, existing: StoredItem | None
    ) -> tuple[dict[str, Any], bool]:
        old = ks.from_item(existing.doc["resource"]) if existing else None
        source = ks.admit_kafka_source(parsed, old, uid=self._uid(), now=self._clock())
        self._check_unique(source)
        doc = dict(existing.doc) if existing else {"state": {}}
        doc["resource"] = ks.to_item(source)
        stored = self._store.put(
            KIND, source.namespace, source.name, doc, existing.version if existing else None
        )
        return self._json(self._provision(stored)), existing is None

    def _check_unique(self, source: ks.KafkaSource) -> None:
        """The handler finds a record's source by cluster and topic: one source per pair."""
        for item in self._store.list(KIND):
            other = ks.from_item(item.doc["resource"])
            if (other.namespace, other.name) == (source.namespace, source.name):
                continue
            if (other.cluster_id, other.topic) == (source.cluster_id, source.topic):
                raise ConflictError(
                    f'kafkasource "{other.namespace}/{other.name}" already reads topic '
                    f'"{source.topic}" of this cluster; one source per topic and cluster'
                )

    # ---- failures ------------------------------------------------------------------------------

    def failures(self, namespace: str, name: str, limit: str = "100") -> dict[str, Any]:
        """Up to ``limit`` records of the failure queue, without consuming them."""
        count = limits.read_int(limit, "limit", low=1, high=MAX_LIST)
        queue = self._failure_queue(namespace, name)
        seen: dict[str, ReceivedMessage] = {}
        try:
            while len(seen) < count:
                batch: Sequence[ReceivedMessage]
                want = min(10, count - len(seen))
                batch = self._queues.receive(queue, want, 0, PEEK_VISIBILITY)
                if not batch:
                    break
                for m in batch:
                    seen.setdefault(m.message_id, m)
        finally:
            for m in seen.values():  # listing does not consume
                self._queues.change_visibility(queue, m.receipt_handle, 0)
        items = [_failure_json(m.message_id, m.body) for m in seen.values()]
        return {"items": items, "count": len(items), "depth": self._queues.depth(queue)}

    def purge_failures(self, namespace: str, name: str) -> dict[str, Any]:
        queue = self._failure_queue(namespace, name)
        depth = self._queues.depth(queue)
        self._queues.purge(queue)
        return {"purged": depth}

    def _failure_queue(self, namespace: str, name: str) -> str:
        self._require(namespace, name)
        queue = ks.failure_queue_name(self._prefix, namespace, name)
        if self._queues.get(queue) is None:
            raise NotFoundError(f'kafkasource "{namespace}/{name}" has no failure queue yet')
        return queue

    # ---- provisioning --------------------------------------------------------------------------

    def _provision(self, item: StoredItem) -> StoredItem:
        source = ks.from_item(item.doc["resource"])
        broker_exists = self._store.get(BROKER, source.namespace, source.sink_broker) is not None
        try:
            queue = ks.failure_queue_name(self._prefix, source.namespace, source.name)
            info = self._queues.get(queue) or self._queues.create(queue, FAILURE_QUEUE_ATTRIBUTES)
            desired = ks.desired_mapping(source, self._function, info.arn)
            self._execute(ks.plan_mappings(desired, broker_exists, self._found(source)))
        except BrokerError as exc:
            log.warning(
                "provisioning kafkasource %s/%s failed: %s", source.namespace, source.name, exc
            )
            state = {"deployed": False, "message": f"Provisioning failed: {exc.detail}"}
        else:
            state = {"deployed": True, "message": ""}
        return self._set_state(item, state)

    def _found(self, source: ks.KafkaSource) -> list[ks.KafkaMappingInfo]:
        return [
            m
            for m in self._mappings.list(self._function)
            if (m.spec.cluster_id, m.spec.topic) == (source.cluster_id, source.topic)
        ]

    def _execute(self, actions: list[KafkaAction]) -> list[str]:
        for action in actions:
            if isinstance(action, ks.DeleteKafkaMapping):
                with contextlib.suppress(NotFoundError):  # already gone
                    self._mappings.delete(action.uuid)
            elif isinstance(action, ks.UpdateKafkaMapping):
                self._mappings.update(action.uuid, action.spec, action.enabled)
            else:
                self._mappings.create(action.spec, action.enabled)
        return [a.describe() for a in actions]

    def reconcile_all(self) -> list[str]:
        """The scheduled repair: every source's mapping as planned (enabled while its broker
        exists), and mappings of the kafka function that no source explains removed."""
        done: list[str] = []
        items = self._store.list(KIND)
        sources = [ks.from_item(i.doc["resource"]) for i in items]
        wanted = {(s.cluster_id, s.topic) for s in sources}
        orphans = [
            m for m in self._mappings.list(self._function)
            if (m.spec.cluster_id, m.spec.topic) not in wanted
        ]  # fmt: skip
        done += self._execute(ks.plan_mappings(None, False, orphans))
        for item in items:
            try:
                self._provision(item)
            except BrokerError as exc:
                log.warning("reconciling kafkasource %s/%s: %s", item.namespace, item.name, exc)
        if done:
            log.warning("kafka reconciler repaired drift: %s", "; ".join(done))
        return done

    def _set_state(self, item: StoredItem, state: Mapping[str, Any]) -> StoredItem:
        doc = dict(item.doc)
        doc["state"] = dict(state)
        try:
            return self._store.put(item.kind, item.namespace, item.name, doc, item.version)
        except ConflictError:
            return item  # a concurrent write provisions again; the reconciler repairs

    # ---- reading -------------------------------------------------------------------------------

    def _json(self, item: StoredItem) -> dict[str, Any]:
        source = ks.from_item(item.doc["resource"])
        state = item.doc.get("state", {})
        status = ks.kafka_source_status(
            source,
            broker_exists=self._store.get(BROKER, source.namespace, source.sink_broker) is not None,
            sink_uri=ingress_url(self._public_url, source.namespace, source.sink_broker),
            deployed=state.get("deployed"),
            message=str(state.get("message", "")),
            failure_queue=ks.failure_queue_name(self._prefix, source.namespace, source.name),
            now=self._clock(),
            previous=item.doc.get("status"),
        )
        return ks.to_json(source, status)

    def _require(self, namespace: str, name: str) -> StoredItem:
        item = self._store.get(KIND, namespace, name)
        if item is None:
            raise NotFoundError(f'kafkasource "{namespace}/{name}" does not exist')
        return item


def _failure_json(message_id: str, body: str) -> dict[str, Any]:
    try:
        doc = json.loads(body)
    except ValueError:
        return {"messageId": message_id, "unreadable": body[:1024]}
    if isinstance(doc, dict) and doc.get("kind") == "invalid_record":
        return {"messageId": message_id, **doc}
    # Lambda's own record of a batch it discarded after its retries (metadata, offsets).
    return {"messageId": message_id, "kind": "discarded_batch", "lambda": doc}
