"""The Kafka ports' contract, on the in-memory fakes and on the real adapters: Kafka mappings
on Lambda (the embedded moto server, taught Kafka mappings as local mode does) and KafkaPublisher
on kafka-python against a real Kafka-protocol broker (Tansu)."""

from __future__ import annotations

import contextlib
import gc
import logging
import time
import uuid
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest

from brokerctl.embedded_aws import free_port
from brokerctl.kafka_local import LocalKafka, allow_kafka_mappings_in_moto
from chalicelib.core.cloudevents.kafka_binding import KafkaRecord
from chalicelib.core.errors import NotFoundError, UnavailableError
from chalicelib.core.resources.kafka_source import KafkaMappingSpec
from tests.backends import aws_env
from tests.fakes import MemoryMappings, RecordingPublisher

# kafka-python 3.0 imports its protocol schemas with a deprecated importlib.resources call.
pytestmark = pytest.mark.filterwarnings(r"ignore:\w+ is deprecated. Use files\(\) instead")

MSK = "arn:aws:kafka:us-east-1:123456789012:cluster/demo/0b1c2d3e-aaaa-bbbb-cccc-123456789012-1"
SECRET = "arn:aws:secretsmanager:us-east-1:123456789012:secret:sb/kafka/orders-AbCdEf"


# Not on LocalStack: its free tier refuses Kafka event source mappings ("Unsupported event source
# mapping source service kafka").
@pytest.fixture(params=["memory", "aws"])
def kafka_mappings(request: pytest.FixtureRequest) -> Any:
    if request.param == "memory":
        return MemoryMappings(), "fn-kafka"
    from brokerctl.bootstrap import bootstrap
    from chalicelib.adapters.lambda_mappings import LambdaMappings

    allow_kafka_mappings_in_moto()
    settings, clients = aws_env(request, request.param)
    bootstrap(settings, clients, say=lambda line: None)
    return LambdaMappings(clients), settings.kafka_function


def _spec(function: str, **kw: Any) -> KafkaMappingSpec:
    spec = KafkaMappingSpec(
        function_name=function,
        topic=f"t-{uuid.uuid4().hex[:8]}",
        consumer_group=f"g-{uuid.uuid4().hex[:8]}",
        starting_position="TRIM_HORIZON",
        bootstrap_servers=("k1.example.com:9092", "k2.example.com:9092"),
        batch_size=50,
        access=(("SASL_SCRAM_512_AUTH", SECRET),),
        on_failure="arn:aws:sqs:us-east-1:123456789012:sb-local-x-0123456789abcdef-kafka-failures",
    )
    return replace(spec, **kw)


def _mine(mappings: Any, function: str, uuid_: str) -> list[Any]:
    return [m for m in mappings.list_kafka(function) if m.uuid == uuid_]


def test_self_managed_mapping_lifecycle(kafka_mappings: Any) -> None:
    mappings, function = kafka_mappings
    spec = _spec(function)
    created = mappings.create_kafka(spec, True)
    [listed] = _mine(mappings, function, created.uuid)
    assert listed.spec == spec and listed.enabled
    changed = replace(spec, batch_size=7, access=(), on_failure=None)
    mappings.update_kafka(created.uuid, changed, False)
    [listed] = _mine(mappings, function, created.uuid)
    assert listed.spec == changed and not listed.enabled
    mappings.delete(created.uuid)
    assert _mine(mappings, function, created.uuid) == []
    # Lambda answers ResourceNotFoundException for a second delete (moto answers 200): either
    # way nothing is left, which is all the control plane relies on.
    with contextlib.suppress(NotFoundError):
        mappings.delete(created.uuid)
    assert _mine(mappings, function, created.uuid) == []


def test_msk_mapping_round_trip(kafka_mappings: Any) -> None:
    mappings, function = kafka_mappings
    spec = _spec(function, bootstrap_servers=(), cluster_arn=MSK, starting_position="LATEST")
    created = mappings.create_kafka(spec, True)
    [listed] = _mine(mappings, function, created.uuid)
    assert listed.spec == spec and listed.spec.cluster_id == MSK
    mappings.delete(created.uuid)


