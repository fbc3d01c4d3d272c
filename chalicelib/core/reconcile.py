"""Provisioning as a plan: ``plan(desired, observed)`` compares the queues and event source
mappings the brokers and triggers need with what exists, and returns the actions that close the
gap. An executor applies them through the ports; tests assert on the plan without AWS.

Per trigger whose broker exists: a DLQ, a queue redriving to it, a mapping from the queue to the
delivery function and, only when a dead-letter sink is set, a mapping from the DLQ to the
dead-letter function. A trigger whose broker does not exist gets nothing (it is not Ready).
Whatever carries our queue prefix and is not wanted is removed.

Order: mappings that go are deleted first (nothing consumes a queue that is about to change or
go); then, trigger by trigger, the DLQ before the queue that redrives to it, and a queue before
its mappings; queues that go come last, each queue before its DLQ.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from chalicelib.core.names import dlq_name, is_owned_queue, queue_name, trigger_queue_names
from chalicelib.core.resources.broker import MAX_CONCURRENCY_ANNOTATION, Broker
from chalicelib.core.resources.delivery_spec import CRASH_RECEIVE_MARGIN, SQS_MAX_RECEIVE_COUNT
from chalicelib.core.resources.kafka_source import KafkaAction
from chalicelib.core.resources.trigger import Trigger, effective_delivery, max_rate

REPORT_BATCH_ITEM_FAILURES = "ReportBatchItemFailures"
# AWS: set a queue's visibility timeout to at least six times the function's timeout, so that a
# batch throttled and retried by the event source mapping does not become visible again meanwhile.
VISIBILITY_TIMEOUT_FACTOR = 6
MAX_VISIBILITY_TIMEOUT = 43_200
# The SQS maximum, on both queues: retries wait in the delivery queue (up to 12 h each), so the
# 4-day default could drop a message mid-schedule, and dead letters wait there for a person.
RETENTION_SECONDS = 14 * 24 * 3600
# An ordered trigger's queues (docs/ordering.md): FIFO, deduplicated by the explicit
# MessageDeduplicationId the senders set (never by content: two distinct events with equal bodies
# must not collapse), in high-throughput mode (deduplication and the throughput quota per message
# group, not per queue: 300 calls/s per group instead of per queue).
FIFO_ATTRIBUTES = {
    "FifoQueue": "true",
    "ContentBasedDeduplication": "false",
    "DeduplicationScope": "messageGroup",
    "FifoThroughputLimit": "perMessageGroupId",
}
# Set at creation only: SQS refuses to change it (a queue's type is fixed; its name says it).
_CREATE_ONLY = frozenset({"FifoQueue"})
# An ordered trigger's mappings take one message per invocation. SQS counts every receive of a
# message (ApproximateReceiveCount, our attempt number and the redrive policy's count) and, in a
# batch, a message held back behind a failed one of its group is received again with it: with
# batches, a head event that keeps failing would use up the retries of the events behind it, and
# the queue's redrive could dead-letter them untried. Within a group deliveries are one at a time
# anyway; other groups still run side by side, one invocation each.
FIFO_BATCH_SIZE = 1
# Receives beyond the crash margin for a rate-limited trigger: a retried or ordered event that
# waits longer than the invocation may hold it is handed back with a visibility timeout, which
# SQS counts as a receive (docs/flow-control.md).
RATE_RECEIVE_MARGIN = 10

TriggerKey = tuple[str, str, str]  # (namespace, broker, trigger)


@dataclass(frozen=True, slots=True)
class ProvisioningConfig:
    prefix: str  # e.g. "sb-local-"; see names.is_owned_queue about sharing an account
    delivery_function: str
    dead_letter_function: str
    function_timeout_s: int  # the longer of the two functions' timeouts
    batch_size: int = 10
    max_concurrency: int | None = None  # the default MaximumConcurrency; None: no limit set
    mappings_enabled: bool = True  # False: created disabled (Settings.mappings_enabled)


@dataclass(frozen=True, slots=True)
class DesiredState:
    config: ProvisioningConfig
    brokers: tuple[Broker, ...] = ()
    triggers: tuple[Trigger, ...] = ()


@dataclass(frozen=True, slots=True)
class ObservedQueue:
    name: str
    attributes: Mapping[str, str] = field(default_factory=dict)  # as GetQueueAttributes gives


@dataclass(frozen=True, slots=True)
class ObservedMapping:
    uuid: str
    queue_name: str
    function_name: str
    enabled: bool  # Lambda State Enabled, Enabling, Creating or Updating
    batch_size: int | None = None  # None: not known, not compared
    function_response_types: tuple[str, ...] | None = None
    maximum_concurrency: int | None = None  # None: no ScalingConfig

    @classmethod
    def from_arns(
        cls,
        uuid: str,
        source_arn: str,
        function: str,
        enabled: bool,
        batch_size: int | None = None,
        function_response_types: tuple[str, ...] | None = None,
        maximum_concurrency: int | None = None,
    ) -> ObservedMapping:
        """From a mapping as Lambda lists it: the queue's ARN, and the function's name or ARN
        (``arn:aws:lambda:region:account:function:name[:qualifier]``)."""
        function_name = function.split(":")[6] if function.startswith("arn:") else function
        return cls(
            uuid,
            source_arn.rsplit(":", 1)[-1],
            function_name,
            enabled,
            batch_size,
            function_response_types,
            maximum_concurrency,
        )


@dataclass(frozen=True, slots=True)
class ObservedState:
    queues: tuple[ObservedQueue, ...] = ()
    mappings: tuple[ObservedMapping, ...] = ()


# --- actions -------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Redrive:
    """The queue's RedrivePolicy. The executor knows the DLQ's ARN; the plan only its name."""

    dead_letter_queue: str
    max_receive_count: int

    def policy_json(self, dead_letter_queue_arn: str) -> str:
        return json.dumps(
            {
                "deadLetterTargetArn": dead_letter_queue_arn,
                "maxReceiveCount": self.max_receive_count,
            }
        )


@dataclass(frozen=True, slots=True)
class CreateQueue:
    name: str
    is_dlq: bool
    attributes: Mapping[str, str]
    redrive: Redrive | None = None

    def describe(self) -> str:
        return f"create {'dead-letter queue' if self.is_dlq else 'queue'} {self.name}"


@dataclass(frozen=True, slots=True)
class SetQueueAttributes:
    name: str
    attributes: Mapping[str, str]  # the desired values of the attributes that drifted
    redrive: Redrive | None = None  # set when the redrive policy drifted

    def describe(self) -> str:
        names = sorted(self.attributes) + (["RedrivePolicy"] if self.redrive else [])
        return f"restore {', '.join(names)} of queue {self.name}"


@dataclass(frozen=True, slots=True)
class DeleteQueue:
    name: str

    def describe(self) -> str:
        return f"delete queue {self.name}"


@dataclass(frozen=True, slots=True)
class CreateMapping:
    queue_name: str
    function_name: str
    batch_size: int
    function_response_types: tuple[str, ...] = (REPORT_BATCH_ITEM_FAILURES,)
    enabled: bool = True
    maximum_concurrency: int | None = None  # ScalingConfig.MaximumConcurrency; None: none

    def describe(self) -> str:
        return f"create mapping {self.queue_name} → {self.function_name}"


@dataclass(frozen=True, slots=True)
class SetMappingConcurrency:
    uuid: str
    queue_name: str
    function_name: str
    maximum_concurrency: int

    def describe(self) -> str:
        return (
            f"set maximum concurrency {self.maximum_concurrency} of mapping {self.queue_name} → "
            f"{self.function_name} ({self.uuid})"
        )


@dataclass(frozen=True, slots=True)
class EnableMapping:
    uuid: str
    queue_name: str = ""
    function_name: str = ""

    def describe(self) -> str:
        return f"enable mapping {self.queue_name} → {self.function_name} ({self.uuid})"


@dataclass(frozen=True, slots=True)
class DeleteMapping:
    uuid: str
    queue_name: str = ""
    function_name: str = ""

    def describe(self) -> str:
        return f"delete mapping {self.queue_name} → {self.function_name} ({self.uuid})"


# Every provisioning action, of every kind: one executor (services/provisioner.py) applies them.
Action = (
    CreateQueue
    | SetQueueAttributes
    | DeleteQueue
    | CreateMapping
    | EnableMapping
    | SetMappingConcurrency
    | DeleteMapping
    | KafkaAction
)


def queue_of(action: Action) -> str | None:
    """The trigger queue an action changes (itself, or its mapping's); None for Kafka's."""
    if isinstance(action, CreateQueue | SetQueueAttributes | DeleteQueue):
        return action.name
    if isinstance(action, CreateMapping | EnableMapping | SetMappingConcurrency | DeleteMapping):
        return action.queue_name
    return None


# --- planning ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Wanted:
    queues: tuple[CreateQueue, ...]  # in creation order
    mappings: tuple[CreateMapping, ...]


def trigger_key(trigger: Trigger) -> TriggerKey:
    return (trigger.namespace, trigger.broker, trigger.name)


def queue_attributes(config: ProvisioningConfig, *, fifo: bool = False) -> dict[str, str]:
    """The attributes every trigger queue and DLQ has (the redrive policy aside); an ordered
    trigger's add FIFO_ATTRIBUTES."""
    visibility = min(VISIBILITY_TIMEOUT_FACTOR * config.function_timeout_s, MAX_VISIBILITY_TIMEOUT)
    attributes = {
        "MessageRetentionPeriod": str(RETENTION_SECONDS),
        "VisibilityTimeout": str(visibility),
    }
    if fifo:
        attributes.update(FIFO_ATTRIBUTES)
    return attributes


def max_receive_count(retry: int | None, *, rate_limited: bool = False) -> int:
    """Above the ``retry + 1`` attempts the delivery function makes before it dead-letters an
    event itself (with the error extensions): the queue's own redrive only catches messages on
    which the function kept crashing. A rate-limited trigger's retried events may be handed back
    to wait for a token (docs/flow-control.md): a few more receives for those."""
    margin = CRASH_RECEIVE_MARGIN + (RATE_RECEIVE_MARGIN if rate_limited else 0)
    return min((retry or 0) + 1 + margin, SQS_MAX_RECEIVE_COUNT)


def max_concurrency(trigger: Trigger, broker: Broker, default: int | None) -> int | None:
    """The trigger's annotation, else its broker's, else the default."""
    for own in (trigger.annotations, broker.annotations):
        value = own.get(MAX_CONCURRENCY_ANNOTATION)
        if value is not None:
            return int(value)
    return default


def _wanted(config: ProvisioningConfig, trigger: Trigger, broker: Broker) -> _Wanted:
    key = trigger_key(trigger)
    fifo = trigger.ordered
    queue = queue_name(config.prefix, *key, fifo=fifo)
    dlq = dlq_name(config.prefix, *key, fifo=fifo)
    delivery = effective_delivery(trigger, broker)
    attributes = queue_attributes(config, fifo=fifo)
    rate_limited = max_rate(trigger, broker) is not None
    redrive = Redrive(dlq, max_receive_count(delivery.retry, rate_limited=rate_limited))
    concurrency = max_concurrency(trigger, broker, config.max_concurrency)
    enabled = config.mappings_enabled
    batch_size = FIFO_BATCH_SIZE if fifo else config.batch_size
    mappings = [
        CreateMapping(
            queue,
            config.delivery_function,
            batch_size,
            enabled=enabled,
            maximum_concurrency=concurrency,
        )
    ]
    if delivery.has_dead_letter_sink:
        mappings.append(
            CreateMapping(
                dlq,
                config.dead_letter_function,
                batch_size,
                enabled=enabled,
                maximum_concurrency=concurrency,
            )
        )
    return _Wanted(
        (CreateQueue(dlq, True, attributes), CreateQueue(queue, False, attributes, redrive)),
        tuple(mappings),
    )


def plan(
    desired: DesiredState, observed: ObservedState, *, only: Iterable[TriggerKey] | None = None
) -> list[Action]:
    """The actions that make ``observed`` what ``desired`` needs, in a safe, deterministic order.

    ``only`` limits the plan to the queues and mappings of those triggers (for the control plane
    acting on one trigger or one broker); the scheduled reconciler plans everything.
    """
    config = desired.config
    brokers = {(b.namespace, b.name): b for b in desired.brokers}
    triggers = sorted(desired.triggers, key=trigger_key)
    queues = {q.name: q for q in observed.queues if is_owned_queue(config.prefix, q.name)}
    mappings = [m for m in observed.mappings if is_owned_queue(config.prefix, m.queue_name)]
    if only is not None:
        scope = set(only)
        names = {n for k in scope for n in trigger_queue_names(config.prefix, *k)}
        triggers = [t for t in triggers if trigger_key(t) in scope]
        queues = {name: q for name, q in queues.items() if name in names}
        mappings = [m for m in mappings if m.queue_name in names]

    wanted = [
        _wanted(config, t, broker)
        for t in triggers
        if (broker := brokers.get((t.namespace, t.broker))) is not None
    ]
    wanted_queues = {q.name for w in wanted for q in w.queues}
    by_pair: dict[tuple[str, str], list[ObservedMapping]] = {}
    for m in mappings:
        by_pair.setdefault((m.queue_name, m.function_name), []).append(m)

    deletes: list[DeleteMapping] = []
    ensures: list[Action] = []
    kept: set[tuple[str, str]] = set()
    for w in wanted:
        for q in w.queues:
            ensures += _ensure_queue(q, queues.get(q.name))
        for want in w.mappings:
            pair = (want.queue_name, want.function_name)
            kept.add(pair)
            dropped, needed = _ensure_mapping(want, by_pair.get(pair, []))
            deletes += dropped
            ensures += needed
    for pair, found in by_pair.items():
        if pair not in kept:
            deletes += [DeleteMapping(m.uuid, m.queue_name, m.function_name) for m in found]
    deletes.sort(key=lambda a: (a.queue_name, a.function_name, a.uuid))
    removals = [DeleteQueue(n) for n in sorted(set(queues) - wanted_queues)]
    return [*deletes, *ensures, *removals]


def plan_trigger(
    config: ProvisioningConfig, trigger: Trigger, broker: Broker | None, observed: ObservedState
) -> list[Action]:
    """The plan for one trigger's queues and mappings (all removed when ``broker`` is None)."""
    desired = DesiredState(config, (broker,) if broker else (), (trigger,))
    return plan(desired, observed, only=[trigger_key(trigger)])


def plan_removal(
    config: ProvisioningConfig, keys: Iterable[TriggerKey], observed: ObservedState
) -> list[Action]:
    """The plan that removes the queues and mappings of deleted triggers (or of every trigger of
    a deleted broker)."""
    return plan(DesiredState(config), observed, only=keys)


def _ensure_queue(want: CreateQueue, seen: ObservedQueue | None) -> list[Action]:
    if seen is None:
        return [want]
    drifted = {
        k: v
        for k, v in want.attributes.items()
        if seen.attributes.get(k) != v and k not in _CREATE_ONLY
    }
    redrive = want.redrive
    if redrive is not None and _redrive_matches(redrive, seen.attributes.get("RedrivePolicy")):
        redrive = None
    if drifted or redrive is not None:
        return [SetQueueAttributes(want.name, drifted, redrive)]
    return []


def _redrive_matches(want: Redrive, policy: str | None) -> bool:
    try:
        raw = json.loads(policy or "")
        target, count = str(raw["deadLetterTargetArn"]), int(raw["maxReceiveCount"])
    except (ValueError, TypeError, KeyError):
        return False
    return target.rsplit(":", 1)[-1] == want.dead_letter_queue and count == want.max_receive_count


def _ensure_mapping(
    want: CreateMapping, found: list[ObservedMapping]
) -> tuple[list[DeleteMapping], list[Action]]:
    """(mappings to delete, actions to take after): keep one good mapping for the pair, enabled
    (or disabled when ``want`` is); a mapping with the wrong batch size or response types is
    replaced (Lambda would need an update the port does not offer, and ReportBatchItemFailures is
    what makes retries per event), and so is an enabled one where ``want`` is disabled."""

    def fits(m: ObservedMapping) -> bool:
        return (
            (m.batch_size is None or m.batch_size == want.batch_size)
            and (
                m.function_response_types is None
                or tuple(m.function_response_types) == want.function_response_types
            )
            and (want.enabled or not m.enabled)
        )

    ranked = sorted(found, key=lambda m: (not fits(m), not m.enabled, m.uuid))
    keeper = ranked[0] if ranked and fits(ranked[0]) else None
    deletes = [
        DeleteMapping(m.uuid, m.queue_name, m.function_name) for m in ranked if m is not keeper
    ]
    if keeper is None:
        return deletes, [want]
    after: list[Action] = []
    wanted = want.maximum_concurrency
    if wanted is not None and keeper.maximum_concurrency != wanted:
        after.append(
            SetMappingConcurrency(keeper.uuid, keeper.queue_name, keeper.function_name, wanted)
        )
    if want.enabled and not keeper.enabled:
        after.append(EnableMapping(keeper.uuid, keeper.queue_name, keeper.function_name))
    return deletes, after
