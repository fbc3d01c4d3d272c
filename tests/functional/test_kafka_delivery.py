"""Triggers whose subscriber is ``kafka://host:port/topic`` (design.md §10): delivery through the
KafkaPublisher port, binary or structured, key from ``partitionkey``, same retry and dead-letter
rules as HTTP, on in-memory fakes."""

from __future__ import annotations

import base64
import json

import pytest

from chalicelib.core.cloudevents.kafka_binding import decode_record
from chalicelib.core.errors import ValidationError
from chalicelib.ports import HttpResponse
from tests.fakes import RecordingPublisher
from tests.functional.harness import Harness

URI = "kafka://kafka-1.example.com:9093/orders-out"


def setup(publisher: RecordingPublisher | None = None, **delivery: object) -> Harness:
    h = Harness(HttpResponse(500, {}, b"the HTTP sender must not be used"))
    h.container.kafka_publisher = publisher or RecordingPublisher()  # type: ignore[misc]
    h.broker()
    spec = {"delivery": delivery} if delivery else {}
    h.trigger("tr", uri=URI, filter={"type": "t"}, **spec)
    return h


def publisher(h: Harness) -> RecordingPublisher:
    p = h.container.kafka_publisher
    assert isinstance(p, RecordingPublisher)
    return p


def test_binary_record_with_partition_key() -> None:
    h = setup()
    h.send(data=b"\x00payload\xff", partitionkey="customer-7", subject="s p")
    answer = h.deliver_once("tr")
    assert answer["batchItemFailures"] == []
    [sent] = publisher(h).published
    assert (sent.bootstrap_servers, sent.topic) == ("kafka-1.example.com:9093", "orders-out")
    assert sent.record.key == b"customer-7"
    assert sent.record.value == b"\x00payload\xff"
    headers = dict(sent.record.headers)
    assert headers["ce_id"] == b"1" and headers["content-type"] == b"text/plain"
    assert headers["ce_subject"] == b"s p"  # Kafka headers are bytes: no percent-encoding
    assert "ce_knativebrokerttl" not in headers and "ce_knativearrivaltime" in headers
    event = decode_record(sent.record)
    assert event.type == "t" and event.get("partitionkey") == "customer-7"
    assert h.sender.sent == []
    outcomes = [r["outcome"] for r in h.archive.decoded() if r["kind"] == "delivery"]
    assert outcomes == ["delivered"]


def test_structured_record_with_format_json_and_no_key_without_partitionkey() -> None:
    h = setup(format="json")
    h.send(data=b"x")
    h.deliver_once("tr")
    [sent] = publisher(h).published
    assert sent.record.key is None
    assert dict(sent.record.headers)["content-type"].startswith(b"application/cloudevents+json")
    doc = json.loads(sent.record.value)
    assert doc["id"] == "1" and doc["type"] == "t" and "knativebrokerttl" not in doc


def test_publish_failure_is_retried_with_backoff_then_dead_lettered() -> None:
    h = setup(
        RecordingPublisher(fail_next=10), retry=1, backoffPolicy="linear", backoffDelay="PT3S"
    )
    h.send()
    answer = h.deliver_once("tr")
    assert len(answer["batchItemFailures"]) == 1
    message = h.queues._q(h.queue_of("tr"))["messages"][0]
    assert message.visible_at - h.queues._clock() == pytest.approx(3, abs=0.5)
    h.make_visible("tr")
    h.deliver_once("tr")
    [dead] = h.messages(h.dlq_of("tr"))
    assert dead["event"]["knativeerrorcode"] == 500
    assert dead["event"]["knativeerrordest"] == URI
    assert b"KafkaTimeoutError" in base64.b64decode(dead["event"]["knativeerrordata"])
    outcomes = [r["outcome"] for r in h.archive.decoded() if r["kind"] == "delivery"]
    assert outcomes == ["retry", "dead_lettered"]


