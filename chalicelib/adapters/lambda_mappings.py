"""Mappings on Lambda event source mappings: SQS queues and Kafka topics (design.md §4, §10)."""

from __future__ import annotations

import builtins
from collections.abc import Iterator
from typing import Any

from chalicelib.adapters.aws_clients import AwsClients
from chalicelib.adapters.aws_errors import translated
from chalicelib.adapters.kafka_mappings import (
    ENABLED_STATES,
    create_request,
    kafka_info,
    mutable_fields,
)
from chalicelib.core.reconcile import CreateMapping
from chalicelib.core.resources.kafka_source import KafkaMappingInfo, KafkaMappingSpec
from chalicelib.ports import MappingInfo


class LambdaMappings:
    def __init__(self, clients: AwsClients) -> None:
        self._clients = clients

    @property
    def _lambda(self) -> Any:
        return self._clients.client("lambda")

    def _listed(self, function_name: str) -> Iterator[dict[str, Any]]:
        kwargs: dict[str, Any] = {"FunctionName": function_name}
        with translated(f"list mappings of {function_name}"):
            while True:
                out = self._lambda.list_event_source_mappings(**kwargs)
                yield from out.get("EventSourceMappings", [])
                if not out.get("NextMarker"):
                    break
                kwargs["Marker"] = out["NextMarker"]

    # ---- SQS ----------------------------------------------------------------------------------

    def list(self, function_name: str) -> builtins.list[MappingInfo]:
        # DeleteEventSourceMapping is asynchronous on AWS (and LocalStack): a deleted mapping is
        # listed as Deleting for a while. It is gone as far as planning goes (not to be enabled).
        found = [
            _info(m, function_name)
            for m in self._listed(function_name)
            if m.get("State") != "Deleting"
        ]
        return sorted(found, key=lambda m: (m.source_arn, m.uuid))

    def create(self, source_arn: str, mapping: CreateMapping) -> MappingInfo:
        function_name = mapping.function_name
        request: dict[str, Any] = {
            "EventSourceArn": source_arn,
            "FunctionName": function_name,
            "BatchSize": mapping.batch_size,
            "Enabled": mapping.enabled,
            "FunctionResponseTypes": builtins.list(mapping.function_response_types),
        }
        if mapping.maximum_concurrency is not None:
            request["ScalingConfig"] = {"MaximumConcurrency": mapping.maximum_concurrency}
        with translated(f"create mapping {source_arn} -> {function_name}"):
            out = self._lambda.create_event_source_mapping(**request)
        return _info(out, function_name)

    def set_enabled(self, uuid: str, enabled: bool) -> None:
        with translated(f"update mapping {uuid}"):
            self._lambda.update_event_source_mapping(UUID=uuid, Enabled=enabled)

    def set_concurrency(self, uuid: str, maximum_concurrency: int) -> None:
        with translated(f"update mapping {uuid}"):
            self._lambda.update_event_source_mapping(
                UUID=uuid, ScalingConfig={"MaximumConcurrency": maximum_concurrency}
            )

    # ---- Kafka --------------------------------------------------------------------------------

    def list_kafka(self, function_name: str) -> builtins.list[KafkaMappingInfo]:
        found = [i for i in map(kafka_info, self._listed(function_name)) if i is not None]
        return sorted(found, key=lambda i: (i.spec.cluster_id, i.spec.topic, i.uuid))

    def create_kafka(self, spec: KafkaMappingSpec, enabled: bool) -> KafkaMappingInfo:
        with translated(f"create Kafka mapping {spec.topic} -> {spec.function_name}"):
            out = self._lambda.create_event_source_mapping(**create_request(spec, enabled))
        info = kafka_info(out)
        return info if info is not None else KafkaMappingInfo(str(out["UUID"]), spec, enabled)

    def update_kafka(self, uuid: str, spec: KafkaMappingSpec, enabled: bool) -> None:
        request: dict[str, Any] = {
            "UUID": uuid,
            "BatchSize": spec.batch_size,
            "Enabled": enabled,
            # Empty values clear what the spec no longer has.
            "SourceAccessConfigurations": [],
            "DestinationConfig": {"OnFailure": {}},
        }
        request.update(mutable_fields(spec))
        with translated(f"update Kafka mapping {uuid}"):
            self._lambda.update_event_source_mapping(**request)

    # ---- both ---------------------------------------------------------------------------------

    def delete(self, uuid: str) -> None:
        with translated(f"delete mapping {uuid}"):
            self._lambda.delete_event_source_mapping(UUID=uuid)


def _info(m: dict[str, Any], function_name: str) -> MappingInfo:
    return MappingInfo(
        uuid=m["UUID"],
        source_arn=m.get("EventSourceArn", ""),
        function_name=m.get("FunctionArn", function_name).rsplit(":", 1)[-1],
        enabled=m.get("State", "Enabled") in ENABLED_STATES,
        batch_size=int(m.get("BatchSize", 10)),
        function_response_types=tuple(m.get("FunctionResponseTypes", ())),
        maximum_concurrency=(m.get("ScalingConfig") or {}).get("MaximumConcurrency"),
    )
