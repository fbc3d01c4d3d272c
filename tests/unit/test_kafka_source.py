"""KafkaSource as a value: parsing with defaults, validation tables, admission, JSON round trips,
the mapping it needs, the mapping plan, cluster identity and names (pure, no AWS)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pytest

from chalicelib.core.errors import ImmutableFieldError, ValidationError
from chalicelib.core.names import is_owned_queue
from chalicelib.core.resources import kafka_source as ks
from chalicelib.core.resources.delivery_spec import kafka_target, uri_problems

NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
MSK = "arn:aws:kafka:eu-west-1:123456789012:cluster/demo/0b1c2d3e-aaaa-bbbb-cccc-123456789012-1"
SECRET = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:sb/kafka/orders-AbCdEf"
SINK = {"ref": {"kind": "Broker", "name": "default"}}


def body(**spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "src"},
        "spec": {"bootstrapServers": ["k1:9092"], "topics": ["t"], "sink": SINK, **spec},
    }


def parse(**spec: Any) -> ks.KafkaSource:
    return ks.parse_kafka_source("ns", body(**spec), path_name=None)


def fields(**spec: Any) -> set[str]:
    with pytest.raises(ValidationError) as err:
        parse(**spec)
    return {p.field for p in err.value.problems}


def test_defaults() -> None:
    s = parse()
    assert (s.namespace, s.name, s.topic, s.sink_broker) == ("ns", "src", "t", "default")
    assert s.initial_offset == "latest" and s.batch_size == 100
    assert s.consumer_group == "" and s.sasl is None and s.tls is None
    admitted = ks.admit_kafka_source(s, None, uid="u-1", now=NOW)
    assert admitted.consumer_group == "knative-kafka-source-u-1"
    assert admitted.generation == 1 and admitted.creation_timestamp == "2026-01-02T03:04:05Z"


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        ({"topics": []}, "spec.topics"),
        ({"topics": ["a", "b"]}, "spec.topics"),
        ({"topics": [".."]}, "spec.topics[0]"),
        ({"topics": ["x" * 250]}, "spec.topics[0]"),
        ({"bootstrapServers": []}, "spec.bootstrapServers"),
        ({"bootstrapServers": ["k1"]}, "spec.bootstrapServers[0]"),
        ({"bootstrapServers": ["k1:0"]}, "spec.bootstrapServers[0]"),
        ({"mskClusterArn": MSK}, "spec"),  # both given
        ({"consumerGroup": "bad group"}, "spec.consumerGroup"),
        ({"initialOffset": "newest"}, "spec.initialOffset"),
        ({"initialOffset": {}}, "spec.initialOffset"),
        ({"initialOffset": ["earliest"]}, "spec.initialOffset"),
        ({"batchSize": True}, "spec.batchSize"),
        ({"batchSize": 10_001}, "spec.batchSize"),
        ({"net": {"sasl": {"enable": True, "type": "PLAIN"}}}, "spec.net.sasl.secretArn"),
        ({"net": {"sasl": {"enable": "yes"}}}, "spec.net.sasl.enable"),
        ({"net": {"tls": {"certSecretArn": "arn:aws:s3:::nope"}}}, "spec.net.tls.certSecretArn"),
        ({"net": {"vpc": {"subnets": ["subnet-0123456789abcdef0"]}}}, "spec.net.vpc"),
        ({"net": {"vpc": {"subnets": ["sub"], "securityGroups": []}}}, "spec.net.vpc.subnets"),
        ({"net": {"ssh": {}}}, "spec.net.ssh"),
        ({"sink": None}, "spec.sink"),
        ({"sink": {"ref": {"kind": "Service", "name": "x"}}}, "spec.sink.ref.kind"),
        (
            {"sink": {"ref": {"kind": "Broker", "name": "x", "namespace": "other"}}},
            "spec.sink.ref.namespace",
        ),
        ({"sink": {"ref": {"kind": "Broker", "name": "Bad_Name"}}}, "spec.sink.ref.name"),
        ({"sink": {"uri": "http://x/"}}, "spec.sink.uri"),
        ({"consumers": 3}, "spec.consumers"),
    ],
)
def test_validation(spec: dict[str, Any], field: str) -> None:
    assert field in fields(**spec)


def test_msk_rules() -> None:
    spec = {"bootstrapServers": None, "mskClusterArn": MSK}
    msk_body = {"metadata": {"name": "m"}, "spec": {"mskClusterArn": MSK, "topics": ["t"]}}
    msk_body["spec"]["sink"] = SINK
    ok = ks.parse_kafka_source("ns", msk_body, path_name=None)
    assert ok.cluster_id == MSK and ok.bootstrap_servers == ()
    net = {"sasl": {"enable": True, "type": "PLAIN", "secretArn": SECRET}}
    assert "spec.net.sasl.type" in fields(**spec, net=net)
    assert "spec.net.tls.caCertSecretArn" in fields(
        **spec, net={"tls": {"enable": True, "caCertSecretArn": SECRET}}
    )
    assert "spec.mskClusterArn" in fields(bootstrapServers=None, mskClusterArn="arn:aws:kafka:x")


def test_every_problem_at_once_and_envelope() -> None:
    with pytest.raises(ValidationError) as err:
        ks.parse_kafka_source(
            "apis",
            {"apiVersion": "v9", "kind": "Trigger", "metadata": {"name": "x", "namespace": "y"},
             "spec": {"topics": "t"}},
            path_name="z",
        )  # fmt: skip
    got = {p.field for p in err.value.problems}
    assert {
        "metadata.namespace",
        "apiVersion",
        "kind",
        "metadata.name",
        "spec",
        "spec.topics",
    } <= got
    assert "spec.sink" in got


def test_json_round_trip_through_storage() -> None:
    s = ks.admit_kafka_source(
        parse(
            consumerGroup="g",
            initialOffset="earliest",
            batchSize=7,
            net={
                "sasl": {"enable": True, "type": "SCRAM-SHA-256", "secretArn": SECRET},
                "tls": {"enable": True, "certSecretArn": SECRET},
                "vpc": {"subnets": ["subnet-0123456789abcdef0"], "securityGroups": ["sg-0123abcd"]},
            },
        ),
        None,
        uid="u",
        now=NOW,
    )
    assert ks.KAFKA_SOURCES.from_item(ks.KAFKA_SOURCES.to_item(s)) == s
    doc = ks.KAFKA_SOURCES.to_json(s, {"x": 1})
    assert doc["apiVersion"] == "sources.knative.dev/v1" and doc["kind"] == "KafkaSource"
    assert ks.parse_kafka_source("ns", doc | {"status": {}}, path_name="src").sasl == s.sasl


def test_admission_immutability_and_generation() -> None:
    old = ks.admit_kafka_source(parse(), None, uid="u", now=NOW)
    same = ks.admit_kafka_source(parse(), old, uid="ignored", now=NOW)
    assert same.uid == "u" and same.generation == 1 and same.consumer_group == old.consumer_group
    bigger = ks.admit_kafka_source(parse(batchSize=5), old, uid="x", now=NOW)
    assert bigger.generation == 2
    with pytest.raises(ImmutableFieldError) as err:
        ks.admit_kafka_source(parse(topics=["u"], initialOffset="earliest"), old, uid="x", now=NOW)
    assert {p.field for p in err.value.problems} == {"spec.topics", "spec.initialOffset"}
    with pytest.raises(ImmutableFieldError):
        ks.admit_kafka_source(parse(consumerGroup="other"), old, uid="x", now=NOW)


def test_desired_mapping_access_configurations() -> None:
    s = ks.admit_kafka_source(
        parse(
            net={
                "sasl": {"enable": True, "type": "PLAIN", "secretArn": SECRET},
                "tls": {"enable": True, "caCertSecretArn": SECRET + "ca", "certSecretArn": SECRET},
                "vpc": {"subnets": ["subnet-0123456789abcdef0"], "securityGroups": ["sg-0123abcd"]},
            }
        ),
        None,
        uid="u",
        now=NOW,
    )
    spec = ks.desired_mapping(s, "fn", "arn:aws:sqs:r:1:q")
    assert spec.access == (
        ("BASIC_AUTH", SECRET),
        ("CLIENT_CERTIFICATE_TLS_AUTH", SECRET),
        ("SERVER_ROOT_CA_CERTIFICATE", SECRET + "ca"),
        ("VPC_SECURITY_GROUP", "security_group:sg-0123abcd"),
        ("VPC_SUBNET", "subnet:subnet-0123456789abcdef0"),
    )
    assert spec.on_failure == "arn:aws:sqs:r:1:q" and spec.starting_position == "LATEST"


def _spec(**kw: Any) -> ks.KafkaMappingSpec:
    base = ks.KafkaMappingSpec("fn", "t", "g", "LATEST", ("k1:9092",), None, 100, (), "arn:q")
    return replace(base, **kw)


def test_plan_create_keep_update_replace_delete() -> None:
    want = _spec()
    assert ks.plan_mappings(want, True, []) == [ks.CreateKafkaMapping(want, True)]
    same = ks.KafkaMappingInfo("u1", want, True)
    assert ks.plan_mappings(want, True, [same]) == []
    assert ks.plan_mappings(want, False, [same]) == [ks.UpdateKafkaMapping("u1", want, False)]
    drifted = ks.KafkaMappingInfo("u1", _spec(batch_size=5, on_failure=None), True)
    assert ks.plan_mappings(want, True, [drifted]) == [ks.UpdateKafkaMapping("u1", want, True)]
    other_group = ks.KafkaMappingInfo("u2", _spec(consumer_group="old"), True)
    assert ks.plan_mappings(want, True, [other_group]) == [
        ks.DeleteKafkaMapping("u2", "t"),
        ks.CreateKafkaMapping(want, True),
    ]
    twins = [ks.KafkaMappingInfo("b", _spec(batch_size=1), True), same]
    assert ks.plan_mappings(want, True, twins) == [ks.DeleteKafkaMapping("b", "t")]
    assert ks.plan_mappings(None, True, [same]) == [ks.DeleteKafkaMapping("u1", "t")]


def test_cluster_identity_of_sources_and_events() -> None:
    s = parse(bootstrapServers=["K2:9092", "k1:9092"])
    assert s.cluster_id == "kafka://k1:9092,k2:9092"
    event = {"eventSource": "SelfManagedKafka", "bootstrapServers": "k2:9092,k1:9092"}
    assert ks.event_cluster_id(event) == s.cluster_id
    msk_event = {"eventSource": "aws:kafka", "eventSourceArn": MSK, "bootstrapServers": "b-1:9092"}
    assert ks.event_cluster_id(msk_event) == MSK


def test_failure_queue_names() -> None:
    name = ks.failure_queue_name("sb-prod-", "ns", "orders")
    assert name.startswith("sb-prod-orders-") and name.endswith("-kafka-failures")
    long = ks.failure_queue_name("sb-" + "p" * 37, "ns", "x" * 63)
    assert len(long) <= 80
    assert ks.failure_queue_name("sb-", "ns", "a") != ks.failure_queue_name("sb-", "ns2", "a")
    # The trigger reconciler removes queues of its own shape that no trigger wants: not these.
    assert not is_owned_queue("sb-prod-", name)


@pytest.mark.parametrize(
    ("uri", "target"),
    [
        ("kafka://k1:9093/orders", ("k1:9093", "orders")),
        ("kafka://k1/orders.v2", ("k1:9092", "orders.v2")),
        ("kafka://[::1]:9092/t", ("[::1]:9092", "t")),
        ("http://k1/t", None),
    ],
)
def test_kafka_subscriber_uris(uri: str, target: tuple[str, str] | None) -> None:
    assert kafka_target(uri) == target
    assert uri_problems(uri, "u") == []


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        ({"topics": ["t\n"]}, "spec.topics[0]"),
        ({"consumerGroup": "g\n"}, "spec.consumerGroup"),
        ({"bootstrapServers": ["k1:9092\n"]}, "spec.bootstrapServers[0]"),
        ({"bootstrapServers": None, "mskClusterArn": MSK + "\n"}, "spec.mskClusterArn"),
    ],
)
def test_a_trailing_newline_is_refused(spec: dict[str, Any], field: str) -> None:
    """``^…$`` with ``re.match`` let a final newline through (issue 31, item 10)."""
    assert field in fields(**spec)
