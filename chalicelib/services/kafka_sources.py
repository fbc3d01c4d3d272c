"""KafkaSources (design.md §10), served by the generic resource service: each source gets an SQS
failure queue (its invalid records, and Lambda's records of discarded batches) and one Lambda
event source mapping from its topic to the ``kafka_ingress`` function, enabled while its broker
exists, planned by ``kafka_source.plan_mappings``.

With ``initialOffset: latest`` the consumer group's offsets are committed at the log end before
the mapping is created (as Knative's KafkaSource does before it reports Ready): Lambda resumes a
group from its committed offsets, so a record produced once the source is Ready is read however
late the poller joins. Until they are committed the source has no mapping and is not Ready; the
reconciler tries again."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from chalicelib import logs
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
from chalicelib.core.resources.broker import Broker, ingress_url
from chalicelib.core.resources.kafka_source_status import kafka_source_status
from chalicelib.ports import KafkaOffsets, Queues, ReceivedMessage
from chalicelib.services.provisioner import Provisioner
from chalicelib.services.resources import Hooks, Resources, Stored

log = logs.get("kafka_sources")

PEEK_VISIBILITY = 30
MAX_LIST = 1000
FAILURE_QUEUE_ATTRIBUTES = {"MessageRetentionPeriod": str(RETENTION_SECONDS)}


class KafkaSourceHooks(Hooks[ks.KafkaSource]):
    """What a KafkaSource adds to the generic resource service: one source per topic and cluster,
    its failure queue and mapping, and the failure queue's records."""

    def __init__(
        self,
        sources: Resources[ks.KafkaSource],
        brokers: Resources[Broker],
        provisioner: Provisioner,
        queues: Queues,
        offsets: KafkaOffsets,
        settings: Settings,
        clock: Callable[[], datetime] = utcnow,
    ) -> None:
        self.sources = sources
        self._brokers = brokers
        self._provisioner = provisioner
        self._queues = queues
        self._offsets = offsets
        self._function = settings.kafka_function
        self._prefix = settings.queue_prefix
        self._public_url = settings.public_url
        self._clock = clock

    def check(self, resource: ks.KafkaSource) -> None:
        """The handler finds a record's source by cluster and topic: one source per pair."""
        for stored in self.sources.list():
            other = stored.resource
            if (other.namespace, other.name) == (resource.namespace, resource.name):
                continue
            if (other.cluster_id, other.topic) == (resource.cluster_id, resource.topic):
                raise ConflictError(
                    f'kafkasource "{other.namespace}/{other.name}" already reads topic '
                    f'"{resource.topic}" of this cluster; one source per topic and cluster'
                )

    def saved(self, stored: Stored[ks.KafkaSource], existed: bool) -> Stored[ks.KafkaSource]:
        return self._provision(stored)

    def removing(self, stored: Stored[ks.KafkaSource]) -> dict[str, Any]:
        source = stored.resource
        self._provisioner.execute(ks.plan_mappings(None, False, self._found(source)))
        queue = ks.failure_queue_name(self._prefix, source.namespace, source.name)
        pending = self._queues.depth(queue) if self._queues.get(queue) else 0
        self._queues.delete(queue)
        return {"failuresDiscarded": pending}

    def status(self, stored: Stored[ks.KafkaSource]) -> dict[str, Any]:
        return self._status(stored, self._found(stored.resource))

    def statuses(self, items: Sequence[Stored[ks.KafkaSource]]) -> list[dict[str, Any]]:
        mappings = self._provisioner.kafka_mappings(self._function) if items else []
        return [self._status(s, _of(s.resource, mappings)) for s in items]

    def _status(
        self, stored: Stored[ks.KafkaSource], mappings: Sequence[ks.KafkaMappingInfo]
    ) -> dict[str, Any]:
        source = stored.resource
        problems = [m.problem for m in mappings if m.enabled and m.problem]
        return kafka_source_status(
            source,
            broker_exists=self._broker_exists(source),
            sink_uri=ingress_url(self._public_url, source.namespace, source.sink_broker),
            deployed=stored.state.get("deployed"),
            message=str(stored.state.get("message", "")),
            failure_queue=ks.failure_queue_name(self._prefix, source.namespace, source.name),
            now=self._clock(),
            previous=stored.status,
            connection_problem=problems[0] if problems else None,
            offsets_committed=stored.state.get("offsetsCommitted"),
            offsets_message=str(stored.state.get("offsetsMessage", "")),
        )

    def _broker_exists(self, source: ks.KafkaSource) -> bool:
        return self._brokers.get(source.namespace, source.sink_broker) is not None

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
        self.sources.require(namespace, name)
        queue = ks.failure_queue_name(self._prefix, namespace, name)
        if self._queues.get(queue) is None:
            raise NotFoundError(f'kafkasource "{namespace}/{name}" has no failure queue yet')
        return queue

    # ---- provisioning --------------------------------------------------------------------------

    def _provision(self, stored: Stored[ks.KafkaSource]) -> Stored[ks.KafkaSource]:
        source = stored.resource
        state: dict[str, Any] = {"deployed": True, "message": ""}
        try:
            queue = ks.failure_queue_name(self._prefix, source.namespace, source.name)
            info = self._queues.get(queue) or self._queues.create(queue, FAILURE_QUEUE_ATTRIBUTES)
            if not self._initial_offsets(stored, state):
                return self.sources.with_state(stored, state)
            desired = ks.desired_mapping(source, self._function, info.arn)
            found = self._found(source)
            self._provisioner.execute(ks.plan_mappings(desired, self._broker_exists(source), found))
        except BrokerError as exc:
            log.warning(
                "provisioning kafkasource %s/%s failed: %s", source.namespace, source.name, exc
            )
            state.update(deployed=False, message=f"Provisioning failed: {exc.detail}")
        return self.sources.with_state(stored, state)

    def _initial_offsets(self, stored: Stored[ks.KafkaSource], state: dict[str, Any]) -> bool:
        """Whether the mapping may be created: ``latest`` needs the group's offsets committed
        first (once; the group keeps them), ``earliest`` needs nothing."""
        source = stored.resource
        if source.initial_offset != "latest" or stored.state.get("offsetsCommitted") is True:
            state["offsetsCommitted"] = True
            return True
        try:
            committed = self._offsets.initialize(source)
        except BrokerError as exc:
            log.warning(
                "kafkasource %s/%s: initial offsets not committed: %s",
                source.namespace, source.name, exc.detail,
            )  # fmt: skip
            state.update(
                deployed=False,
                message="The mapping waits for the consumer group's initial offsets.",
                offsetsCommitted=False,
                offsetsMessage=exc.detail,
            )
            return False
        log.debug(  # the condition says it; setup outside a function logs nothing at INFO
            "kafkasource %s/%s: initial offsets committed for %d partition(s) of %s",
            source.namespace, source.name, committed, source.topic,
        )  # fmt: skip
        state["offsetsCommitted"] = True
        return True

    def _found(self, source: ks.KafkaSource) -> list[ks.KafkaMappingInfo]:
        return _of(source, self._provisioner.kafka_mappings(self._function))

    def reconcile_all(self) -> list[str]:
        """The scheduled repair: every source's mapping as planned (enabled while its broker
        exists), and mappings of the kafka function that no source explains removed."""
        done: list[str] = []
        items = self.sources.list()
        sources = [s.resource for s in items]
        wanted = {(s.cluster_id, s.topic) for s in sources}
        orphans = [
            m for m in self._provisioner.kafka_mappings(self._function)
            if (m.spec.cluster_id, m.spec.topic) not in wanted
        ]  # fmt: skip
        done += self._provisioner.execute(ks.plan_mappings(None, False, orphans))
        for stored in items:
            try:
                self._provision(stored)
            except BrokerError as exc:
                log.warning("reconciling kafkasource %s/%s: %s", stored.namespace, stored.name, exc)
        if done:
            log.warning("kafka reconciler repaired drift: %s", "; ".join(done))
        return done


def _of(
    source: ks.KafkaSource, mappings: Sequence[ks.KafkaMappingInfo]
) -> list[ks.KafkaMappingInfo]:
    """The mappings that read ``source``'s topic of its cluster."""
    return [
        m
        for m in mappings
        if (m.spec.cluster_id, m.spec.topic) == (source.cluster_id, source.topic)
    ]


def _failure_json(message_id: str, body: str) -> dict[str, Any]:
    try:
        doc = json.loads(body)
    except ValueError:
        return {"messageId": message_id, "unreadable": body[:1024]}
    if isinstance(doc, dict) and doc.get("kind") == "invalid_record":
        return {"messageId": message_id, **doc}
    # Lambda's own record of a batch it discarded after its retries (metadata, offsets).
    return {"messageId": message_id, "kind": "discarded_batch", "lambda": doc}
