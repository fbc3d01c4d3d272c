"""Kafka event source mappings in the embedded Lambda API (moto), as Lambda stores, lists and
reports them (design.md §6, §10): the control plane runs its real calls locally, and the local
poller (``kafka_local.KafkaEventSources``) reads them back."""

from __future__ import annotations

import socket
import threading
import time
import uuid
from collections.abc import Sequence
from typing import Any

# The start of what Lambda reports for a self-managed cluster it cannot reach.
CONNECTION_PROBLEM = (
    "PROBLEM: Connection error. Please check your event source connection configuration."
)
PROBE_EVERY_SECONDS = 5.0


class ClusterReachability:
    """What Lambda's Kafka poller finds when it connects, as its mappings' ``LastProcessingResult``:
    each self-managed cluster's bootstrap servers are tried (TCP) in the background, at most every
    PROBE_EVERY_SECONDS while its mappings are read; a read returns the last finding (none before
    the first), never waiting on a connection."""

    def __init__(self, timeout: float = 1.0) -> None:
        self._timeout = timeout
        self._found: dict[tuple[str, ...], tuple[float, str | None]] = {}
        self._probing: set[tuple[str, ...]] = set()
        self._lock = threading.Lock()

    def result(self, servers: Sequence[str]) -> str | None:
        key = tuple(servers)
        with self._lock:
            checked_at, found = self._found.get(key, (-1e18, None))
            stale = time.monotonic() - checked_at >= PROBE_EVERY_SECONDS
            if stale and key not in self._probing:
                self._probing.add(key)
                threading.Thread(
                    target=self._probe, args=(key,), name="kafka-reachability", daemon=True
                ).start()
        return found

    def _probe(self, key: tuple[str, ...]) -> None:
        found = CONNECTION_PROBLEM
        for server in key:
            host, _, port = server.rpartition(":")
            try:
                with socket.create_connection((host.strip("[]"), int(port)), self._timeout):
                    found = "OK"
                    break
            except (OSError, ValueError):
                continue
        with self._lock:
            self._found[key] = (time.monotonic(), found)
            self._probing.discard(key)


def allow_kafka_mappings_in_moto() -> None:
    """moto's CreateEventSourceMapping accepts only SQS, Kinesis and DynamoDB sources. Teach the
    embedded endpoint self-managed Kafka and MSK mappings, stored and listed as Lambda does, so
    that the control plane runs its real calls locally and the emulation reads them back."""
    from moto.awslambda import models
    from moto.awslambda.exceptions import InvalidParameterValueException
    from moto.awslambda.utils import make_event_source_mapping_arn

    backend: Any = models.LambdaBackend
    if getattr(backend, "_kafka_mappings", False):
        return
    original = backend.create_event_source_mapping
    reachability = ClusterReachability()

    class KafkaEventSourceMapping(models.EventSourceMapping):
        def __init__(self, spec: dict[str, Any], function_arn: str, region: str, account: str):
            self.region, self.account_id = region, account
            self.uuid = str(uuid.uuid4())
            self.function_name = spec["FunctionName"]
            # None for self-managed Kafka: such a mapping has no event source ARN
            self._event_source_arn = spec.get("EventSourceArn")  # type: ignore[assignment]
            self.arn = make_event_source_mapping_arn(region, account, self.uuid)
            self._batch_size = int(spec.get("BatchSize") or 100)
            self.starting_position = spec.get("StartingPosition")
            self.enabled = spec.get("Enabled", True)
            self.starting_position_timestamp = None
            self.kafka_config = spec.get("AmazonManagedKafkaEventSourceConfig")
            self.bisect_on_error = None
            self.destination_config = spec.get("DestinationConfig")
            self.document_db_config = None
            self.filter_criteria = spec.get("FilterCriteria")
            self.function_response_types = spec.get("FunctionResponseTypes")
            self.kms_key = None
            self.max_batch_window = spec.get("MaximumBatchingWindowInSeconds")
            self.max_record_age = spec.get("MaximumRecordAgeInSeconds")
            self.max_retry_attempts = spec.get("MaximumRetryAttempts")
            self.metrics = None
            self.parallelization_factor = None
            self.poller_config = spec.get("ProvisionedPollerConfig")
            self.queues = None
            self.scaling_config = None
            self.self_managed_event_source = spec.get("SelfManagedEventSource")
            self.self_managed_kafka_event_source_config = spec.get(
                "SelfManagedKafkaEventSourceConfig"
            )
            self.source_access_config = spec.get("SourceAccessConfigurations")
            self.tags = spec.get("Tags") or {}
            self.topics = spec.get("Topics")
            self.tumbling_window = None
            self.function_arn = function_arn
            self.last_modified = time.time()

        def get_configuration(self) -> dict[str, Any]:
            config: dict[str, Any] = super().get_configuration()
            servers = (self.self_managed_event_source or {}).get("Endpoints", {})
            found = reachability.result(servers.get("KAFKA_BOOTSTRAP_SERVERS") or [])
            if found is not None and self.enabled:
                config["LastProcessingResult"] = found
            return config

        @property
        def batch_size(self) -> int:
            return self._batch_size

        @batch_size.setter
        def batch_size(self, value: int | None) -> None:
            self._batch_size = int(value or 100)

    def create(self: Any, spec: dict[str, Any]) -> Any:
        kafka = spec.get("SelfManagedEventSource") or ":kafka:" in str(spec.get("EventSourceArn"))
        if not kafka:
            return original(self, spec)
        for required in ("FunctionName", "Topics", "StartingPosition"):
            if not spec.get(required):
                raise InvalidParameterValueException(f"Missing {required}")
        func = self._lambdas.get_function_by_name_or_arn_with_qualifier(spec["FunctionName"])
        esm = KafkaEventSourceMapping(  # type: ignore[abstract]
            spec, func.function_arn, self.region_name, self.account_id
        )
        self._event_source_mappings[esm.uuid] = esm
        return esm

    backend.create_event_source_mapping = create
    backend._kafka_mappings = True
