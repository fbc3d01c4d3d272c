"""The Lambda event source mapping a KafkaSource needs (design.md §10), as Lambda describes it, and
the plan that leaves exactly the wanted one. Pure: the adapter speaks Lambda's API, the service
executes the plan."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

DEFAULT_BATCH_SIZE = 100  # Lambda's default for Kafka


def servers_cluster_id(servers: Iterable[str]) -> str:
    """A self-managed cluster's identity: its bootstrap servers, order and case ignored."""
    return "kafka://" + ",".join(sorted({s.strip().lower() for s in servers if s.strip()}))


@dataclass(frozen=True, slots=True)
class KafkaMappingSpec:
    """A Kafka event source mapping as Lambda describes it: what the control plane wants, and
    what the adapter reads back, so the two compare with ``==``."""

    function_name: str
    topic: str
    consumer_group: str
    starting_position: str  # TRIM_HORIZON | LATEST
    bootstrap_servers: tuple[str, ...] = ()  # self-managed Kafka
    cluster_arn: str | None = None  # MSK
    batch_size: int = DEFAULT_BATCH_SIZE
    access: tuple[tuple[str, str], ...] = ()  # SourceAccessConfigurations (Type, URI), sorted
    on_failure: str | None = None  # DestinationConfig.OnFailure.Destination (an SQS queue ARN)

    @property
    def cluster_id(self) -> str:
        return self.cluster_arn or servers_cluster_id(self.bootstrap_servers)

    @property
    def identity(self) -> tuple[str, str, str, str]:
        """What Lambda cannot update on a mapping."""
        return (self.cluster_id, self.topic, self.consumer_group, self.starting_position)


@dataclass(frozen=True, slots=True)
class KafkaMappingInfo:
    uuid: str
    spec: KafkaMappingSpec
    enabled: bool
    # Lambda's LastProcessingResult when it starts with "PROBLEM" (the poller cannot connect,
    # authenticate or read): shown in the source's status, not part of the plan.
    problem: str | None = field(default=None, compare=False)


@dataclass(frozen=True, slots=True)
class CreateKafkaMapping:
    spec: KafkaMappingSpec
    enabled: bool

    def describe(self) -> str:
        spec = self.spec
        return f"create mapping {spec.topic} ({spec.consumer_group}) → {spec.function_name}"


@dataclass(frozen=True, slots=True)
class UpdateKafkaMapping:
    uuid: str
    spec: KafkaMappingSpec
    enabled: bool

    def describe(self) -> str:
        state = "enabled" if self.enabled else "disabled"
        return f"update mapping {self.uuid} of {self.spec.topic} ({state})"


@dataclass(frozen=True, slots=True)
class DeleteKafkaMapping:
    uuid: str
    topic: str = ""

    def describe(self) -> str:
        return f"delete mapping {self.uuid} of {self.topic}"


KafkaAction = CreateKafkaMapping | UpdateKafkaMapping | DeleteKafkaMapping


def plan_mappings(
    desired: KafkaMappingSpec | None, enabled: bool, found: Sequence[KafkaMappingInfo]
) -> list[KafkaAction]:
    """The actions that leave exactly one mapping like ``desired`` (in state ``enabled``) among
    ``found`` (the mappings of this source's cluster and topic), or none when ``desired`` is None.
    Lambda updates batch size, access and destination in place; the rest needs a new mapping.
    Deletions come first: Lambda allows one mapping per consumer group."""
    if desired is None:
        return [DeleteKafkaMapping(m.uuid, m.spec.topic) for m in found]
    same = sorted(
        (m for m in found if m.spec.identity == desired.identity),
        key=lambda m: (m.spec != desired, m.enabled != enabled, m.uuid),
    )
    keeper = same[0] if same else None
    actions: list[KafkaAction] = [
        DeleteKafkaMapping(m.uuid, m.spec.topic) for m in found if m is not keeper
    ]
    if keeper is None:
        actions.append(CreateKafkaMapping(desired, enabled))
    elif keeper.spec != desired or keeper.enabled != enabled:
        actions.append(UpdateKafkaMapping(keeper.uuid, desired, enabled))
    return actions
