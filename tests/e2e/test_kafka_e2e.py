"""Kafka end to end on the local runtime (``brokerctl dev --kafka``: Tansu on loopback and the Kafka
event source emulation): CloudEvents produced to a topic reach an HTTP subscriber through a
KafkaSource and a trigger, unchanged; a malformed record reaches the source's failure destination;
a trigger delivers to a Kafka topic, consumed back and compared; a restarted runtime resumes from
the committed offset."""

from __future__ import annotations

import base64
import json
import time
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from brokerctl.embedded_aws import free_port
from brokerctl.event_display import EventDisplay
from brokerctl.kafka_local import LocalKafka
from chalicelib.core.cloudevents import codec
from chalicelib.core.cloudevents.kafka_binding import KafkaRecord, decode_record
from tests.e2e.conftest import LocalBroker, start_local_broker, stop_local_broker, wait_until

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.kafka,
    # kafka-python 3.0 loads its protocol schemas with deprecated importlib.resources calls.
    pytest.mark.filterwarnings(r"ignore:\w+ is deprecated. Use files\(\) instead"),
]

KS = "/apis/sources.knative.dev/v1/namespaces"


@pytest.fixture(scope="module")
def kafka() -> Iterator[str]:
    """Tansu outside the runtime (``--kafka-bootstrap``), so that it outlives a restart."""
    broker = LocalKafka("127.0.0.1", free_port())
    yield broker.start()
    broker.stop()


def start(kafka: str) -> LocalBroker:
    return start_local_broker({"BROKER_KAFKA": "true", "BROKER_KAFKA_BOOTSTRAP": kafka})


@pytest.fixture(scope="module")
def runtime(kafka: str) -> Iterator[LocalBroker]:
    broker = start(kafka)
    yield broker
    stop_local_broker(broker)


def put_source(broker: LocalBroker, ns: str, name: str, spec: dict[str, Any]) -> dict[str, Any]:
    body = {"metadata": {"name": name}, "spec": spec}
    r = httpx.put(f"{broker.url}{KS}/{ns}/kafkasources/{name}", json=body, timeout=30)
    assert r.status_code in (200, 201), r.text

    def ready() -> dict[str, Any] | None:
        doc: dict[str, Any] = httpx.get(f"{broker.url}{KS}/{ns}/kafkasources/{name}").json()
        conds = {c["type"]: c["status"] for c in doc["status"]["conditions"]}
        return doc if conds.get("Ready") == "True" else None

    ready_doc: dict[str, Any] = wait_until(ready, 30, f"kafkasource {name} Ready")
    return ready_doc


def broker_and_trigger(broker: LocalBroker, ns: str, uri: str, **delivery: Any) -> None:
    r = broker.put(ns, "brokers", "default", {"metadata": {"name": "default"}})
    assert r.status_code in (200, 201), r.text
    spec: dict[str, Any] = {"broker": "default", "subscriber": {"uri": uri}}
    if delivery:
        spec["delivery"] = delivery
    r = broker.put(ns, "triggers", "to-sub", {"metadata": {"name": "to-sub"}, "spec": spec})
    assert r.status_code in (200, 201), r.text
    broker.wait_ready(ns, "triggers", "to-sub")


def source_spec(kafka: str, topic: str, **more: Any) -> dict[str, Any]:
    return {
        "bootstrapServers": [kafka],
        "topics": [topic],
        "initialOffset": "earliest",
        "sink": {"ref": {"kind": "Broker", "name": "default"}},
        **more,
    }


def produce(kafka: str, topic: str, records: list[KafkaRecord]) -> None:
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=kafka, acks="all")
    for r in records:
        producer.send(topic, key=r.key, value=r.value, headers=list(r.headers)).get(10)
    producer.close()


def binary_record(event_id: str, data: bytes, **attrs: str) -> KafkaRecord:
    headers = [
        ("ce_specversion", b"1.0"),
        ("ce_id", event_id.encode()),
        ("ce_source", b"/kafka/e2e"),
        ("ce_type", b"com.example.order"),
        *((f"ce_{k}", v.encode()) for k, v in attrs.items()),
        ("content-type", b"application/octet-stream"),
    ]
    return KafkaRecord(event_id.encode(), data, tuple(headers))


def sent_attributes(record: KafkaRecord) -> dict[str, Any]:
    return dict(decode_record(record).attributes)


