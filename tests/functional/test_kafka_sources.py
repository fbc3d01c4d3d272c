"""The KafkaSource API through Chalice's test client, on in-memory fakes: validation, the Lambda
mapping it provisions, status, uniqueness, immutability, failures, deletion and repair."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from chalice.test import Client

from app import reconciler
from brokerctl.dev import scheduled_event
from chalicelib.core.resources import kafka_source as ks
from chalicelib.ports import OutgoingMessage
from tests.functional.harness import Harness, call

KS = "/apis/sources.knative.dev/v1/namespaces/ns/kafkasources"
MSK_ARN = "arn:aws:kafka:us-east-1:123456789012:cluster/demo/0b1c2d3e-aaaa-bbbb-cccc-123456789012-1"
SECRET = "arn:aws:secretsmanager:us-east-1:123456789012:secret:sb/kafka/orders-AbCdEf"
CA = "arn:aws:secretsmanager:us-east-1:123456789012:secret:sb/kafka/ca-XyZ123"


def body(name: str = "orders", **spec: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "bootstrapServers": ["kafka-1.example.com:9092", "kafka-2.example.com:9093"],
        "topics": ["orders"],
        "sink": {
            "ref": {"apiVersion": "eventing.knative.dev/v1", "kind": "Broker", "name": "default"}
        },
    }
    base.update(spec)
    return {
        "apiVersion": "sources.knative.dev/v1",
        "kind": "KafkaSource",
        "metadata": {"name": name},
        "spec": base,
    }


def conditions(doc: dict[str, Any]) -> dict[str, tuple[str, str | None]]:
    return {c["type"]: (c["status"], c.get("reason")) for c in doc["status"]["conditions"]}


def mappings(h: Harness) -> list[ks.KafkaMappingInfo]:
    return h.mappings.list_kafka(h.settings.kafka_function)


def test_create_self_managed_source_provisions_mapping_and_failure_queue(
    h: Harness, client: Client
) -> None:
    h.broker()
    r = call(
        client,
        "post",
        KS,
        body(
            net={
                "sasl": {"enable": True, "type": "SCRAM-SHA-512", "secretArn": SECRET},
                "tls": {"enable": True, "caCertSecretArn": CA},
            }
        ),
    )
    assert r.status_code == 201, r.body
    doc = r.json_body
    assert doc["apiVersion"] == "sources.knative.dev/v1" and doc["kind"] == "KafkaSource"
    uid = doc["metadata"]["uid"]
    assert doc["spec"]["consumerGroup"] == f"knative-kafka-source-{uid}"
    assert doc["spec"]["initialOffset"] == "latest" and doc["spec"]["batchSize"] == 100
    assert conditions(doc) == {
        "Ready": ("True", None),
        "SinkProvided": ("True", None),
        "Deployed": ("True", None),
        "InitialOffsetsCommitted": ("True", None),
    }
    assert doc["status"]["sinkUri"] == f"{h.settings.public_url}/ns/default"
    queue = ks.failure_queue_name(h.settings.queue_prefix, "ns", "orders")
    assert doc["status"]["failureDestination"] == {"queue": queue}
    [mapping] = mappings(h)
    assert mapping.enabled
    assert mapping.spec == ks.KafkaMappingSpec(
        function_name=h.settings.kafka_function,
        topic="orders",
        consumer_group=f"knative-kafka-source-{uid}",
        starting_position="LATEST",
        bootstrap_servers=("kafka-1.example.com:9092", "kafka-2.example.com:9093"),
        batch_size=100,
        access=(("SASL_SCRAM_512_AUTH", SECRET), ("SERVER_ROOT_CA_CERTIFICATE", CA)),
        on_failure=h.queues.get(queue).arn,  # type: ignore[union-attr]
    )
    assert not ks.failure_queue_name(h.settings.queue_prefix, "ns", "orders").endswith("-dlq")


def test_msk_source_and_initial_offset(h: Harness, client: Client) -> None:
    h.broker()
    spec = {"mskClusterArn": MSK_ARN, "consumerGroup": "orders-reader", "initialOffset": "earliest"}
    payload = body(**spec)
    del payload["spec"]["bootstrapServers"]
    r = call(client, "put", f"{KS}/orders", payload)
    assert r.status_code == 201, r.body
    [mapping] = mappings(h)
    assert mapping.spec.cluster_arn == MSK_ARN and mapping.spec.bootstrap_servers == ()
    assert mapping.spec.consumer_group == "orders-reader"
    assert mapping.spec.starting_position == "TRIM_HORIZON"


def test_validation_reports_every_problem(h: Harness, client: Client) -> None:
    payload = body(
        topics=["a", "b"],
        bootstrapServers=["nohost", "h:99999"],
        mskClusterArn="arn:nope",
        initialOffset="middle",
        batchSize=0,
        net={
            "sasl": {"enable": True, "type": "GSSAPI"},
            "vpc": {"subnets": ["subnet-0123456789abcdef0"]},
        },
        sink={"uri": "http://elsewhere/"},
    )
    r = call(client, "post", KS, payload)
    assert r.status_code == 400
    fields = {e["field"] for e in r.json_body["errors"]}
    assert {
        "spec",
        "spec.topics",
        "spec.bootstrapServers[0]",
        "spec.bootstrapServers[1]",
        "spec.mskClusterArn",
        "spec.initialOffset",
        "spec.batchSize",
        "spec.net.sasl.type",
        "spec.net.sasl.secretArn",
        "spec.net.vpc",
        "spec.sink.uri",
    } <= fields
    assert mappings(h) == []


def test_broker_missing_keeps_the_mapping_disabled_until_the_reconciler(
    h: Harness, client: Client
) -> None:
    r = call(client, "post", KS, body())
    assert r.status_code == 201
    doc = r.json_body
    assert conditions(doc)["SinkProvided"] == ("False", "BrokerDoesNotExist")
    assert conditions(doc)["Ready"] == ("False", "BrokerDoesNotExist")
    assert "sinkUri" not in doc["status"]
    [mapping] = mappings(h)
    assert not mapping.enabled
    h.broker()
    reconciler(scheduled_event(h.settings.region), None)
    [mapping] = mappings(h)
    assert mapping.enabled
    assert conditions(call(client, "get", f"{KS}/orders").json_body)["Ready"] == ("True", None)


def test_one_source_per_cluster_and_topic(h: Harness, client: Client) -> None:
    h.broker()
    assert call(client, "post", KS, body("a")).status_code == 201
    servers = ["KAFKA-2.example.com:9093", "kafka-1.example.com:9092"]  # same cluster
    r = call(client, "post", KS, body("b", bootstrapServers=servers))
    assert r.status_code == 409 and "already reads topic" in r.json_body["detail"]
    assert call(client, "post", KS, body("c", topics=["other"])).status_code == 201


def test_identity_is_immutable_the_rest_updates_in_place(h: Harness, client: Client) -> None:
    h.broker()
    first = call(client, "post", KS, body()).json_body
    [before] = mappings(h)
    r = call(client, "put", f"{KS}/orders", body(topics=["renamed"]))
    assert r.status_code == 422
    assert r.json_body["errors"][0]["field"] == "spec.topics"
    r = call(client, "put", f"{KS}/orders", body(batchSize=500))
    assert r.status_code == 200, r.body
    assert r.json_body["metadata"]["generation"] == 2
    assert r.json_body["spec"]["consumerGroup"] == first["spec"]["consumerGroup"]
    [after] = mappings(h)
    assert after.uuid == before.uuid and after.spec.batch_size == 500


def test_get_list_failures_and_delete(h: Harness, client: Client) -> None:
    h.broker()
    call(client, "post", KS, body())
    assert call(client, "get", f"{KS}/nope").status_code == 404
    listed = call(client, "get", KS).json_body
    assert listed["kind"] == "KafkaSourceList" and [
        i["metadata"]["name"] for i in listed["items"]
    ] == ["orders"]
    queue = ks.failure_queue_name(h.settings.queue_prefix, "ns", "orders")
    h.queues.send_batch(
        queue,
        [
            OutgoingMessage(
                "0", json.dumps({"v": 1, "kind": "invalid_record", "reason": "invalid_event"})
            )
        ],
    )
    h.queues.send_batch(
        queue,
        [
            OutgoingMessage(
                "0", json.dumps({"requestContext": {"condition": "RetryAttemptsExhausted"}})
            )
        ],
    )
    got = call(client, "get", f"{KS}/orders/failures?limit=10").json_body
    assert got["count"] == 2 and got["depth"] == 2  # listing does not consume
    kinds = sorted(i["kind"] for i in got["items"])
    assert kinds == ["discarded_batch", "invalid_record"]
    assert call(client, "get", f"{KS}/orders/failures?limit=zero").status_code == 400
    # The old check read only the first five digits, then int() of all 5,001 gave a 500.
    huge = "00001" + "0" * 4996
    assert call(client, "get", f"{KS}/orders/failures?limit={huge}").status_code == 400
    r = call(client, "delete", f"{KS}/orders")
    assert r.status_code == 200 and r.json_body["details"]["failuresDiscarded"] == 2
    assert mappings(h) == [] and h.queues.get(queue) is None
    assert call(client, "get", f"{KS}/orders").status_code == 404


def test_reconciler_removes_orphan_mappings_and_restores_missing_ones(
    h: Harness, client: Client
) -> None:
    h.broker()
    call(client, "post", KS, body())
    [mapping] = mappings(h)
    orphan = ks.KafkaMappingSpec(h.settings.kafka_function, "gone", "g", "LATEST", ("x:9092",))
    h.mappings.create_kafka(orphan, True)
    h.mappings.delete(mapping.uuid)
    reconciler(scheduled_event(h.settings.region), None)
    [restored] = mappings(h)
    assert restored.spec == mapping.spec and restored.enabled


def test_a_cluster_lambda_cannot_reach_shows_ready_false_with_the_reason(
    h: Harness, client: Client
) -> None:
    h.broker()
    assert call(client, "post", KS, body()).status_code == 201
    [mapping] = mappings(h)
    problem = "PROBLEM: Connection error. Please check your event source connection configuration."
    h.mappings.kafka[mapping.uuid] = replace(mapping, problem=problem)
    for doc in (
        call(client, "get", f"{KS}/orders").json_body,
        call(client, "get", KS).json_body["items"][0],
    ):
        assert conditions(doc)["Ready"] == ("False", "ClusterUnreachable")
        deployed = next(c for c in doc["status"]["conditions"] if c["type"] == "Deployed")
        assert deployed["reason"] == "ClusterUnreachable" and problem in deployed["message"]
    h.mappings.kafka[mapping.uuid] = replace(mapping, problem=None)  # reachable again
    assert conditions(call(client, "get", f"{KS}/orders").json_body)["Ready"] == ("True", None)


# ---- Ready only once the consumer group's initial offsets are committed (issue 31, item 8) ---


def test_latest_commits_the_groups_offsets_at_the_log_end_before_the_mapping(
    h: Harness, client: Client
) -> None:
    h.broker()
    cluster = ks.servers_cluster_id(["kafka-1.example.com:9092", "kafka-2.example.com:9093"])
    h.kafka_offsets.topics[(cluster, "orders")] = [5, 0, 12]
    r = call(client, "put", f"{KS}/orders", body(consumerGroup="g-orders"))
    assert r.status_code == 201, r.body
    assert conditions(r.json_body)["Ready"] == ("True", None)
    # Lambda resumes a group from its committed offsets: what is produced from now on is read.
    assert h.kafka_offsets.groups[(cluster, "g-orders")] == {
        ("orders", 0): 5,
        ("orders", 1): 0,
        ("orders", 2): 12,
    }
    [mapping] = mappings(h)
    assert mapping.spec.starting_position == "LATEST"


def test_a_source_whose_offsets_cannot_be_committed_has_no_mapping_and_is_not_ready(
    h: Harness, client: Client
) -> None:
    h.broker()
    h.kafka_offsets.unavailable = "cannot connect: NoBrokersAvailable"
    r = call(client, "put", f"{KS}/orders", body())
    assert r.status_code == 201, r.body
    got = conditions(r.json_body)
    assert got["Ready"][0] == "False"
    assert got["InitialOffsetsCommitted"] == ("False", "OffsetsNotCommitted")
    [offsets] = [c for c in r.json_body["status"]["conditions"]
                 if c["type"] == "InitialOffsetsCommitted"]  # fmt: skip
    assert "NoBrokersAvailable" in offsets["message"]
    assert mappings(h) == []  # nothing may consume before the offsets exist
    # The reconciler tries again; once committed the mapping exists and the source is Ready.
    h.kafka_offsets.unavailable = None
    reconciler(scheduled_event("us-east-1"), None)
    doc = call(client, "get", f"{KS}/orders").json_body
    assert conditions(doc)["Ready"] == ("True", None)
    assert len(mappings(h)) == 1
    calls = h.kafka_offsets.calls
    reconciler(scheduled_event("us-east-1"), None)
    assert h.kafka_offsets.calls == calls  # committed once: the group keeps its offsets


def test_earliest_needs_no_initial_offsets(h: Harness, client: Client) -> None:
    h.broker()
    h.kafka_offsets.unavailable = "unreachable"
    r = call(client, "put", f"{KS}/orders", body(initialOffset="earliest"))
    assert conditions(r.json_body)["Ready"] == ("True", None)
    assert h.kafka_offsets.calls == 0 and len(mappings(h)) == 1
