"""kafka_ingress on in-memory fakes, fed the exact Lambda MSK and self-managed Kafka events in
tests/fixtures/kafka (design.md §10)."""

from __future__ import annotations

import base64
import copy
import json
from pathlib import Path
from typing import Any

import pytest

from app import kafka_ingress
from chalicelib.container import use_container
from chalicelib.core.errors import UnavailableError
from chalicelib.core.resources import kafka_source as ks
from chalicelib.ports import HttpResponse
from chalicelib.services.claims import CLAIM_PREFIX
from tests.functional.harness import Harness

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "kafka"
MSK_ARN = (
    "arn:aws:kafka:us-east-1:123456789012:cluster/demo-cluster/"
    "751d2973-a626-431c-9d4e-d7975eb44dd7-2"
)


def fixture(name: str) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((FIXTURES / name).read_text())
    return doc


def harness(*, broker: bool = True) -> Harness:
    h = Harness(HttpResponse(202, {}, b""))
    if broker:
        h.broker()
        h.trigger("all")
    return h


def source(h: Harness, name: str, topic: str, **cluster: Any) -> dict[str, Any]:
    body = {
        "metadata": {"name": name},
        "spec": {
            **cluster,
            "topics": [topic],
            "sink": {"ref": {"kind": "Broker", "name": "default"}},
        },
    }
    doc, _ = h.container.kafka_sources.put("ns", name, body)
    return doc


def msk(h: Harness) -> None:
    source(h, "orders", "orders", mskClusterArn=MSK_ARN)


def self_managed(h: Harness) -> None:
    # Order and case of the servers do not matter to find the source of a record.
    source(
        h,
        "payments",
        "payments",
        bootstrapServers=["KAFKA-2.example.com:9092", "kafka-1.example.com:9092"],
    )


def queued(h: Harness, trigger: str = "all") -> dict[str, dict[str, Any]]:
    return {m["event"]["id"]: m["event"] for m in h.messages(h.queue_of(trigger))}


def failures(h: Harness, name: str) -> list[dict[str, Any]]:
    return h.messages(ks.failure_queue_name(h.settings.queue_prefix, "ns", name))


def test_msk_event_binary_and_structured_are_ingested_unchanged() -> None:
    h = harness()
    msk(h)
    answer = h.container.kafka_ingress.handle(fixture("msk_event.json"))
    assert answer["ingested"] == 2
    events = queued(h)
    assert set(events) == {"bin-1", "json-1"}
    binary = events["bin-1"]
    assert base64.b64decode(binary["data_base64"]) == bytes(range(256))
    assert binary["datacontenttype"] == "application/octet-stream"
    assert binary["subject"] == "größe 42"  # header bytes arrive signed, as Java has them
    assert binary["partitionkey"] == "order-1" and binary["time"] == "2018-04-05T17:31:00Z"
    assert binary["knativebrokerttl"] == 255 and "knativearrivaltime" in binary
    structured = events["json-1"]
    assert structured["data"] == {"total": 12.5, "items": ["a", "b"]}
    assert structured["myext"] == "v1" and structured["datacontenttype"] == "application/json"
    # Kafka headers that Knative passes through over HTTP travel with the event.
    message = next(m for m in h.messages(h.queue_of("all")) if m["event"]["id"] == "bin-1")
    assert message["headers"]["traceparent"].startswith("00-0af7651916cd43dd8448eb211c80319c")


def test_msk_invalid_records_reach_the_failure_queue_with_the_reason() -> None:
    h = harness()
    msk(h)
    answer = h.container.kafka_ingress.handle(fixture("msk_event.json"))
    assert sorted((i["partition"], i["offset"], i["reason"]) for i in answer["invalid"]) == [
        (1, 7, "invalid_event"),
        (1, 8, "invalid_event"),
    ]
    got = {f["record"]["offset"]: f for f in failures(h, "orders")}
    assert set(got) == {7, 8}
    missing = got[7]
    assert missing["kind"] == "invalid_record" and missing["source"] == "orders"
    assert missing["broker"] == "default" and missing["namespace"] == "ns"
    assert [p["field"] for p in missing["problems"]] == ["ce_id"]
    # The record is kept exactly as Lambda delivered it, for inspection and replay.
    original = fixture("msk_event.json")["records"]["orders-1"]
    assert missing["record"] == original[0] and got[8]["record"] == original[1]
    assert "JSON" in got[8]["detail"] or "json" in got[8]["detail"].lower()
    rejected = [r for r in h.archive.decoded() if r["kind"] == "rejected"]
    assert [r["reason"] for r in rejected] == ["invalid_event", "invalid_event"]