def test_create_request_is_what_lambda_documents() -> None:
    from chalicelib.adapters.kafka_mappings import create_request

    request = create_request(_spec("fn", topic="orders", consumer_group="g"), True)
    assert request == {
        "FunctionName": "fn",
        "Topics": ["orders"],
        "StartingPosition": "TRIM_HORIZON",
        "BatchSize": 50,
        "Enabled": True,
        "SelfManagedEventSource": {
            "Endpoints": {"KAFKA_BOOTSTRAP_SERVERS": ["k1.example.com:9092", "k2.example.com:9092"]}
        },
        "SelfManagedKafkaEventSourceConfig": {"ConsumerGroupId": "g"},
        "SourceAccessConfigurations": [{"Type": "SASL_SCRAM_512_AUTH", "URI": SECRET}],
        "DestinationConfig": {
            "OnFailure": {
                "Destination": "arn:aws:sqs:us-east-1:123456789012:"
                "sb-local-x-0123456789abcdef-kafka-failures"
            }
        },
    }
    msk = create_request(_spec("fn", bootstrap_servers=(), cluster_arn=MSK, access=()), False)
    assert msk["EventSourceArn"] == MSK
    assert set(msk["AmazonManagedKafkaEventSourceConfig"]) == {"ConsumerGroupId"}
    assert "SelfManagedEventSource" not in msk and "SourceAccessConfigurations" not in msk


# ---- KafkaPublisher ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def kafka() -> Iterator[str]:
    broker = LocalKafka("127.0.0.1", free_port())
    yield broker.start()
    broker.stop()


def _consume(bootstrap: str, topic: str, n: int, timeout: float = 20) -> list[Any]:
    from kafka import KafkaConsumer

    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        group_id=None,
    )
    try:
        consumer.subscribe([topic])
        got: list[Any] = []
        deadline = time.monotonic() + timeout
        while len(got) < n and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=200).values():
                got.extend(records)
        return got
    finally:
        consumer.close()


@pytest.fixture(params=["memory", pytest.param("kafka", marks=pytest.mark.kafka)])
def publisher(request: pytest.FixtureRequest) -> Iterator[tuple[Any, str, Any]]:
    if request.param == "memory":
        fake = RecordingPublisher()

        def read_back(topic: str, n: int) -> list[tuple[bytes | None, bytes | None, list[Any]]]:
            return [
                (p.record.key, p.record.value, list(p.record.headers))
                for p in fake.published
                if p.topic == topic
            ]

        yield fake, "memory:9092", read_back
        return
    from chalicelib.adapters.kafka_publisher import KafkaProducerPublisher

    bootstrap = request.getfixturevalue("kafka")
    real = KafkaProducerPublisher()

    def read_back_kafka(topic: str, n: int) -> list[tuple[bytes | None, bytes | None, list[Any]]]:
        got = [(r.key, r.value, list(r.headers)) for r in _consume(bootstrap, topic, n)]
        return sorted(got, key=lambda r: r[2])  # partitions interleave in any order

    yield real, bootstrap, read_back_kafka
    real.close()


def test_publish_is_acknowledged_and_reads_back_byte_for_byte(publisher: Any) -> None:
    pub, bootstrap, read_back = publisher
    topic = f"contract-{uuid.uuid4().hex[:8]}"
    record = KafkaRecord(
        b"key-1", bytes(range(256)), (("ce_id", b"1"), ("ce_subject", "größe".encode()))
    )
    result = pub.publish(bootstrap, topic, record, 10.0)
    assert result.ok and result.error is None
    tombstone = KafkaRecord(None, None, (("ce_id", b"2"),))
    assert pub.publish(bootstrap, topic, tombstone, 10.0).ok
    got = read_back(topic, 2)
    # kafka-python needs a key or a value: the adapter sends an empty key when both are null.
    tombstone_key = None if bootstrap.startswith("memory:") else b""
    assert got == [
        (b"key-1", bytes(range(256)), [("ce_id", b"1"), ("ce_subject", "größe".encode())]),
        (tombstone_key, None, [("ce_id", b"2")]),
    ]


