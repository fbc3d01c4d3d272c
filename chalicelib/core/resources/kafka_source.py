"""KafkaSource: a Knative-shaped resource that reads one Kafka topic into a broker through a Lambda
event source mapping (design.md §10). Parsing with defaults (every problem reported at once),
admission, JSON shapes and the mapping it needs (``kafka_net`` parses ``spec.net``,
``kafka_mapping`` holds the mapping's shape and the plan, ``kafka_source_status`` the status).
Pure.

    spec.bootstrapServers: ["host:port", ...]  (self-managed Kafka)  | spec.mskClusterArn
    spec.topics:           [topic]            one: a Lambda mapping reads one topic
    spec.consumerGroup:    default "knative-kafka-source-<uid>"
    spec.initialOffset:    "latest" (default) | "earliest"
    spec.batchSize:        1..10000, default 100
    spec.net.sasl:         {enable, type: PLAIN|SCRAM-SHA-256|SCRAM-SHA-512, secretArn}
    spec.net.tls:          {enable, caCertSecretArn, certSecretArn}
    spec.net.vpc:          {subnets, securityGroups}  (self-managed Kafka inside a VPC)
    spec.sink.ref:         {apiVersion: eventing.knative.dev/v1, kind: Broker, name}

The cluster, topic, consumer group and initial offset are the mapping's identity, which Lambda
cannot change: they are immutable here too. The handler finds the source of a record by cluster and
topic, so two sources may not read the same topic of the same cluster (the control plane refuses).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from chalicelib.core.errors import ImmutableFieldError, Problem, ValidationError
from chalicelib.core.names import (
    MAX_QUEUE_NAME_LENGTH,
    check_prefix,
    name_problems,
    namespace_problems,
    quote,
)
from chalicelib.core.resources import meta
from chalicelib.core.resources.fields import json_object as _object
from chalicelib.core.resources.fields import unknown_fields as _unknown

# The mapping's shape and plan, and the net settings, are named from here too
# (``ks.plan_mappings``), as they were before they had modules of their own.
from chalicelib.core.resources.kafka_mapping import DEFAULT_BATCH_SIZE as DEFAULT_BATCH_SIZE
from chalicelib.core.resources.kafka_mapping import CreateKafkaMapping as CreateKafkaMapping
from chalicelib.core.resources.kafka_mapping import DeleteKafkaMapping as DeleteKafkaMapping
from chalicelib.core.resources.kafka_mapping import KafkaAction as KafkaAction
from chalicelib.core.resources.kafka_mapping import KafkaMappingInfo as KafkaMappingInfo
from chalicelib.core.resources.kafka_mapping import KafkaMappingSpec as KafkaMappingSpec
from chalicelib.core.resources.kafka_mapping import UpdateKafkaMapping as UpdateKafkaMapping
from chalicelib.core.resources.kafka_mapping import plan_mappings as plan_mappings
from chalicelib.core.resources.kafka_mapping import servers_cluster_id as servers_cluster_id
from chalicelib.core.resources.kafka_net import Sasl as Sasl
from chalicelib.core.resources.kafka_net import Tls as Tls
from chalicelib.core.resources.kafka_net import access_configurations, parse_net
from chalicelib.core.resources.kind import ResourceKind

API_VERSION = "sources.knative.dev/v1"
KIND = "KafkaSource"
BROKER_API_VERSION = "eventing.knative.dev/v1"
INITIAL_OFFSETS = {"earliest": "TRIM_HORIZON", "latest": "LATEST"}
DEFAULT_INITIAL_OFFSET = "latest"  # Knative's default
MAX_BATCH_SIZE = 10_000
FAILURE_QUEUE_SUFFIX = "-kafka-failures"  # not a trigger queue's shape: the trigger plan leaves it


_TOPIC = re.compile(r"^[A-Za-z0-9._-]{1,249}$")
_GROUP = re.compile(r"^[A-Za-z0-9/*:_+=.@-]{1,200}$")  # Lambda's ConsumerGroupId
_HOST_PORT = re.compile(r"^(?P<host>[A-Za-z0-9.-]+|\[[0-9A-Fa-f:.]+\]):(?P<port>[0-9]{1,5})$")
_MSK_ARN = re.compile(r"^arn:aws[a-z-]*:kafka:[a-z0-9-]+:[0-9]{12}:cluster/[A-Za-z0-9-]+/[\w-]+$")
_HASH_LENGTH = 16


@dataclass(frozen=True, slots=True)
class KafkaSource:
    namespace: str
    name: str
    # Set at admission (meta.admitted); a parsed body has none yet.
    uid: str = field(default="", kw_only=True)
    generation: int = field(default=0, kw_only=True)
    creation_timestamp: str = field(default="", kw_only=True)
    topics: tuple[str, ...]
    sink_broker: str
    bootstrap_servers: tuple[str, ...] = ()
    msk_cluster_arn: str | None = None
    consumer_group: str = ""  # "" until admission picks the default
    initial_offset: str = DEFAULT_INITIAL_OFFSET
    batch_size: int = DEFAULT_BATCH_SIZE
    sasl: Sasl | None = None
    tls: Tls | None = None
    subnets: tuple[str, ...] = ()
    security_groups: tuple[str, ...] = ()
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)

    @property
    def topic(self) -> str:
        return self.topics[0]

    @property
    def cluster_id(self) -> str:
        return self.msk_cluster_arn or servers_cluster_id(self.bootstrap_servers)


def event_cluster_id(event: Mapping[str, Any]) -> str:
    """The cluster a Lambda Kafka event came from: the MSK cluster ARN, or for self-managed Kafka
    the ``bootstrapServers`` the mapping was configured with (comma-separated)."""
    if event.get("eventSource") == "aws:kafka" and event.get("eventSourceArn"):
        return str(event["eventSourceArn"])
    return servers_cluster_id(str(event.get("bootstrapServers", "")).split(","))


def failure_queue_name(prefix: str, namespace: str, name: str) -> str:
    """The SQS queue that receives the source's invalid records (and Lambda's discarded-batch
    records): ``{prefix}{name}-{hash}-kafka-failures``."""
    check_prefix(prefix)
    digest = hashlib.sha256(f"kafkasource/{namespace}/{name}".encode()).hexdigest()
    room = MAX_QUEUE_NAME_LENGTH - len(prefix) - 1 - _HASH_LENGTH - len(FAILURE_QUEUE_SUFFIX)
    readable = re.sub(r"[^A-Za-z0-9_-]", "-", name)[:room].rstrip("-")
    return f"{prefix}{readable}-{digest[:_HASH_LENGTH]}{FAILURE_QUEUE_SUFFIX}"


# --- parsing -------------------------------------------------------------------------------------


def parse_kafka_source(namespace: str, body: object, *, path_name: str | None) -> KafkaSource:
    """Validate and default a KafkaSource body; raises ValidationError naming every problem."""
    if not isinstance(body, Mapping):
        where = namespace_problems(namespace, "metadata.namespace")
        raise ValidationError([*where, Problem("body", "a KafkaSource must be a JSON object")])
    problems: list[Problem] = []
    name, labels, annotations, spec = meta.envelope(
        namespace, body, API_VERSION, KIND, path_name, problems
    )
    _unknown(
        spec,
        (
            "bootstrapServers", "mskClusterArn", "topics", "consumerGroup", "initialOffset",
            "batchSize", "net", "sink",
        ),
        "spec",
        problems,
    )  # fmt: skip
    servers, cluster_arn = _cluster(spec, problems)
    topics = _topics(spec.get("topics"), problems)
    group = spec.get("consumerGroup")
    if group is not None and not (isinstance(group, str) and _GROUP.fullmatch(group)):
        problems.append(
            Problem(
                "spec.consumerGroup",
                f"{quote(group)} must be 1 to 200 characters of letters, digits and /*:_+=.@-",
            )
        )
    offset = spec.get("initialOffset", DEFAULT_INITIAL_OFFSET)
    # Checked as a string first: a JSON object is unhashable and would raise, not be refused.
    if not isinstance(offset, str) or offset not in INITIAL_OFFSETS:
        problems.append(
            Problem("spec.initialOffset", f'must be "earliest" or "latest", got {quote(offset)}')
        )
    batch = spec.get("batchSize", DEFAULT_BATCH_SIZE)
    if isinstance(batch, bool) or not isinstance(batch, int) or not 1 <= batch <= MAX_BATCH_SIZE:
        problems.append(
            Problem("spec.batchSize", f"must be a whole number from 1 to {MAX_BATCH_SIZE}")
        )
    sasl, tls, subnets, groups = parse_net(spec.get("net"), cluster_arn is not None, problems)
    broker = _sink(spec.get("sink"), namespace, problems)
    if problems:
        raise ValidationError(problems)
    return KafkaSource(
        namespace=namespace,
        name=name,
        topics=topics,
        sink_broker=broker,
        bootstrap_servers=servers,
        msk_cluster_arn=cluster_arn,
        consumer_group=str(group or ""),
        initial_offset=str(offset),
        batch_size=int(batch),
        sasl=sasl,
        tls=tls,
        subnets=subnets,
        security_groups=groups,
        labels=labels,
        annotations=annotations,
    )


def _cluster(
    spec: Mapping[str, Any], problems: list[Problem]
) -> tuple[tuple[str, ...], str | None]:
    raw_servers, arn = spec.get("bootstrapServers"), spec.get("mskClusterArn")
    if (raw_servers is None) == (arn is None):
        problems.append(
            Problem(
                "spec",
                "give exactly one of bootstrapServers (self-managed Kafka) and mskClusterArn "
                "(Amazon MSK)",
            )
        )
    if arn is not None and not (isinstance(arn, str) and _MSK_ARN.fullmatch(arn)):
        problems.append(
            Problem(
                "spec.mskClusterArn",
                f"{quote(arn)} is not an MSK cluster ARN "
                "(arn:aws:kafka:<region>:<account>:cluster/<name>/<uuid>)",
            )
        )
        arn = None
    servers: list[str] = []
    if raw_servers is not None:
        if not isinstance(raw_servers, list) or not raw_servers:
            problems.append(Problem("spec.bootstrapServers", 'must be a list of "host:port"'))
        else:
            for i, server in enumerate(raw_servers):
                match = _HOST_PORT.fullmatch(server) if isinstance(server, str) else None
                if match is None or not 1 <= int(match["port"]) <= 65535:
                    problems.append(
                        Problem(
                            f"spec.bootstrapServers[{i}]",
                            f'{quote(server)} must be "host:port" with a port from 1 to 65535',
                        )
                    )
                else:
                    servers.append(str(server))
    return tuple(servers), arn if isinstance(arn, str) else None


def _topics(raw: object, problems: list[Problem]) -> tuple[str, ...]:
    if not isinstance(raw, list) or not raw:
        problems.append(Problem("spec.topics", "is required: a list with the topic to read"))
        return ()
    if len(raw) > 1:
        problems.append(
            Problem(
                "spec.topics",
                f"lists {len(raw)} topics; a Lambda event source mapping reads one topic, so "
                "create one KafkaSource per topic",
            )
        )
    topic = raw[0]
    if not isinstance(topic, str) or not _TOPIC.fullmatch(topic) or topic in (".", ".."):
        problems.append(
            Problem(
                "spec.topics[0]",
                f"{quote(topic)} is not a Kafka topic name (1 to 249 of letters, digits, ._-)",
            )
        )
        return ()
    return (topic,)


def _sink(raw: object, namespace: str, problems: list[Problem]) -> str:
    if raw is None:
        problems.append(Problem("spec.sink", "is required: sink.ref names the Broker to feed"))
        return ""
    sink = _object(raw, "spec.sink", problems)
    _unknown(sink, ("ref", "uri"), "spec.sink", problems)
    if "uri" in sink:
        problems.append(
            Problem("spec.sink.uri", "is not supported: use sink.ref to a Broker of this namespace")
        )
    ref = _object(sink.get("ref"), "spec.sink.ref", problems)
    _unknown(ref, ("apiVersion", "kind", "name", "namespace"), "spec.sink.ref", problems)
    if "ref" not in sink:
        if "uri" not in sink:
            problems.append(Problem("spec.sink.ref", "is required: the Broker to feed"))
        return ""
    if ref.get("kind") != "Broker":
        problems.append(
            Problem("spec.sink.ref.kind", f'must be "Broker", got {quote(ref.get("kind"))}')
        )
    if ref.get("apiVersion", BROKER_API_VERSION) != BROKER_API_VERSION:
        problems.append(Problem("spec.sink.ref.apiVersion", f'must be "{BROKER_API_VERSION}"'))
    if ref.get("namespace", namespace) != namespace:
        problems.append(
            Problem("spec.sink.ref.namespace", "must be the source's own namespace (or omitted)")
        )
    broker = ref.get("name")
    found = name_problems(broker, "spec.sink.ref.name", what="broker name")
    problems.extend(found)
    return "" if found else str(broker)


# --- admission -----------------------------------------------------------------------------------

_IMMUTABLE = (
    ("spec.bootstrapServers", lambda s: sorted(s.bootstrap_servers)),
    ("spec.mskClusterArn", lambda s: s.msk_cluster_arn),
    ("spec.topics", lambda s: list(s.topics)),
    ("spec.consumerGroup", lambda s: s.consumer_group),
    ("spec.initialOffset", lambda s: s.initial_offset),
)


def admit_kafka_source(
    parsed: KafkaSource, existing: KafkaSource | None, *, uid: str, now: datetime
) -> KafkaSource:
    """The source to store (``meta.admitted``), with the default consumer group on create; the
    mapping's identity is immutable, and a spec change bumps the generation."""
    if existing is None:
        parsed = replace(
            parsed, consumer_group=parsed.consumer_group or f"knative-kafka-source-{uid}"
        )
    else:
        if not parsed.consumer_group:
            parsed = replace(parsed, consumer_group=existing.consumer_group)
        problems = [
            Problem(
                path,
                f"is immutable (a Lambda mapping cannot change it): delete and re-create the "
                f"source to change {quote(get(existing))} to {quote(get(parsed))}",
            )
            for path, get in _IMMUTABLE
            if get(existing) != get(parsed)
        ]
        if problems:
            raise ImmutableFieldError(problems)
    return meta.admitted(parsed, existing, uid=uid, now=now, configuration=spec_json)


