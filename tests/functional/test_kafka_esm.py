"""The local Kafka event source emulation against a real Kafka-protocol broker (Tansu) and the
embedded Lambda API (moto): the exact Lambda event shape, commits only of what the handler
accepted, retries of a failed batch, the OnFailure destination, and resuming from the committed
offset after a restart."""

from __future__ import annotations

import base64
import json
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from brokerctl.embedded_aws import free_port
from brokerctl.kafka_local import KafkaEventSources, LocalKafka, allow_kafka_mappings_in_moto

pytestmark = [
    pytest.mark.kafka,
    # kafka-python 3.0 loads its protocol schemas with deprecated importlib.resources calls.
    pytest.mark.filterwarnings(r"ignore:\w+ is deprecated. Use files\(\) instead"),
]


@pytest.fixture(scope="module")
def kafka() -> Iterator[str]:
    broker = LocalKafka("127.0.0.1", free_port())
    yield broker.start()
    broker.stop()


@pytest.fixture
def lambda_env(aws_settings: Any, aws_clients: Any) -> tuple[Any, str]:
    from brokerctl.bootstrap import bootstrap

    allow_kafka_mappings_in_moto()
    bootstrap(aws_settings, aws_clients, say=lambda line: None)
    return aws_clients, aws_settings.kafka_function


class Recorder:
    """A handler that records every event; ``fail`` decides per call (1-based) to raise."""

    def __init__(self, fail: Callable[[int], bool] = lambda n: False) -> None:
        self.events: list[dict[str, Any]] = []
        self._fail = fail
        self._cond = threading.Condition()

    def __call__(self, event: dict[str, Any], context: Any) -> dict[str, Any]:
        with self._cond:
            self.events.append(event)
            n = len(self.events)
            self._cond.notify_all()
        if self._fail(n):
            raise RuntimeError(f"invocation {n} fails on purpose")
        return {}

    def offsets(self) -> list[int]:
        return [r["offset"] for e in self.events for recs in e["records"].values() for r in recs]

    def wait(self, predicate: Callable[[Recorder], bool], timeout: float = 30) -> None:
        with self._cond:
            assert self._cond.wait_for(lambda: predicate(self), timeout), self.offsets()


def topic_with_one_partition(bootstrap: str) -> str:
    from kafka.admin import KafkaAdminClient, NewTopic

    topic = f"esm-{uuid.uuid4().hex[:8]}"
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics([NewTopic(topic, 1, 1)])
    admin.close()
    return topic


def produce(bootstrap: str, topic: str, ids: list[str]) -> None:
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
    for i in ids:
        headers = [("ce_specversion", b"1.0"), ("ce_id", i.encode()), ("ce_subject", "ü".encode())]
        producer.send(topic, key=f"k-{i}".encode(), value=f"v-{i}".encode(), headers=headers).get(
            10
        )
    producer.close()


def mapping(clients: Any, function: str, bootstrap: str, topic: str, **extra: Any) -> str:
    out = clients.client("lambda").create_event_source_mapping(
        FunctionName=function,
        Topics=[topic],
        StartingPosition="TRIM_HORIZON",
        BatchSize=10,
        SelfManagedEventSource={"Endpoints": {"KAFKA_BOOTSTRAP_SERVERS": [bootstrap]}},
        SelfManagedKafkaEventSourceConfig={"ConsumerGroupId": f"group-{topic}"},
        **extra,
    )
    return str(out["UUID"])


def wait_for_messages(sqs: Any, url: str, timeout: float = 20) -> list[dict[str, Any]]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=1)
        if got.get("Messages"):
            return list(got["Messages"])
    raise AssertionError(f"nothing reached {url} within {timeout}s")


def sources(clients: Any, function: str, handler: Any) -> KafkaEventSources:
    esm = KafkaEventSources(clients, function, handler, log=lambda line: None, refresh_seconds=0.2)
    esm.start()
    return esm


