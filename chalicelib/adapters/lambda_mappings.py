"""Mappings on Lambda event source mappings (SQS → function)."""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from typing import Any

from chalicelib.adapters.aws_clients import AwsClients
from chalicelib.adapters.aws_errors import translated
from chalicelib.ports import MappingInfo


class LambdaMappings:
    def __init__(self, clients: AwsClients) -> None:
        self._clients = clients

    @property
    def _lambda(self) -> Any:
        return self._clients.client("lambda")

    def list(self, function_name: str) -> builtins.list[MappingInfo]:
        result: builtins.list[MappingInfo] = []
        kwargs: dict[str, Any] = {"FunctionName": function_name}
        with translated(f"list mappings of {function_name}"):
            while True:
                out = self._lambda.list_event_source_mappings(**kwargs)
                result.extend(_info(m, function_name) for m in out.get("EventSourceMappings", []))
                if not out.get("NextMarker"):
                    break
                kwargs["Marker"] = out["NextMarker"]
        return sorted(result, key=lambda m: (m.source_arn, m.uuid))

    def create(
        self,
        source_arn: str,
        function_name: str,
        batch_size: int,
        enabled: bool,
        function_response_types: Sequence[str],
    ) -> MappingInfo:
        with translated(f"create mapping {source_arn} -> {function_name}"):
            out = self._lambda.create_event_source_mapping(
                EventSourceArn=source_arn,
                FunctionName=function_name,
                BatchSize=batch_size,
                Enabled=enabled,
                FunctionResponseTypes=list(function_response_types),
            )
        return _info(out, function_name)

    def set_enabled(self, uuid: str, enabled: bool) -> None:
        with translated(f"update mapping {uuid}"):
            self._lambda.update_event_source_mapping(UUID=uuid, Enabled=enabled)

    def delete(self, uuid: str) -> None:
        with translated(f"delete mapping {uuid}"):
            self._lambda.delete_event_source_mapping(UUID=uuid)


def _info(m: dict[str, Any], function_name: str) -> MappingInfo:
    state = m.get("State", "Enabled")
    return MappingInfo(
        uuid=m["UUID"],
        source_arn=m.get("EventSourceArn", ""),
        function_name=m.get("FunctionArn", function_name).rsplit(":", 1)[-1],
        enabled=state in {"Enabled", "Enabling", "Creating", "Updating"},
        batch_size=int(m.get("BatchSize", 10)),
        function_response_types=tuple(m.get("FunctionResponseTypes", ())),
    )