# --- JSON ----------------------------------------------------------------------------------------


def spec_json(source: KafkaSource) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if source.msk_cluster_arn is not None:
        spec["mskClusterArn"] = source.msk_cluster_arn
    else:
        spec["bootstrapServers"] = list(source.bootstrap_servers)
    spec["topics"] = list(source.topics)
    if source.consumer_group:
        spec["consumerGroup"] = source.consumer_group
    spec["initialOffset"] = source.initial_offset
    spec["batchSize"] = source.batch_size
    net: dict[str, Any] = {}
    if source.sasl is not None:
        net["sasl"] = {
            "enable": True,
            "type": source.sasl.type,
            "secretArn": source.sasl.secret_arn,
        }
    if source.tls is not None:
        tls: dict[str, Any] = {"enable": True}
        if source.tls.ca_cert_secret_arn:
            tls["caCertSecretArn"] = source.tls.ca_cert_secret_arn
        if source.tls.cert_secret_arn:
            tls["certSecretArn"] = source.tls.cert_secret_arn
        net["tls"] = tls
    if source.subnets:
        net["vpc"] = {
            "subnets": list(source.subnets),
            "securityGroups": list(source.security_groups),
        }
    if net:
        spec["net"] = net
    spec["sink"] = {
        "ref": {"apiVersion": BROKER_API_VERSION, "kind": "Broker", "name": source.sink_broker}
    }
    return spec