def received_attributes(got: Any) -> dict[str, Any]:
    """The attributes of a delivered request, decoded by the HTTP binding."""
    attrs = dict(codec.decode_http(got.headers, got.body)[0].attributes)
    assert attrs.pop("knativearrivaltime")  # the broker adds it, as over HTTP
    return attrs


def test_binary_and_structured_events_from_kafka_reach_an_http_subscriber(
    runtime: LocalBroker, kafka: str
) -> None:
    ns, topic = f"k-{uuid.uuid4().hex[:6]}", f"in-{uuid.uuid4().hex[:6]}"
    with EventDisplay() as subscriber:
        broker_and_trigger(runtime, ns, subscriber.url + "/orders")
        doc = put_source(runtime, ns, "orders", source_spec(kafka, topic))
        assert doc["status"]["sinkUri"] == f"{runtime.url}/{ns}/default"
        binary = binary_record("bin-1", bytes(range(256)), subject="größe 42%", myext="v1")
        structured_doc = {
            "specversion": "1.0",
            "id": "json-1",
            "source": "/kafka/e2e",
            "type": "com.example.order",
            "datacontenttype": "application/json",
            "data": {"total": 12.5, "items": ["a", "b"], "note": "ü"},
        }
        structured = KafkaRecord(
            None,
            json.dumps(structured_doc).encode(),
            (("content-type", b"application/cloudevents+json; charset=UTF-8"),),
        )
        produce(kafka, topic, [binary, structured])
        assert subscriber.wait_for(lambda got: len(got) >= 2, timeout=60)
        by_id = {g.headers["ce-id"]: g for g in subscriber.received}
        got_binary = by_id["bin-1"]
        assert got_binary.path == "/orders"
        assert got_binary.body == bytes(range(256))  # data byte for byte
        assert received_attributes(got_binary) == sent_attributes(
            binary
        )  # every attribute, unchanged
        got_json = by_id["json-1"]
        assert json.loads(got_json.body) == structured_doc["data"]
        expected = {k: v for k, v in structured_doc.items() if k != "data"}
        assert received_attributes(got_json) == expected
        time.sleep(0.5)
        assert len(subscriber.received) == 2


def test_a_malformed_record_reaches_the_failure_destination(
    runtime: LocalBroker, kafka: str
) -> None:
    ns, topic = f"k-{uuid.uuid4().hex[:6]}", f"bad-{uuid.uuid4().hex[:6]}"
    with EventDisplay() as subscriber:
        broker_and_trigger(runtime, ns, subscriber.url)
        put_source(runtime, ns, "bad", source_spec(kafka, topic))
        missing_id = KafkaRecord(
            b"k", b"oops", (("ce_specversion", b"1.0"), ("ce_source", b"/s"), ("ce_type", b"t"))
        )
        produce(kafka, topic, [missing_id, binary_record("after-1", b"fine")])
        assert subscriber.wait_for(lambda got: len(got) >= 1, timeout=60)
        assert subscriber.received[0].headers["ce-id"] == "after-1"  # the batch went on

        def failures() -> list[dict[str, Any]]:
            url = f"{runtime.url}{KS}/{ns}/kafkasources/bad/failures"
            items: list[dict[str, Any]] = httpx.get(url).json()["items"]
            return items

        [failure] = wait_until(failures, 30, "the invalid record in the failure queue")
        assert failure["kind"] == "invalid_record" and failure["reason"] == "invalid_event"
        assert [p["field"] for p in failure["problems"]] == ["ce_id"]
        record = failure["record"]
        assert (record["topic"], record["offset"]) == (topic, 0)
        assert record["headers"][0] == {"ce_specversion": [49, 46, 48]}  # as Lambda shapes it