@pytest.mark.kafka
# kafka-python 3.0.12 does not close a socket whose connect fails (kafka/net/inet.py); the
# garbage collector does, with a ResourceWarning, collected below while it is ignored.
@pytest.mark.filterwarnings("ignore::ResourceWarning")
def test_unreachable_cluster_is_a_result_not_an_exception() -> None:
    from chalicelib.adapters.kafka_publisher import KafkaProducerPublisher

    kafka_log = logging.getLogger("kafka")
    level = kafka_log.level
    # Captured log records of the failed connects would keep those sockets alive past the test.
    kafka_log.setLevel(logging.CRITICAL)
    try:
        pub = KafkaProducerPublisher()
        started = time.monotonic()
        result = pub.publish(f"127.0.0.1:{free_port()}", "t", KafkaRecord(None, b"x"), 1.0)
        assert not result.ok and result.error
        assert time.monotonic() - started < 10
        pub.close()
        gc.collect()
    finally:
        kafka_log.setLevel(level)


def test_local_lambda_reports_a_cluster_it_cannot_reach(
    aws_clients: Any, aws_settings: Any
) -> None:
    """The embedded endpoint plays Lambda's poller: a self-managed cluster that refuses
    connections is a PROBLEM in the mapping's LastProcessingResult; one that answers is not."""
    import socket

    from brokerctl.bootstrap import bootstrap
    from brokerctl.kafka_moto import CONNECTION_PROBLEM
    from chalicelib.adapters.lambda_mappings import LambdaMappings

    allow_kafka_mappings_in_moto()
    bootstrap(aws_settings, aws_clients, say=lambda line: None)
    mappings, function = LambdaMappings(aws_clients), aws_settings.kafka_function
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        dead = f"127.0.0.1:{closed.getsockname()[1]}"  # bound, never listening: refused
        with socket.create_server(("127.0.0.1", 0)) as listening:
            alive = f"127.0.0.1:{listening.getsockname()[1]}"
            down = mappings.create_kafka(_spec(function, bootstrap_servers=(dead,)), True)
            up = mappings.create_kafka(_spec(function, bootstrap_servers=(alive,)), True)
            try:
                deadline = time.monotonic() + 15
                while time.monotonic() < deadline:
                    found = {m.uuid: m for m in mappings.list_kafka(function)}
                    if found[down.uuid].problem is not None:
                        break
                    time.sleep(0.1)
                assert found[down.uuid].problem == CONNECTION_PROBLEM
                assert found[up.uuid].problem is None
            finally:
                mappings.delete(down.uuid)
                mappings.delete(up.uuid)


# ---- KafkaOffsets ----------------------------------------------------------------------------


