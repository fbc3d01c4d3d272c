"""The status of a KafkaSource (design.md §10): Knative's conditions, from what the control plane
found. Pure."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from chalicelib.core.resources.conditions import Condition, ConditionSet
from chalicelib.core.resources.kafka_source import KafkaSource

SINK_PROVIDED = "SinkProvided"
DEPLOYED = "Deployed"
INITIAL_OFFSETS_COMMITTED = "InitialOffsetsCommitted"  # Knative's KafkaSource condition
KAFKA_SOURCE_CONDITIONS = ConditionSet((SINK_PROVIDED, DEPLOYED, INITIAL_OFFSETS_COMMITTED))


def kafka_source_status(
    source: KafkaSource,
    *,
    broker_exists: bool,
    sink_uri: str,
    deployed: bool | None,
    message: str,
    failure_queue: str,
    now: datetime,
    previous: Mapping[str, Any] | None = None,
    connection_problem: str | None = None,
    offsets_committed: bool | None = None,
    offsets_message: str = "",
) -> dict[str, Any]:
    """``deployed``: whether the failure queue and the mapping exist as planned (None: not yet);
    ``connection_problem``: what Lambda's poller reports when it cannot read the cluster;
    ``offsets_committed``: whether the consumer group's initial offsets are committed (None: not
    tried yet), needed for ``latest`` only: a record produced once the source is Ready is read
    however late the consumers join."""
    before = [
        Condition.from_json(c)
        for c in (previous or {}).get("conditions") or []
        if isinstance(c, Mapping) and "type" in c and "status" in c
    ]
    manager = KAFKA_SOURCE_CONDITIONS.manage(before, now)
    if broker_exists:
        manager.mark_true(SINK_PROVIDED)
    else:
        manager.mark_false(
            SINK_PROVIDED,
            "BrokerDoesNotExist",
            f'Broker "{source.sink_broker}" does not exist; the mapping stays disabled until '
            "it does.",
        )
    if deployed is None:
        manager.mark_unknown(DEPLOYED, "Provisioning", message or "The mapping is being created.")
    elif not deployed:
        manager.mark_false(
            DEPLOYED, "DependencyNotReady", message or "The mapping or failure queue is missing."
        )
    elif connection_problem:
        manager.mark_false(
            DEPLOYED,
            "ClusterUnreachable",
            f"The mapping exists but cannot read the cluster: {connection_problem}",
        )
    else:
        manager.mark_true(DEPLOYED)
    if source.initial_offset == "earliest" or offsets_committed:
        manager.mark_true(INITIAL_OFFSETS_COMMITTED)
    elif offsets_committed is None:
        manager.mark_unknown(
            INITIAL_OFFSETS_COMMITTED, "Committing", "The initial offsets are being committed."
        )
    else:
        manager.mark_false(
            INITIAL_OFFSETS_COMMITTED,
            "OffsetsNotCommitted",
            f"The consumer group's initial offsets could not be committed; the mapping waits "
            f"for them: {offsets_message}",
        )
    status: dict[str, Any] = {
        "observedGeneration": source.generation,
        "conditions": manager.to_json(),
        "consumerGroup": source.consumer_group,
        "failureDestination": {"queue": failure_queue},
    }
    if broker_exists:
        status["sinkUri"] = sink_uri
    return status