def test_a_trigger_delivers_to_a_kafka_topic(runtime: LocalBroker, kafka: str) -> None:
    from kafka import KafkaConsumer

    ns, out = f"k-{uuid.uuid4().hex[:6]}", f"out-{uuid.uuid4().hex[:6]}"
    broker_and_trigger(runtime, ns, f"kafka://{kafka}/{out}")
    headers = {
        "ce-specversion": "1.0",
        "ce-id": "http-1",
        "ce-source": "/http",
        "ce-type": "com.example.order",
        "ce-partitionkey": "customer-7",
        "ce-subject": "a%20b",
        "content-type": "application/octet-stream",
    }
    data = bytes(range(255, -1, -1))
    r = httpx.post(f"{runtime.url}/{ns}/default", content=data, headers=headers)
    assert r.status_code == 202, r.text
    consumer = KafkaConsumer(bootstrap_servers=kafka, auto_offset_reset="earliest", group_id=None)
    try:
        consumer.subscribe([out])
        got: list[Any] = []
        deadline = time.monotonic() + 60
        while not got and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=200).values():
                got.extend(records)
    finally:
        consumer.close()
    [record] = got
    assert record.key == b"customer-7"  # the partitionkey key mapper
    assert record.value == data
    event = decode_record(KafkaRecord(record.key, record.value, tuple(record.headers)))
    attrs = dict(event.attributes)
    assert attrs.pop("knativearrivaltime")
    assert attrs == {
        "specversion": "1.0",
        "id": "http-1",
        "source": "/http",
        "type": "com.example.order",
        "partitionkey": "customer-7",
        "subject": "a b",
        "datacontenttype": "application/octet-stream",
    }


def test_a_restarted_runtime_resumes_from_the_committed_offset(kafka: str) -> None:
    """The embedded AWS state lives in the runtime's process, the offsets in Kafka: after a
    restart the same source (same consumer group) delivers only what came after."""
    ns, topic = "resume", f"resume-{uuid.uuid4().hex[:6]}"
    spec = source_spec(kafka, topic, consumerGroup=f"group-{topic}")
    with EventDisplay() as subscriber:
        first = start(kafka)
        try:
            broker_and_trigger(first, ns, subscriber.url)
            put_source(first, ns, "resume", spec)
            produce(kafka, topic, [binary_record(f"r{i}", b"x") for i in range(3)])
            assert subscriber.wait_for(lambda got: len(got) >= 3, timeout=60)
        finally:
            stop_local_broker(first)
        produce(kafka, topic, [binary_record(f"r{i}", b"x") for i in range(3, 5)])
        second = start(kafka)
        try:
            broker_and_trigger(second, ns, subscriber.url)
            put_source(second, ns, "resume", spec)
            assert subscriber.wait_for(lambda got: len(got) >= 5, timeout=60)
            time.sleep(1.0)  # nothing older arrives late
        finally:
            stop_local_broker(second)
    ids = [g.headers["ce-id"] for g in subscriber.received]
    # Partitions interleave in any order; none is delivered twice.
    assert sorted(ids[:3]) == ["r0", "r1", "r2"] and sorted(ids[3:]) == ["r3", "r4"]


def test_dev_kafka_starts_and_stops_its_own_tansu() -> None:
    from brokerctl.embedded_aws import port_is_free
    from brokerctl.kafka_local import wait_for_kafka

    port = free_port()
    runtime = start_local_broker({"BROKER_KAFKA": "true", "BROKER_KAFKA_PORT": str(port)})
    try:
        assert f"kafka (Tansu) on 127.0.0.1:{port}" in runtime.lines
        wait_for_kafka(f"127.0.0.1:{port}", 10)
        produce(f"127.0.0.1:{port}", "smoke", [binary_record("s-1", b"x")])
    finally:
        stop_local_broker(runtime)
    assert runtime.process.returncode == 0
    wait_until(lambda: port_is_free("127.0.0.1", port), 10, "Tansu to release its port")


def test_without_the_kafka_flag_sources_are_read_from_the_clusters_they_name(kafka: str) -> None:
    """`make run` (no --kafka) reads a KafkaSource from the bootstrap servers it names, as Lambda
    does; a source naming a cluster that does not answer shows Ready=False with the reason."""
    plain = start_local_broker({})
    try:
        ns, topic = f"k-{uuid.uuid4().hex[:6]}", f"plain-{uuid.uuid4().hex[:6]}"
        with EventDisplay() as subscriber:
            broker_and_trigger(plain, ns, subscriber.url)
            put_source(plain, ns, "named", source_spec(kafka, topic))
            produce(kafka, topic, [binary_record("plain-1", b"read without --kafka")])
            assert subscriber.wait_for(lambda got: len(got) >= 1, timeout=60)
            assert subscriber.received[0].headers["ce-id"] == "plain-1"

        nowhere = f"127.0.0.1:{free_port()}"
        body = {"metadata": {"name": "nowhere"}, "spec": source_spec(nowhere, "t")}
        r = httpx.put(f"{plain.url}{KS}/{ns}/kafkasources/nowhere", json=body, timeout=30)
        assert r.status_code == 201, r.text

        def unreachable() -> dict[str, Any] | None:
            doc: dict[str, Any] = httpx.get(f"{plain.url}{KS}/{ns}/kafkasources/nowhere").json()
            conds = {c["type"]: c for c in doc["status"]["conditions"]}
            return conds["Ready"] if conds["Ready"]["status"] == "False" else None

        ready = wait_until(unreachable, 30, "the unreachable source to show Ready=False")
        assert ready["reason"] == "ClusterUnreachable" and "Connection error" in ready["message"]
    finally:
        stop_local_broker(plain)