def test_self_managed_event_tombstone_text_and_data_base64() -> None:
    h = harness()
    self_managed(h)
    answer = h.container.kafka_ingress.handle(fixture("self_managed_event.json"))
    assert answer["ingested"] == 3
    events = queued(h)
    assert "data" not in events["nodata-1"] and "data_base64" not in events["nodata-1"]
    assert events["text-1"]["data"] == "zahlung über 10 €"
    assert events["text-1"]["datacontenttype"] == "text/plain; charset=utf-8"
    assert base64.b64decode(events["b64-1"]["data_base64"]) == b"\x00\x01\xfe\xff"
    [failure] = failures(h, "payments")
    assert failure["record"]["offset"] == 13
    assert failure["problems"][0]["field"] == "ce_specversion"


def test_the_app_entry_point_is_the_service() -> None:
    h = harness()
    msk(h)
    use_container(h.container)
    try:
        answer = kafka_ingress(fixture("msk_event.json"), None)
    finally:
        use_container(None)
    assert answer["ingested"] == 2 and len(answer["invalid"]) == 2


def test_a_broker_that_cannot_store_fails_the_batch() -> None:
    h = harness()
    msk(h)
    h.queues.fail_next_sends = 100
    with pytest.raises(UnavailableError):
        h.container.kafka_ingress.handle(fixture("msk_event.json"))


def test_a_failure_queue_that_cannot_store_fails_the_batch() -> None:
    h = harness()
    msk(h)
    h.queues.delete(ks.failure_queue_name(h.settings.queue_prefix, "ns", "orders"))
    with pytest.raises(UnavailableError):
        h.container.kafka_ingress.handle(fixture("msk_event.json"))


def test_missing_broker_or_source_fails_the_batch() -> None:
    h = harness(broker=False)
    msk(h)
    with pytest.raises(UnavailableError, match="does not exist"):
        h.container.kafka_ingress.handle(fixture("msk_event.json"))
    h2 = harness()
    with pytest.raises(UnavailableError, match="no KafkaSource reads topic"):
        h2.container.kafka_ingress.handle(fixture("msk_event.json"))


def test_ttl_exhausted_record_goes_to_failures_and_the_rest_is_ingested() -> None:
    h = harness()
    msk(h)
    event = fixture("msk_event.json")
    record = event["records"]["orders-0"][0]
    record["headers"].append({"ce_knativebrokerttl": [ord("1")]})
    answer = h.container.kafka_ingress.handle(event)
    assert answer["ingested"] == 1 and set(queued(h)) == {"json-1"}
    reasons = {(i["offset"], i["reason"]) for i in answer["invalid"]}
    assert (15, "ttl_exceeded") in reasons


def test_oversized_record_is_claim_checked_in_s3() -> None:
    h = harness()
    h.broker(annotations={"serverless-broker/max-event-bytes": "1000"})
    msk(h)
    event = copy.deepcopy(fixture("msk_event.json"))
    big = b"x" * 300_000
    event["records"] = {
        "orders-0": [dict(event["records"]["orders-0"][0], value=base64.b64encode(big).decode())]
    }
    answer = h.container.kafka_ingress.handle(event)
    assert answer["invalid"][0]["reason"] == "too_large"
    [failure] = failures(h, "orders")
    assert "record" in failure and failure["record"]["offset"] == 15
    claim = failure["recordClaim"]
    stored = json.loads(h.blobs.get(claim["bucket"], claim["key"]))
    assert base64.b64decode(stored["value"]) == big
    assert claim["key"].startswith(CLAIM_PREFIX + "kafka-failures/ns/orders/")


def test_malformed_lambda_record_is_a_failure_not_a_crash() -> None:
    h = harness()
    msk(h)
    event = fixture("msk_event.json")
    event["records"] = {"orders-0": [dict(event["records"]["orders-0"][0], value="***")]}
    answer = h.container.kafka_ingress.handle(event)
    assert answer["invalid"][0]["reason"] == "invalid_event"
    assert "malformed" in failures(h, "orders")[0]["detail"]


