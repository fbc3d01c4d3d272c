"""Kafka event source mappings (self-managed Kafka and Amazon MSK) as Lambda's API spells them.

Requests carry exactly what the spec says; answers are read back into a KafkaMappingSpec so the
control plane compares desired and observed with ``==``.
"""

from __future__ import annotations

from typing import Any

from chalicelib.core.resources.kafka_source import KafkaMappingInfo, KafkaMappingSpec

ENABLED_STATES = {"Enabled", "Enabling", "Creating", "Updating"}


def create_request(spec: KafkaMappingSpec, enabled: bool) -> dict[str, Any]:
    """CreateEventSourceMapping parameters for ``spec``."""
    request: dict[str, Any] = {
        "FunctionName": spec.function_name,
        "Topics": [spec.topic],
        "StartingPosition": spec.starting_position,
        "BatchSize": spec.batch_size,
        "Enabled": enabled,
    }
    group = {"ConsumerGroupId": spec.consumer_group}
    if spec.cluster_arn is not None:
        request["EventSourceArn"] = spec.cluster_arn
        request["AmazonManagedKafkaEventSourceConfig"] = group
    else:
        request["SelfManagedEventSource"] = {
            "Endpoints": {"KAFKA_BOOTSTRAP_SERVERS": list(spec.bootstrap_servers)}
        }
        request["SelfManagedKafkaEventSourceConfig"] = group
    request.update(mutable_fields(spec))
    return request


def mutable_fields(spec: KafkaMappingSpec) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if spec.access:
        out["SourceAccessConfigurations"] = [{"Type": t, "URI": u} for t, u in spec.access]
    if spec.on_failure:
        out["DestinationConfig"] = {"OnFailure": {"Destination": spec.on_failure}}
    return out


def spec_of(m: dict[str, Any]) -> KafkaMappingSpec | None:
    """The spec of a mapping as Lambda lists it; None for a mapping that does not read Kafka."""
    topics = m.get("Topics") or []
    self_managed = m.get("SelfManagedEventSource")
    arn = m.get("EventSourceArn")
    if not topics or not (self_managed or (arn and ":kafka:" in arn)):
        return None
    if self_managed:
        servers = tuple(self_managed.get("Endpoints", {}).get("KAFKA_BOOTSTRAP_SERVERS", []))
        group = m.get("SelfManagedKafkaEventSourceConfig") or {}
        cluster_arn = None
    else:
        servers = ()
        group = m.get("AmazonManagedKafkaEventSourceConfig") or {}
        cluster_arn = arn
    destination = ((m.get("DestinationConfig") or {}).get("OnFailure") or {}).get("Destination")
    access = tuple(sorted((a["Type"], a["URI"]) for a in m.get("SourceAccessConfigurations") or []))
    return KafkaMappingSpec(
        function_name=_function_name(str(m.get("FunctionArn", ""))),
        topic=str(topics[0]),
        # Lambda uses the mapping's UUID as the group when none was given.
        consumer_group=str(group.get("ConsumerGroupId") or m["UUID"]),
        starting_position=str(m.get("StartingPosition", "LATEST")),
        bootstrap_servers=servers,
        cluster_arn=cluster_arn,
        batch_size=int(m.get("BatchSize", 100)),
        access=access,
        on_failure=destination or None,
    )


def _function_name(arn: str) -> str:
    """``arn:aws:lambda:region:account:function:name[:qualifier]`` -> name."""
    return arn.split(":")[6] if arn.startswith("arn:") else arn


def kafka_info(m: dict[str, Any]) -> KafkaMappingInfo | None:
    spec = spec_of(m)
    if spec is None or m.get("State") == "Deleting":  # going away: neither keep nor delete it
        return None
    result = str(m.get("LastProcessingResult") or "")
    problem = result if result.upper().startswith("PROBLEM") else None
    enabled = m.get("State", "Enabled") in ENABLED_STATES
    return KafkaMappingInfo(str(m["UUID"]), spec, enabled, problem)