def test_event_shape_retry_and_resume_from_committed_offset(
    kafka: str, lambda_env: tuple[Any, str]
) -> None:
    clients, function = lambda_env
    topic = topic_with_one_partition(kafka)
    uuid_ = mapping(clients, function, kafka, topic)
    produce(kafka, topic, ["a", "b", "c"])
    handler = Recorder(fail=lambda n: n == 1)  # the first invocation fails: nothing committed
    esm = sources(clients, function, handler)
    try:
        handler.wait(lambda h: h.offsets().count(2) >= 2)
    finally:
        esm.stop()
    first, retried = handler.events[0], handler.events[1]
    assert first == retried  # the same batch again, from its first offset
    assert set(first) == {"eventSource", "bootstrapServers", "records"}
    assert first["eventSource"] == "SelfManagedKafka" and first["bootstrapServers"] == kafka
    [(key, records)] = first["records"].items()
    assert key == f"{topic}-0"
    record = records[0]
    assert set(record) == {"topic", "partition", "offset", "timestamp", "timestampType", "key",
                           "value", "headers"}  # fmt: skip
    assert (record["topic"], record["partition"], record["offset"]) == (topic, 0, 0)
    assert record["timestampType"] == "CREATE_TIME" and isinstance(record["timestamp"], int)
    assert base64.b64decode(record["key"]) == b"k-a" and base64.b64decode(record["value"]) == b"v-a"
    assert record["headers"] == [
        {"ce_specversion": [49, 46, 48]},
        {"ce_id": [97]},
        {"ce_subject": [-61, -68]},  # "ü" in UTF-8, as signed (Java) bytes
    ]
    assert handler.offsets() == [0, 1, 2, 0, 1, 2]

    # A restart resumes from the committed offset: only what came after is delivered.
    produce(kafka, topic, ["d", "e"])
    again = Recorder()
    esm = sources(clients, function, again)
    try:
        again.wait(lambda h: 4 in h.offsets())
        time.sleep(0.5)  # and nothing older arrives late
    finally:
        esm.stop()
    assert again.offsets() == [3, 4]
    clients.client("lambda").delete_event_source_mapping(UUID=uuid_)


def test_a_stop_mid_retry_commits_nothing(kafka: str, lambda_env: tuple[Any, str]) -> None:
    clients, function = lambda_env
    topic = topic_with_one_partition(kafka)
    uuid_ = mapping(clients, function, kafka, topic)
    produce(kafka, topic, ["a", "b"])
    failing = Recorder(fail=lambda n: True)
    esm = sources(clients, function, failing)
    try:
        failing.wait(lambda h: len(h.events) >= 1)
    finally:
        esm.stop()
    ok = Recorder()
    esm = sources(clients, function, ok)
    try:
        ok.wait(lambda h: 1 in h.offsets())
    finally:
        esm.stop()
    assert ok.offsets() == [0, 1]
    clients.client("lambda").delete_event_source_mapping(UUID=uuid_)


def test_exhausted_retries_go_to_the_on_failure_queue(
    kafka: str, lambda_env: tuple[Any, str]
) -> None:
    clients, function = lambda_env
    sqs = clients.client("sqs")
    queue = f"sb-local-esm-{uuid.uuid4().hex[:8]}-kafka-failures"
    url = sqs.create_queue(QueueName=queue)["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    topic = topic_with_one_partition(kafka)
    uuid_ = mapping(
        clients,
        function,
        kafka,
        topic,
        MaximumRetryAttempts=1,
        DestinationConfig={"OnFailure": {"Destination": arn}},
    )
    produce(kafka, topic, ["a", "b"])
    failing = Recorder(fail=lambda n: n <= 2)  # the first attempt and its one retry fail
    esm = sources(clients, function, failing)
    try:
        failing.wait(lambda h: len(h.events) >= 2)
        messages = wait_for_messages(sqs, url)
        produce(kafka, topic, ["c"])
        failing.wait(lambda h: 2 in h.offsets())
    finally:
        esm.stop()
    [doc] = [json.loads(m["Body"]) for m in messages]
    assert doc["requestContext"]["condition"] == "RetryAttemptsExhausted"
    assert doc["requestContext"]["approximateInvokeCount"] == 2
    info = doc["KafkaBatchInfo"]
    assert (info["topic"], info["partition"], info["firstOffset"], info["lastOffset"]) == (
        topic, 0, 0, 1,
    )  # fmt: skip
    # The discarded batch is committed: the next invocation starts after it.
    assert failing.offsets()[:4] == [0, 1, 0, 1] and failing.offsets()[4:] == [2]
    clients.client("lambda").delete_event_source_mapping(UUID=uuid_)


def test_partial_batch_response_commits_up_to_the_first_failure(
    kafka: str, lambda_env: tuple[Any, str]
) -> None:
    clients, function = lambda_env
    topic = topic_with_one_partition(kafka)
    uuid_ = mapping(
        clients, function, kafka, topic, FunctionResponseTypes=["ReportBatchItemFailures"]
    )
    produce(kafka, topic, ["a", "b", "c"])
    answers = [
        {"batchItemFailures": [{"itemIdentifier": {"topic-partition": f"{topic}-0", "offset": 1}}]}
    ]

    def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        recorder(event, context)
        return answers.pop(0) if answers else {}

    recorder = Recorder()
    esm = sources(clients, function, handler)
    try:
        recorder.wait(lambda h: len(h.events) >= 2)
    finally:
        esm.stop()
    assert recorder.offsets() == [0, 1, 2, 1, 2]  # offset 0 was accepted and committed
    again = Recorder()
    esm = sources(clients, function, again)
    try:
        produce(kafka, topic, ["d"])
        again.wait(lambda h: 3 in h.offsets())
    finally:
        esm.stop()
    assert again.offsets() == [3]
    clients.client("lambda").delete_event_source_mapping(UUID=uuid_)