KAFKA_SOURCES: ResourceKind[KafkaSource] = ResourceKind(
    store_kind="kafkasource",
    api_version=API_VERSION,
    kind=KIND,
    plural="kafkasources",
    parse=lambda namespace, body, name: parse_kafka_source(namespace, body, path_name=name),
    admit=lambda parsed, old, uid, now: admit_kafka_source(parsed, old, uid=uid, now=now),
    spec_json=spec_json,
)


def desired_mapping(source: KafkaSource, function_name: str, failure_arn: str) -> KafkaMappingSpec:
    return KafkaMappingSpec(
        function_name=function_name,
        topic=source.topic,
        consumer_group=source.consumer_group,
        starting_position=INITIAL_OFFSETS[source.initial_offset],
        bootstrap_servers=tuple(source.bootstrap_servers),
        cluster_arn=source.msk_cluster_arn,
        batch_size=source.batch_size,
        access=access_configurations(
            source.sasl, source.tls, source.subnets, source.security_groups
        ),
        on_failure=failure_arn,
    )


# --- the failure destination's record ------------------------------------------------------------

FAILURE_RECORD_VERSION = 1


def failure_record(
    source: KafkaSource,
    record: Mapping[str, Any],
    *,
    reason: str,
    detail: str,
    problems: Sequence[Problem],
    at: str,
) -> dict[str, Any]:
    """What the failure queue receives for a record that is not a valid CloudEvent: the reason,
    every problem found, and the record exactly as the Lambda event carried it."""
    return {
        "v": FAILURE_RECORD_VERSION,
        "kind": "invalid_record",
        "at": at,
        "namespace": source.namespace,
        "source": source.name,
        "broker": source.sink_broker,
        "reason": reason,
        "detail": detail,
        "problems": [p.to_json() for p in problems],
        "record": dict(record),
    }