def test_a_record_whose_data_breaks_pattern_matching_is_rejected_and_the_batch_goes_on(
    runtime: LocalBroker, kafka: str
) -> None:
    """Issue 31, item 4: a structured event whose data nests 900 arrays, read by a broker with an
    eventPattern trigger on data, does not hold up the records around it (before, its
    RecursionError failed the batch until Lambda's retries ran out, and took its neighbours along;
    tests/functional/test_kafka_ingress.py pins the rejection of any such error)."""
    ns, topic = f"k-{uuid.uuid4().hex[:6]}", f"deep-{uuid.uuid4().hex[:6]}"
    with EventDisplay() as subscriber:
        r = runtime.put(ns, "brokers", "default", {"metadata": {"name": "default"}})
        assert r.status_code in (200, 201), r.text
        spec = {
            "broker": "default",
            "subscriber": {"uri": subscriber.url},
            "filters": [{"eventPattern": {"data": {"n": [{"exists": True}]}}}],
        }
        r = runtime.put(ns, "triggers", "pattern", {"metadata": {"name": "pattern"}, "spec": spec})
        assert r.status_code in (200, 201), r.text
        runtime.wait_ready(ns, "triggers", "pattern")
        put_source(runtime, ns, "deep", source_spec(kafka, topic))
        deep: Any = 1
        for _ in range(900):
            deep = [deep]

        def structured(event_id: str, data: Any) -> KafkaRecord:
            doc = {"specversion": "1.0", "id": event_id, "source": "/k", "type": "t", "data": data}
            return KafkaRecord(
                None, json.dumps(doc).encode(), (("content-type", b"application/cloudevents+json"),)
            )

        produce(kafka, topic, [structured("ok-1", {"n": 1}), structured("deep-1", deep),
                               structured("ok-2", {"n": 2})])  # fmt: skip
        assert subscriber.wait_for(lambda got: len(got) >= 2, timeout=20)
        time.sleep(0.5)
        assert sorted(g.headers["ce-id"] for g in subscriber.received) == ["ok-1", "ok-2"]
        # Refused (depth bounded at decode, a RecursionError while matching) or matching nothing:
        # either way the partition went on; a refusal is in the failure queue, as produced.
        url = f"{runtime.url}{KS}/{ns}/kafkasources/deep/failures"
        for failure in httpx.get(url).json()["items"]:
            assert failure["reason"] == "invalid_event"
            assert json.loads(base64.b64decode(failure["record"]["value"]))["id"] == "deep-1"


def test_latest_reads_what_is_produced_right_after_ready(runtime: LocalBroker, kafka: str) -> None:
    """Issue 31, item 8: with initialOffset latest (the default) a record produced the moment the
    source is Ready is delivered: the group's offsets are committed before Ready, and the poller,
    however late it joins, resumes from them (before, it started at the log end it found when it
    joined and skipped the record)."""
    from kafka.admin import KafkaAdminClient, NewTopic

    ns, topic = f"k-{uuid.uuid4().hex[:6]}", f"latest-{uuid.uuid4().hex[:6]}"
    admin = KafkaAdminClient(bootstrap_servers=kafka)
    admin.create_topics([NewTopic(topic, 2, 1)])  # latest needs the topic, as Knative's does
    admin.close()
    produce(kafka, topic, [binary_record("before-1", b"older than the source")])
    with EventDisplay() as subscriber:
        broker_and_trigger(runtime, ns, subscriber.url)
        spec = source_spec(kafka, topic)
        del spec["initialOffset"]  # the default: latest
        doc = put_source(runtime, ns, "latest", spec)
        assert doc["spec"]["initialOffset"] == "latest"
        produce(kafka, topic, [binary_record("after-1", b"produced once Ready")])
        assert subscriber.wait_for(lambda got: len(got) >= 1, timeout=30)
        time.sleep(0.5)  # the record from before the source does not follow
        assert [g.headers["ce-id"] for g in subscriber.received] == ["after-1"]