def test_a_publish_that_succeeds_on_retry_is_delivered_once() -> None:
    h = setup(RecordingPublisher(fail_next=1), retry=3)
    h.send()
    h.deliver_once("tr")
    h.make_visible("tr")
    h.deliver_once("tr")
    assert len(publisher(h).published) == 1
    assert h.queues.depth(h.queue_of("tr")) == 0


@pytest.mark.parametrize(
    "uri",
    [
        "kafka://user:pw@kafka:9092/t",
        "kafka:///t",
        "kafka://kafka:9092/",
        "kafka://kafka:9092/bad topic",
        "kafka://kafka:9092/t?acks=1",
        "kafka://kafka:99999/t",
    ],
)
def test_invalid_kafka_uris_are_refused_at_create_time(uri: str) -> None:
    h = setup()
    with pytest.raises(ValidationError) as err:
        h.trigger("bad", uri=uri)
    assert err.value.problems[0].field == "spec.subscriber.uri"


def test_kafka_dead_letter_sink() -> None:
    h = Harness(HttpResponse(400, {}, b"no"))
    h.container.kafka_publisher = RecordingPublisher()  # type: ignore[misc]
    h.broker()
    h.trigger(
        "tr",
        uri="http://sub.example/",
        delivery={"deadLetterSink": {"uri": "kafka://dlq-kafka/dead"}},
    )
    h.send()
    h.deliver_once("tr")
    h.deliver_once("tr", dead_letter=True)
    [sent] = publisher(h).published
    assert (sent.bootstrap_servers, sent.topic) == ("dlq-kafka:9092", "dead")
    assert dict(sent.record.headers)["ce_knativeerrorcode"] == b"400"


def test_a_deployment_that_cannot_reach_kafka_refuses_kafka_uris_at_put() -> None:
    from dataclasses import replace

    from chalicelib.config import Settings

    settings = replace(Settings(), cache_ttl_seconds=0.0, local_mode=False, kafka_delivery=False)
    h = Harness(HttpResponse(202, {}, b""), settings=settings)
    h.broker()
    with pytest.raises(ValidationError) as err:
        h.trigger("k", uri=URI, delivery={"deadLetterSink": {"uri": "kafka://dlq:9092/dead"}})
    fields = [p.field for p in err.value.problems]
    assert fields == ["spec.subscriber.uri", "spec.delivery.deadLetterSink.uri"]
    assert "BROKER_KAFKA_DELIVERY" in err.value.problems[0].message
    with pytest.raises(ValidationError):
        h.broker(name="b2", delivery={"deadLetterSink": {"uri": "kafka://dlq:9092/dead"}})
    h.trigger("http", uri="http://sub.example/")  # HTTP subscribers are unaffected
    assert h.store.get("trigger", "ns", "k") is None


def test_settings_read_kafka_delivery_and_security_from_the_environment() -> None:
    from chalicelib.config import Settings

    deployed = {"BROKER_STAGE": "prod", "BROKER_LOCAL_MODE": "false"}
    assert Settings.from_env(deployed).kafka_delivery is False
    assert Settings.from_env({**deployed, "BROKER_KAFKA_DELIVERY": "true"}).kafka_delivery
    local = Settings.from_env({"BROKER_STAGE": "local", "BROKER_LOCAL_MODE": "true"})
    assert local.kafka_delivery is True
    sasl = Settings.from_env(
        {
            **deployed,
            "BROKER_KAFKA_SECURITY_PROTOCOL": "sasl_ssl",
            "BROKER_KAFKA_SASL_MECHANISM": "SCRAM-SHA-512",
            "BROKER_KAFKA_SECRET_ARN": "arn:aws:secretsmanager:us-east-1:1:secret:k",
        }
    )
    assert (sasl.kafka_security_protocol, sasl.kafka_sasl_mechanism) == (
        "SASL_SSL",
        "SCRAM-SHA-512",
    )