class _OffsetsBackend:
    """One KafkaOffsets with what the contract needs around it: a topic whose partitions hold
    so many records, and the offsets a group has committed."""

    def __init__(self, offsets: Any, bootstrap: str, fake: Any = None) -> None:
        self.offsets, self.bootstrap, self._fake = offsets, bootstrap, fake

    def source(self, topic: str, group: str) -> Any:
        from chalicelib.core.resources.kafka_source import KafkaSource

        return KafkaSource(
            namespace="ns", name="s", uid="u", generation=1, creation_timestamp="",
            topics=(topic,), sink_broker="default", bootstrap_servers=(self.bootstrap,),
            consumer_group=group,
        )  # fmt: skip

    def topic(self, records: list[int]) -> str:
        topic = f"offsets-{uuid.uuid4().hex[:8]}"
        if self._fake is not None:
            cluster = self.source(topic, "").cluster_id
            self._fake.topics[(cluster, topic)] = list(records)
            return topic
        self.produce(topic, records, create=True)
        return topic

    def produce(self, topic: str, records: list[int], create: bool = False) -> None:
        if self._fake is not None:
            cluster = self.source(topic, "").cluster_id
            ends = self._fake.topics[(cluster, topic)]
            self._fake.topics[(cluster, topic)] = [
                e + n for e, n in zip(ends, records, strict=True)
            ]
            return
        from kafka import KafkaAdminClient, KafkaProducer
        from kafka.admin import NewTopic

        if create:
            admin = KafkaAdminClient(bootstrap_servers=self.bootstrap)
            admin.create_topics([NewTopic(topic, len(records), 1)])
            admin.close()
        producer = KafkaProducer(bootstrap_servers=self.bootstrap)
        for partition, n in enumerate(records):
            for i in range(n):
                producer.send(topic, f"{i}".encode(), partition=partition).get(10)
        producer.close()

    def committed(self, topic: str, group: str) -> dict[int, int]:
        if self._fake is not None:
            cluster = self.source(topic, "").cluster_id
            got = self._fake.groups.get((cluster, group), {})
            return {p: o for (t, p), o in got.items() if t == topic}
        from kafka import KafkaAdminClient

        admin = KafkaAdminClient(bootstrap_servers=self.bootstrap)
        try:
            found = admin.list_group_offsets(group).get(group, {})
        finally:
            admin.close()
        return {tp.partition: o.offset for tp, o in found.items() if tp.topic == topic}


@pytest.fixture(params=["memory", pytest.param("kafka", marks=pytest.mark.kafka)])
def kafka_offsets(request: pytest.FixtureRequest) -> _OffsetsBackend:
    if request.param == "memory":
        from tests.fakes.kafka_offsets import MemoryKafkaOffsets

        fake = MemoryKafkaOffsets()
        return _OffsetsBackend(fake, "memory:9092", fake)
    from chalicelib.adapters.kafka_offsets import AdminKafkaOffsets

    return _OffsetsBackend(
        AdminKafkaOffsets(None, local_mode=True),  # type: ignore[arg-type]
        request.getfixturevalue("kafka"),
    )


def test_initialize_commits_the_log_end_of_partitions_without_an_offset(
    kafka_offsets: _OffsetsBackend,
) -> None:
    backend = kafka_offsets
    topic, group = backend.topic([2, 0, 3]), f"g-{uuid.uuid4().hex[:8]}"
    assert backend.offsets.initialize(backend.source(topic, group)) == 3
    assert backend.committed(topic, group) == {0: 2, 1: 0, 2: 3}
    # Committed offsets are the group's: a second call (a source created again) keeps them.
    backend.produce(topic, [1, 1, 1])
    assert backend.offsets.initialize(backend.source(topic, group)) == 0
    assert backend.committed(topic, group) == {0: 2, 1: 0, 2: 3}


def test_initialize_refuses_a_topic_that_does_not_exist(kafka_offsets: _OffsetsBackend) -> None:
    backend = kafka_offsets
    if backend.bootstrap.startswith("memory:"):
        cluster = backend.source("absent", "").cluster_id
        backend.offsets.missing_topics.add((cluster, "absent"))
    with pytest.raises(UnavailableError, match="does not exist"):
        backend.offsets.initialize(backend.source("absent", "g-absent"))


@pytest.mark.kafka
@pytest.mark.filterwarnings("ignore::ResourceWarning")  # kafka-python's failed connects
def test_initialize_on_an_unreachable_cluster_is_unavailable_within_seconds() -> None:
    from chalicelib.adapters.kafka_offsets import AdminKafkaOffsets

    backend = _OffsetsBackend(AdminKafkaOffsets(None, local_mode=True), f"127.0.0.1:{free_port()}")  # type: ignore[arg-type]
    kafka_log = logging.getLogger("kafka")
    level = kafka_log.level
    kafka_log.setLevel(logging.CRITICAL)
    started = time.monotonic()
    try:
        with pytest.raises(UnavailableError, match="cannot connect"):
            backend.offsets.initialize(backend.source("t", "g"))
        gc.collect()
    finally:
        kafka_log.setLevel(level)
    assert time.monotonic() - started < 15
