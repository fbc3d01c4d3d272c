"""What the services need from the outside world. Each port has an in-memory fake (tests/fakes)
and an AWS adapter (chalicelib/adapters), and one contract suite runs on both (tests/contract)."""

from __future__ import annotations

import builtins
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Protocol

from chalicelib.core.cloudevents.kafka_binding import KafkaRecord
from chalicelib.core.delivery.rate import Grant
from chalicelib.core.reconcile import CreateMapping
from chalicelib.core.resources.kafka_source import KafkaMappingInfo, KafkaMappingSpec, KafkaSource


@dataclass(frozen=True)
class StoredItem:
    """A stored resource document with its concurrency token."""

    kind: str
    namespace: str
    name: str
    doc: Mapping[str, Any]
    version: int


class ResourceStore(Protocol):
    """Brokers, triggers, tokens and registry entries. ``version`` is the optimistic-concurrency
    token: ``put`` with ``expected_version=None`` creates (ConflictError if it exists), otherwise it
    replaces only if the stored version matches (ConflictError if not)."""

    def get(self, kind: str, namespace: str, name: str) -> StoredItem | None: ...

    def list(self, kind: str, namespace: str | None = None) -> builtins.list[StoredItem]: ...

    def put(
        self,
        kind: str,
        namespace: str,
        name: str,
        doc: Mapping[str, Any],
        expected_version: int | None,
    ) -> StoredItem: ...

    def delete(self, kind: str, namespace: str, name: str) -> bool: ...

    def epoch(self, namespace: str) -> int:
        """A counter that changes after every put or delete in ``namespace`` (of the kinds the
        store counts; 0 before the first): a cache of the namespace's items checks it instead of
        reading them again."""
        ...


@dataclass(frozen=True)
class QueueInfo:
    name: str
    url: str
    arn: str
    attributes: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class OutgoingMessage:
    id: str  # unique within one batch
    body: str
    delay_seconds: int = 0  # standard queues only: SQS FIFO refuses a per-message delay
    group_id: str | None = None  # FIFO queues: MessageGroupId (required there)
    dedup_id: str | None = None  # FIFO queues: MessageDeduplicationId (required there)
    # String message attributes (a retried event's attempts, sqs_message.ATTEMPTS_ATTRIBUTE)
    message_attributes: Mapping[str, str] | None = None


@dataclass(frozen=True)
class ReceivedMessage:
    message_id: str
    receipt_handle: str
    body: str
    attributes: Mapping[str, str]
    message_attributes: Mapping[str, str] = field(default_factory=dict)  # the string ones


class QueueSender(Protocol):
    def send_batch(self, name: str, messages: Sequence[OutgoingMessage]) -> builtins.list[str]:
        """Send up to 10 messages; return the ids of the entries that failed."""
        ...


class Queues(QueueSender, Protocol):
    """SQS as the services use it. Queue *names* are the identifiers; adapters cache URLs."""

    def create(self, name: str, attributes: Mapping[str, str]) -> QueueInfo: ...

    def get(self, name: str) -> QueueInfo | None: ...

    def list(self, prefix: str) -> builtins.list[QueueInfo]: ...

    def set_attributes(self, name: str, attributes: Mapping[str, str]) -> None: ...

    def delete(self, name: str) -> None: ...

    def receive(
        self, name: str, max_messages: int, wait_seconds: int, visibility_timeout: int | None
    ) -> builtins.list[ReceivedMessage]: ...

    def delete_message(self, name: str, receipt_handle: str) -> None: ...

    def change_visibility(self, name: str, receipt_handle: str, timeout: int) -> None: ...

    def purge(self, name: str) -> None: ...

    def depth(self, name: str) -> int: ...


@dataclass(frozen=True)
class MappingInfo:
    uuid: str
    source_arn: str
    function_name: str
    enabled: bool
    batch_size: int
    function_response_types: tuple[str, ...] = ()
    maximum_concurrency: int | None = None  # ScalingConfig.MaximumConcurrency


class Mappings(Protocol):
    """Lambda event source mappings, both families: SQS queue → delivery function, and Kafka
    topic (self-managed or MSK) → kafka_ingress function. One UUID space: ``set_enabled`` and
    ``delete`` take either kind."""

    def list(self, function_name: str) -> builtins.list[MappingInfo]:
        """The function's SQS mappings."""
        ...

    def list_kafka(self, function_name: str) -> builtins.list[KafkaMappingInfo]:
        """The function's Kafka mappings (none that Lambda is deleting)."""
        ...

    def create(self, source_arn: str, mapping: CreateMapping) -> MappingInfo:
        """``mapping``'s function reading ``source_arn``, the queue it names."""
        ...

    def create_kafka(self, spec: KafkaMappingSpec, enabled: bool) -> KafkaMappingInfo: ...

    def set_enabled(self, uuid: str, enabled: bool) -> None: ...

    def set_concurrency(self, uuid: str, maximum_concurrency: int) -> None:
        """An SQS mapping's ScalingConfig.MaximumConcurrency."""
        ...

    def update_kafka(self, uuid: str, spec: KafkaMappingSpec, enabled: bool) -> None:
        """Batch size, access configurations, failure destination and state; the rest of a
        mapping (cluster, topic, consumer group, starting position) cannot change."""
        ...

    def delete(self, uuid: str) -> None: ...