# ---- one bad record is a counted rejection, never a failed batch (issue 31, item 4) ----------


def structured_record(offset: int, event_id: str, data: Any) -> dict[str, Any]:
    """A Lambda record whose value is a structured CloudEvent with JSON ``data``."""
    doc = {"specversion": "1.0", "id": event_id, "source": "/s", "type": "t", "data": data}
    value = json.dumps(doc).encode()
    return {
        "topic": "orders",
        "partition": 0,
        "offset": offset,
        "timestamp": 1_700_000_000_000,
        "timestampType": "CREATE_TIME",
        "value": base64.b64encode(value).decode(),
        "headers": [{"content-type": list(b"application/cloudevents+json")}],
    }


def deep(levels: int) -> Any:
    data: Any = 1
    for _ in range(levels):
        data = [data]
    return data


def poisoned_batch() -> dict[str, Any]:
    event = fixture("msk_event.json")
    event["records"] = {
        "orders-0": [
            structured_record(20, "good-1", {"amount": 1}),
            structured_record(21, "deep-1", deep(900)),
            structured_record(22, "good-2", {"amount": 2}),
        ]
    }
    return event


def event_count(h: Harness, status_class: str) -> float:
    text = h.container.metrics.prometheus_text()
    for line in text.splitlines():
        if line.startswith("broker_event_count_total{") and f'"{status_class}"' in line:
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def assert_rejected_alone(h: Harness, answer: dict[str, Any], offset: int) -> dict[str, Any]:
    assert answer["ingested"] == 2
    [refused] = answer["invalid"]
    assert (refused["topic"], refused["partition"], refused["offset"]) == ("orders", 0, offset)
    assert set(queued(h)) == {"good-1", "good-2"}
    [failure] = failures(h, "orders")
    assert failure["record"]["offset"] == offset
    rejected = [r for r in h.archive.decoded() if r["kind"] == "rejected"]
    assert [r["reason"] for r in rejected] == [refused["reason"]]
    assert event_count(h, "4xx") == 1 and event_count(h, "2xx") == 2
    return refused


def test_deep_data_with_an_event_pattern_trigger_is_one_rejection_not_a_failed_batch() -> None:
    h = harness()
    h.trigger("pattern", filters=[{"eventPattern": {"data": {"amount": [{"exists": True}]}}}])
    msk(h)
    answer = h.container.kafka_ingress.handle(poisoned_batch())
    assert_rejected_alone(h, answer, 21)
    assert set(queued(h, "pattern")) == {"good-1", "good-2"}


class ExplodingIngress:
    """The real Ingress, except that an event whose id starts with ``explode`` raises what the
    test gives: a matcher or encoder failing in a way nobody foresaw."""

    def __init__(self, real: Any, error: BaseException) -> None:
        self._real = real
        self._error = error

    def ingest(self, config: Any, events: Any, headers: Any, sender: Any = None) -> None:
        if any(e.id.startswith("explode") for e in events):
            raise self._error
        self._real.ingest(config, events, headers, sender)


@pytest.mark.parametrize(
    "error", [RecursionError("maximum recursion depth exceeded"), KeyError("x"), ValueError()]
)
def test_any_unexpected_error_of_one_record_is_a_counted_rejection(error: Exception) -> None:
    h = harness()
    msk(h)
    c = h.container
    c.ingress = ExplodingIngress(c.ingress, error)  # type: ignore[misc]
    event = poisoned_batch()
    event["records"]["orders-0"][1] = structured_record(21, "explode-1", {"amount": 3})
    refused = assert_rejected_alone(h, c.kafka_ingress.handle(event), 21)
    assert refused["reason"] == "invalid_event"
    [failure] = failures(h, "orders")
    assert failure["detail"].startswith(
        f"the record could not be processed: {type(error).__name__}"
    )
    assert "maximum recursion" not in failure["detail"]  # the error's text may quote the data


def test_an_unavailable_store_still_fails_the_batch_for_retry() -> None:
    h = harness()
    msk(h)
    c = h.container
    c.ingress = ExplodingIngress(c.ingress, UnavailableError("SQS is down"))  # type: ignore[misc]
    event = poisoned_batch()
    event["records"]["orders-0"][1] = structured_record(21, "explode-1", {"amount": 3})
    with pytest.raises(UnavailableError, match="SQS is down"):
        c.kafka_ingress.handle(event)
    assert failures(h, "orders") == []
