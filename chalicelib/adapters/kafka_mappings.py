"""KafkaMappings on Lambda event source mappings for self-managed Kafka and Amazon MSK.

Requests carry exactly what the spec says; answers are read back into a KafkaMappingSpec so the
control plane compares desired and observed with ``==``.
"""

from __future__ import annotations

from typing import Any

from chalicelib.adapters.aws_clients import AwsClients
from chalicelib.adapters.aws_errors import translated
from chalicelib.core.resources.kafka_source import KafkaMappingInfo, KafkaMappingSpec

_ENABLED = {"Enabled", "Enabling", "Creating", "Updating"}


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
    request.update(_mutable(spec))
    return request


def _mutable(spec: KafkaMappingSpec) -> dict[str, Any]:
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


class LambdaKafkaMappings:
    def __init__(self, clients: AwsClients) -> None:
        self._clients = clients

    @property
    def _lambda(self) -> Any:
        return self._clients.client("lambda")

    def list(self, function_name: str) -> list[KafkaMappingInfo]:
        found: list[KafkaMappingInfo] = []
        kwargs: dict[str, Any] = {"FunctionName": function_name}
        with translated(f"list Kafka mappings of {function_name}"):
            while True:
                out = self._lambda.list_event_source_mappings(**kwargs)
                for m in out.get("EventSourceMappings", []):
                    info = _info(m)
                    if info is not None:
                        found.append(info)
                if not out.get("NextMarker"):
                    break
                kwargs["Marker"] = out["NextMarker"]
        return sorted(found, key=lambda i: (i.spec.cluster_id, i.spec.topic, i.uuid))

    def create(self, spec: KafkaMappingSpec, enabled: bool) -> KafkaMappingInfo:
        with translated(f"create Kafka mapping {spec.topic} -> {spec.function_name}"):
            out = self._lambda.create_event_source_mapping(**create_request(spec, enabled))
        info = _info(out)
        return info if info is not None else KafkaMappingInfo(str(out["UUID"]), spec, enabled)

    def update(self, uuid: str, spec: KafkaMappingSpec, enabled: bool) -> None:
        request: dict[str, Any] = {
            "UUID": uuid,
            "BatchSize": spec.batch_size,
            "Enabled": enabled,
            # Empty values clear what the spec no longer has.
            "SourceAccessConfigurations": [],
            "DestinationConfig": {"OnFailure": {}},
        }
        request.update(_mutable(spec))
        with translated(f"update Kafka mapping {uuid}"):
            self._lambda.update_event_source_mapping(**request)

    def delete(self, uuid: str) -> None:
        with translated(f"delete Kafka mapping {uuid}"):
            self._lambda.delete_event_source_mapping(UUID=uuid)


def _function_name(arn: str) -> str:
    """``arn:aws:lambda:region:account:function:name[:qualifier]`` -> name."""
    return arn.split(":")[6] if arn.startswith("arn:") else arn


def _info(m: dict[str, Any]) -> KafkaMappingInfo | None:
    spec = spec_of(m)
    if spec is None or m.get("State") == "Deleting":  # going away: neither keep nor delete it
        return None
    return KafkaMappingInfo(str(m["UUID"]), spec, m.get("State", "Enabled") in _ENABLED)