class Blobs(Protocol):
    """Object storage for claim-checked events."""

    def put(self, bucket: str, key: str, data: bytes) -> None: ...

    def get(self, bucket: str, key: str) -> bytes: ...

    def delete(self, bucket: str, key: str) -> None: ...


class BlobListing(Protocol):
    """Keys of a bucket in lexicographic order (S3 ListObjectsV2), for reading the archive back."""

    def list_keys(
        self, bucket: str, prefix: str, start_after: str, limit: int
    ) -> builtins.list[str]:
        """Up to ``limit`` keys under ``prefix`` that sort after ``start_after``, in order."""
        ...


class Archive(Protocol):
    """The event archive (Firehose → S3). ``put`` takes already-encoded JSON-lines records."""

    def put(self, records: Sequence[bytes]) -> None: ...


class CarrySpool(Protocol):
    """A copy of the archive records a warm container carries, kept where the shutdown extension
    finds them (adapters/archive_spool.py). Raises UnavailableError when it cannot keep them."""

    def append(self, records: Sequence[bytes]) -> None: ...

    def seal(self) -> str | None: ...

    def discard(self, sealed: str) -> None: ...


class HttpResponse(NamedTuple):  # a tuple: one is built per delivery attempt, cheaply
    status: int | None  # None: transport error or timeout
    headers: Mapping[str, str]
    body: bytes
    error: str | None = None
    elapsed_ms: float = 0.0


class HttpSender(Protocol):
    """POSTs to subscribers; never follows redirects; never raises for transport errors."""

    def post(
        self, url: str, headers: Mapping[str, str], body: bytes, timeout: float
    ) -> HttpResponse: ...

    def trusting(self, ca_certs: str) -> HttpSender:
        """A sender whose TLS also trusts the CAs of the PEM bundle ``ca_certs`` (a
        Destination's CACerts), with the same address guard."""
        ...


# ---- authenticated HTTP delivery: Connections (docs/targets.md) ---------------------------------


class Secrets(Protocol):
    """Secrets Manager's secret strings. Raises UnavailableError naming the secret and the
    service's error code, never what the secret holds."""

    def get_string(self, arn: str) -> str: ...


class RequestSigner(Protocol):
    """AWS Signature Version 4 with the function's own credentials."""

    def sign(
        self,
        url: str,
        headers: Mapping[str, str],
        body: bytes,
        service: str,
        region: str,
    ) -> dict[str, str]:
        """The headers of a signed POST of ``body`` to ``url`` (``headers`` and the signature's:
        Authorization, X-Amz-Date, X-Amz-Security-Token)."""
        ...


# ---- Kafka (design.md §10) ---------------------------------------------------------------------


@dataclass(frozen=True)
class PublishResult:
    ok: bool
    error: str | None = None
    elapsed_ms: float = 0.0


class KafkaOffsets(Protocol):
    """A KafkaSource's consumer group offsets, initialised before the source is Ready (as
    Knative's KafkaSource does): the group's consumers, Lambda's included, resume from them."""

    def initialize(self, source: KafkaSource) -> int:
        """Commit the log-end offset of each partition of the source's topic that its consumer
        group has no committed offset for; how many were committed. UnavailableError when the
        cluster cannot be reached, the topic does not exist, or the group refuses the commit."""
        ...


class KafkaPublisher(Protocol):
    """Produces one record and waits for the cluster's acknowledgement (acks=all); never raises
    for a transport or broker error, which comes back as ``ok=False`` with the reason."""

    def publish(
        self, bootstrap_servers: str, topic: str, record: KafkaRecord, timeout: float
    ) -> PublishResult: ...


# ---- Deduplication (docs/dedup.md) -------------------------------------------------------------


@dataclass(frozen=True)
class Claimed:
    """What a claim call found, by index of its keys: ``fresh`` were claimed by this call
    (pending until confirmed); ``held`` are pending claims of another request, unexpired
    (index -> when that claim ends, epoch seconds); the rest are duplicates (confirmed)."""

    fresh: frozenset[int]
    held: Mapping[int, float] = field(default_factory=dict)


class SeenEvents(Protocol):
    """The (source, id) keys each broker accepted within its dedup window. ``scope`` names the
    broker ("{namespace}/{broker}"); times are seconds since the epoch (``now`` is a parameter:
    the caller's clock decides what has expired, as the store's own expiry is lazy). A key is
    claimed *pending* (until ``now + hold_s``) before its event is stored and *confirmed* (until
    the window ends) after: a claimant that dies between the two holds the key only briefly."""

    def claim(
        self, scope: str, keys: Sequence[tuple[str, str]], hold_s: float, now: float
    ) -> Claimed:
        """Claim each key of ``keys`` (no repeats), pending until ``now + hold_s``, unless a
        claim of it (pending or confirmed) is unexpired at ``now``. Atomic per key: of
        concurrent claims of one key, exactly one gets it. Raises UnavailableError when it
        cannot tell (nothing may then be accepted)."""
        ...

    def confirm(self, scope: str, keys: Sequence[tuple[str, str]], until: float) -> None:
        """Keys this caller claimed whose events are stored: seen until ``until``. Raises
        UnavailableError (the keys then stay pending until their hold ends)."""
        ...

    def release(self, scope: str, keys: Sequence[tuple[str, str]]) -> None:
        """Forget keys this caller claimed: their request failed after the claim, and the
        producer's retry must not wait for the hold to end. Raises UnavailableError."""
        ...


# ---- Flow control (docs/flow-control.md) -------------------------------------------------------


class RateLimiter(Protocol):
    """Token buckets shared by every delivery invocation (core/delivery/rate.py). ``key`` names a
    trigger's bucket; ``now`` is seconds since the epoch (the caller's clock)."""

    def acquire(self, key: str, rate: float, n: int, now: float, horizon: float) -> Grant:
        """Take up to ``n`` tokens due within ``horizon`` seconds, atomically with respect to
        concurrent callers on the same key (no token is granted twice). Raises
        UnavailableError when the bucket cannot be read or written."""
        ...


# ---- AWS targets (docs/targets.md) -------------------------------------------------------------


@dataclass(frozen=True)
class TargetCall:
    """One delivery to an AWS target, as services/delivery_aws.py builds it: the payload and the
    fields the target's service takes beside it."""

    arn: str
    body: str  # structured JSON (EventBridge: the entry's Detail)
    group_id: str | None = None  # SQS and SNS FIFO: MessageGroupId
    dedup_id: str | None = None  # SQS and SNS FIFO: MessageDeduplicationId
    attributes: Mapping[str, str] = field(default_factory=dict)  # SNS message attributes
    name: str | None = None  # Step Functions: the execution name; S3: the object's key
    partition_key: str | None = None  # Kinesis
    source: str | None = None  # EventBridge: Source
    detail_type: str | None = None  # EventBridge: DetailType


@dataclass(frozen=True)
class TargetResult:
    """What a target's service answered. ``code`` is the AWS error code (``FunctionError`` for a
    Lambda function that raised, ``Timeout`` for no answer in time), None on success."""

    code: str | None = None
    message: str = ""
    http_status: int | None = 200  # of the answer; None: none came (a timeout, no connection)
    payload: bytes | None = None  # a Lambda function's result
    elapsed_ms: float = 0.0

    @property
    def ok(self) -> bool:
        return self.code is None


class AwsTargets(Protocol):
    """Lambda, SQS, SNS, Step Functions, EventBridge, Kinesis and Firehose as subscribers. Never
    raises for an AWS error or a timeout: they come back in the result."""

    def send(self, call: TargetCall, timeout: float) -> TargetResult:
        """One call (Invoke, SendMessage, Publish, StartExecution, PutEvents, PutRecord)."""
        ...

    def check(self, arn: str) -> TargetResult:
        """The target's cheap describe call (GetFunction, GetQueueAttributes, ...): whether it
        exists and the caller may reach it."""
        ...


# ---- tokens for authenticated delivery (design.md §2.5) ------------------------------------------


class Signer(Protocol):
    """An ECDSA P-256 key whose private half stays with its keeper (KMS). Raises UnavailableError
    when the keeper cannot be reached or refuses."""

    def sign(self, message: bytes) -> bytes:
        """The DER ECDSA-SHA256 signature of ``message`` (KMS ``Sign``, MessageType RAW)."""
        ...

    def public_key(self) -> bytes:
        """The DER SubjectPublicKeyInfo of the key (KMS ``GetPublicKey``)."""
        ...


# ---- schedules of the sources (services/schedules.py, docs/sources.md) ---------------------------


@dataclass(frozen=True)
class DeployedSchedule:
    """One EventBridge Scheduler schedule of the stage, invoking the ``pings`` function."""

    name: str
    expression: str  # "cron(...)" or "rate(...)"
    timezone: str  # IANA; "UTC" by default
    input: str  # the target's Input (core/schedules.py Schedule.input)


class Schedules(Protocol):
    """Scheduler's schedules in the stage's group. Raises UnavailableError when it fails."""

    def put(self, schedule: DeployedSchedule) -> None:
        """Create the schedule, or replace the one of that name."""
        ...

    def get(self, name: str) -> DeployedSchedule | None: ...

    def names(self, prefix: str) -> builtins.list[str]:
        """The names of the schedules that start with ``prefix``."""
        ...

    def delete(self, name: str) -> None:
        """Remove it; one that does not exist is already removed."""
        ...
