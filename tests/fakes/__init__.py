"""In-memory fakes of every port (chalicelib/ports.py). tests/contract runs one suite on each fake
and on its AWS adapter against a real moto server, so the fakes cannot drift from AWS."""

from __future__ import annotations

import itertools
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from chalicelib.core.delivery.rate import Bucket, Grant, take
from chalicelib.core.errors import (
    CallTooLargeError,
    ConflictError,
    NotFoundError,
    UnavailableError,
)
from chalicelib.core.reconcile import CreateMapping
from chalicelib.ports import (
    Claimed,
    HttpResponse,
    MappingInfo,
    OutgoingMessage,
    QueueInfo,
    ReceivedMessage,
    StoredItem,
)

ACCOUNT = "123456789012"
REGION = "us-east-1"


class MemoryStore:
    def __init__(self, counted_kinds: frozenset[str] | None = None) -> None:
        self._items: dict[tuple[str, str, str], StoredItem] = {}
        self._epochs: dict[str, int] = {}
        self._counted = counted_kinds
        self._lock = threading.Lock()
        self.calls = 0

    def epoch(self, namespace: str) -> int:
        self.calls += 1
        return self._epochs.get(namespace, 0)

    def get(self, kind: str, namespace: str, name: str) -> StoredItem | None:
        self.calls += 1
        return self._items.get((kind, namespace, name))

    def list(self, kind: str, namespace: str | None = None) -> list[StoredItem]:
        self.calls += 1
        items = [
            v
            for (k, ns, _), v in self._items.items()
            if k == kind and (namespace is None or ns == namespace)
        ]
        return sorted(items, key=lambda s: (s.namespace, s.name))

    def put(
        self,
        kind: str,
        namespace: str,
        name: str,
        doc: Mapping[str, Any],
        expected_version: int | None,
    ) -> StoredItem:
        self.calls += 1
        key = (kind, namespace, name)
        with self._lock:
            current = self._items.get(key)
            if expected_version is None and current is not None:
                raise ConflictError(f"{kind} {namespace}/{name} already exists")
            if expected_version is not None and (
                current is None or current.version != expected_version
            ):
                raise ConflictError(f"{kind} {namespace}/{name} was modified concurrently")
            version = 1 if expected_version is None else expected_version + 1
            # Stored documents are JSON in DynamoDB: keep a deep copy, as the adapter does.
            import json

            item = StoredItem(kind, namespace, name, json.loads(json.dumps(doc)), version)
            self._items[key] = item
            self._count(kind, namespace)
            return item

    def _count(self, kind: str, namespace: str) -> None:
        if self._counted is None or kind in self._counted:
            self._epochs[namespace] = self._epochs.get(namespace, 0) + 1

    def delete(self, kind: str, namespace: str, name: str) -> bool:
        self.calls += 1
        with self._lock:
            self._count(kind, namespace)
            return self._items.pop((kind, namespace, name), None) is not None


@dataclass(eq=False)  # identity: list.remove stays a pointer comparison
class _Message:
    message_id: str
    body: str
    visible_at: float
    receive_count: int = 0
    receipt: str = ""
    sent_at: float = field(default_factory=time.time)
    group_id: str | None = None  # FIFO queues only
    dedup_id: str | None = None
    message_attributes: Mapping[str, str] = field(default_factory=dict)


# SQS FIFO forgets a MessageDeduplicationId after five minutes.
DEDUP_SECONDS = 300


class MemoryQueues:
    """SQS semantics that matter here: visibility, receive counts, redrive to a DLQ after
    maxReceiveCount, batches of at most 10; and on FIFO queues (``FifoQueue=true``, a name
    ending in ``.fifo``): a group and a deduplication id on every send, no per-message delay,
    deduplication for five minutes (per group with ``DeduplicationScope=messageGroup``), and
    receives that return a group's messages in order and none of a group with a message in
    flight."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._queues: dict[str, dict[str, Any]] = {}
        self._receipts: dict[str, _Message] = {}  # the latest receipt handle of each message
        self._clock = clock
        self._lock = threading.Condition()
        self.send_calls = 0
        self.fail_next_sends: int = 0
        # A call's whole payload (SQS: 1 MiB since August 2025; 256 KiB before).
        self.max_batch_bytes: int = 1024 * 1024

    def _q(self, name: str) -> dict[str, Any]:
        q = self._queues.get(name)
        if q is None:
            raise NotFoundError(f"queue {name} does not exist")
        return q

    def create(self, name: str, attributes: Mapping[str, str]) -> QueueInfo:
        with self._lock:
            q = self._queues.get(name)
            if (attributes.get("FifoQueue") == "true") != name.endswith(".fifo"):
                raise ValueError("a FIFO queue's name, and only its name, ends in .fifo")
            if q is None:
                arn = f"arn:aws:sqs:{REGION}:{ACCOUNT}:{name}"
                attrs = {"VisibilityTimeout": "30", "QueueArn": arn, **attributes}
                q = {"attributes": attrs, "messages": []}
                self._queues[name] = q
            elif any(q["attributes"].get(k) != v for k, v in attributes.items()):
                raise ConflictError(f"queue {name} exists with other attributes")
            return self._info(name)

    def _info(self, name: str) -> QueueInfo:
        q = self._queues[name]
        return QueueInfo(
            name=name,
            url=f"https://sqs.{REGION}.amazonaws.com/{ACCOUNT}/{name}",
            arn=q["attributes"]["QueueArn"],
            attributes=dict(q["attributes"]),
        )

    def get(self, name: str) -> QueueInfo | None:
        with self._lock:
            return self._info(name) if name in self._queues else None

    def list(self, prefix: str) -> list[QueueInfo]:
        with self._lock:
            return [self._info(n) for n in sorted(self._queues) if n.startswith(prefix)]

    def set_attributes(self, name: str, attributes: Mapping[str, str]) -> None:
        with self._lock:
            self._q(name)["attributes"].update(attributes)

    def delete(self, name: str) -> None:
        with self._lock:
            self._queues.pop(name, None)

    def send_batch(self, name: str, messages: Sequence[OutgoingMessage]) -> list[str]:
        if not 1 <= len(messages) <= 10:
            raise ValueError("a batch has 1 to 10 entries")
        size = sum(len(m.body.encode()) for m in messages)
        if size > self.max_batch_bytes:  # what SqsQueues raises for BatchRequestTooLong
            raise CallTooLargeError(f"send to {name}: BatchRequestTooLong ({size} bytes)")
        with self._lock:
            self.send_calls += 1
            q = self._q(name)
            fifo = q["attributes"].get("FifoQueue") == "true"
            for m in messages:  # SQS refuses the whole call for one bad entry
                if fifo and (m.group_id is None or m.dedup_id is None or m.delay_seconds):
                    raise ValueError("a FIFO send needs a group and a dedup id, and no delay")
                if not fifo and m.group_id is not None:
                    raise ValueError("MessageGroupId is for FIFO queues")
            failed: list[str] = []
            for m in messages:
                if self.fail_next_sends > 0:
                    self.fail_next_sends -= 1
                    failed.append(m.id)
                    continue
                if fifo and self._duplicate(q, m):
                    continue  # accepted, and dropped: what SQS does within the window
                q["messages"].append(
                    _Message(
                        str(uuid.uuid4()),
                        m.body,
                        self._clock() + m.delay_seconds,
                        group_id=m.group_id,
                        dedup_id=m.dedup_id,
                        message_attributes=dict(m.message_attributes or {}),
                    )
                )
            self._lock.notify_all()
            return failed

    def _duplicate(self, q: dict[str, Any], m: OutgoingMessage) -> bool:
        now = self._clock()
        seen: dict[tuple[str | None, str | None], float] = q.setdefault("dedup", {})
        per_group = q["attributes"].get("DeduplicationScope") == "messageGroup"
        key = (m.group_id if per_group else None, m.dedup_id)
        for k in [k for k, at in seen.items() if at <= now - DEDUP_SECONDS]:
            del seen[k]
        if key in seen:
            return True
        seen[key] = now
        return False

    def receive(
        self, name: str, max_messages: int, wait_seconds: int, visibility_timeout: int | None
    ) -> list[ReceivedMessage]:
        deadline = self._clock() + wait_seconds
        with self._lock:
            while True:
                out = self._take(name, max_messages, visibility_timeout)
                if out or self._clock() >= deadline:
                    return out
                self._lock.wait(timeout=0.05)

    def _take(
        self, name: str, max_messages: int, visibility_timeout: int | None
    ) -> list[ReceivedMessage]:
        q = self._q(name)
        now = self._clock()
        timeout = (
            visibility_timeout
            if visibility_timeout is not None
            else int(q["attributes"]["VisibilityTimeout"])
        )
        out: list[ReceivedMessage] = []
        fifo = q["attributes"].get("FifoQueue") == "true"
        # A group with a message in flight gives nothing until that message is deleted or
        # visible again; one receive may take several messages of a free group, in order.
        busy = {
            m.group_id for m in q["messages"] if fifo and m.receive_count and m.visible_at > now
        }
        for m in list(q["messages"]):
            if len(out) >= max_messages:
                break
            if m.visible_at > now or m.group_id in busy:
                continue
            redrive = q["attributes"].get("RedrivePolicy")
            if redrive:
                import json

                policy = json.loads(redrive)
                if m.receive_count >= int(policy["maxReceiveCount"]):
                    q["messages"].remove(m)
                    dlq = policy["deadLetterTargetArn"].rsplit(":", 1)[-1]
                    if dlq in self._queues:
                        m.visible_at = now
                        self._queues[dlq]["messages"].append(m)
                    continue
            m.receive_count += 1
            self._receipts.pop(m.receipt, None)
            m.receipt = f"{m.message_id}#{m.receive_count}"
            self._receipts[m.receipt] = m
            m.visible_at = now + timeout
            attributes = {"ApproximateReceiveCount": str(m.receive_count)}
            if fifo:
                attributes["MessageGroupId"] = str(m.group_id)
                attributes["MessageDeduplicationId"] = str(m.dedup_id)
            out.append(
                ReceivedMessage(
                    m.message_id, m.receipt, m.body, attributes, dict(m.message_attributes)
                )
            )
        return out

    def _find(self, name: str, receipt_handle: str) -> _Message | None:
        self._q(name)
        m = self._receipts.get(receipt_handle)
        return m if m is not None and m.receipt == receipt_handle else None

    def delete_message(self, name: str, receipt_handle: str) -> None:
        with self._lock:
            m = self._find(name, receipt_handle)
            if m is not None and m in self._q(name)["messages"]:
                self._q(name)["messages"].remove(m)
                self._receipts.pop(receipt_handle, None)

    def change_visibility(self, name: str, receipt_handle: str, timeout: int) -> None:
        if not 0 <= timeout <= 43200:
            raise ValueError("visibility timeout must be 0..43200")
        with self._lock:
            m = self._find(name, receipt_handle)
            if m is None:
                raise NotFoundError("receipt handle is not valid")
            m.visible_at = self._clock() + timeout
            self._lock.notify_all()

    def purge(self, name: str) -> None:
        with self._lock:
            self._q(name)["messages"].clear()

    def depth(self, name: str) -> int:
        with self._lock:
            return len(self._q(name)["messages"])


class MemoryMappings:
    """Lambda's event source mappings: SQS (one per queue and function) and Kafka (one per
    consumer group and cluster), in one UUID space."""

    def __init__(self) -> None:
        self._mappings: dict[str, MappingInfo] = {}
        self.kafka: dict[str, Any] = {}

    def list(self, function_name: str) -> list[MappingInfo]:
        found = [m for m in self._mappings.values() if m.function_name == function_name]
        return sorted(found, key=lambda m: (m.source_arn, m.uuid))

    def create(self, source_arn: str, mapping: CreateMapping) -> MappingInfo:
        for m in self._mappings.values():
            if m.source_arn == source_arn and m.function_name == mapping.function_name:
                raise ConflictError("the mapping already exists")
        info = MappingInfo(
            str(uuid.uuid4()),
            source_arn,
            mapping.function_name,
            mapping.enabled,
            mapping.batch_size,
            tuple(mapping.function_response_types),
            mapping.maximum_concurrency,
        )
        self._mappings[info.uuid] = info
        return info

    def set_enabled(self, uuid_: str, enabled: bool) -> None:
        m = self._mappings.get(uuid_)
        if m is None:
            raise NotFoundError(f"mapping {uuid_} does not exist")
        self._mappings[uuid_] = replace(m, enabled=enabled)

    def set_concurrency(self, uuid_: str, maximum_concurrency: int) -> None:
        m = self._mappings.get(uuid_)
        if m is None:
            raise NotFoundError(f"mapping {uuid_} does not exist")
        self._mappings[uuid_] = replace(m, maximum_concurrency=maximum_concurrency)

    def list_kafka(self, function_name: str) -> list[Any]:
        found = [m for m in self.kafka.values() if m.spec.function_name == function_name]
        return sorted(found, key=lambda m: (m.spec.cluster_id, m.spec.topic, m.uuid))

    def create_kafka(self, spec: Any, enabled: bool) -> Any:
        from chalicelib.core.resources.kafka_source import KafkaMappingInfo

        for m in self.kafka.values():
            same_group = (m.spec.cluster_id, m.spec.consumer_group)
            if same_group == (spec.cluster_id, spec.consumer_group) and m.spec.topic == spec.topic:
                raise ConflictError("the mapping already exists")
        info = KafkaMappingInfo(str(uuid.uuid4()), spec, enabled)
        self.kafka[info.uuid] = info
        return info

    def update_kafka(self, uuid_: str, spec: Any, enabled: bool) -> None:
        m = self.kafka.get(uuid_)
        if m is None:
            raise NotFoundError(f"mapping {uuid_} does not exist")
        if spec.identity != m.spec.identity:
            raise ValueError("Lambda cannot change a mapping's cluster, topic, group or position")
        self.kafka[uuid_] = replace(m, spec=spec, enabled=enabled)

    def delete(self, uuid_: str) -> None:
        if self._mappings.pop(uuid_, None) is None and self.kafka.pop(uuid_, None) is None:
            raise NotFoundError(f"mapping {uuid_} does not exist")


class MemoryBlobs:
    def __init__(self) -> None:
        self.objects: dict[tuple[str, str], bytes] = {}

    def put(self, bucket: str, key: str, data: bytes) -> None:
        self.objects[(bucket, key)] = bytes(data)

    def get(self, bucket: str, key: str) -> bytes:
        try:
            return self.objects[(bucket, key)]
        except KeyError:
            raise NotFoundError(f"s3://{bucket}/{key} does not exist") from None

    def delete(self, bucket: str, key: str) -> None:
        self.objects.pop((bucket, key), None)

    def list_keys(self, bucket: str, prefix: str, start_after: str, limit: int) -> list[str]:
        keys = sorted(k for b, k in self.objects if b == bucket and k.startswith(prefix))
        return [k for k in keys if k > start_after][:limit]


class MemoryArchive:
    """Firehose as the adapter presents it: records over 1,000 KiB, and those ``refuse`` says
    (Firehose's per-record ErrorCode), are not written and named in PartlyWrittenError (the
    others kept); ``fail_next`` puts fail whole as an outage does."""

    MAX_RECORD_BYTES = 1000 * 1024

    def __init__(self) -> None:
        self.records: list[bytes] = []
        self.fail_next = 0
        self.calls = 0
        self.refuse: Callable[[bytes], bool] = lambda record: False

    def put(self, records: Sequence[bytes]) -> None:
        from chalicelib.core.archive import PartlyWrittenError
        from chalicelib.core.errors import UnavailableError

        self.calls += 1
        if self.fail_next > 0:
            self.fail_next -= 1
            raise UnavailableError("archive: ServiceUnavailableException")
        refused = [len(r) > self.MAX_RECORD_BYTES or self.refuse(r) for r in records]
        self.records.extend(r for r, no in zip(records, refused, strict=True) if not no)
        unwritten = [r for r, no in zip(records, refused, strict=True) if no]
        if unwritten:
            raise PartlyWrittenError(f"archive: {len(unwritten)} records not written", unwritten)

    def decoded(self) -> list[dict[str, Any]]:
        import json

        return [json.loads(r) for r in self.records]


@dataclass
class SentRequest:
    url: str
    headers: dict[str, str]
    body: bytes
    timeout: float


class ScriptedSender:
    """An HttpSender answering from a script: ``answers`` is consumed in order; the last answer
    repeats."""

    def __init__(self, *answers: HttpResponse) -> None:
        self.sent: list[SentRequest] = []
        self._answers = list(answers) or [HttpResponse(202, {}, b"")]
        self._counter = itertools.count()

    def post(
        self, url: str, headers: Mapping[str, str], body: bytes, timeout: float
    ) -> HttpResponse:
        self.sent.append(SentRequest(url, dict(headers), body, timeout))
        i = next(self._counter)
        return self._answers[min(i, len(self._answers) - 1)]


@dataclass
class Published:
    bootstrap_servers: str
    topic: str
    record: Any
    timeout: float


class RecordingPublisher:
    """A KafkaPublisher that records what it is given; ``fail_next`` publishes fail first."""

    def __init__(self, fail_next: int = 0, error: str = "KafkaTimeoutError: no ack") -> None:
        self.published: list[Published] = []
        self.fail_next = fail_next
        self._error = error

    def publish(self, bootstrap_servers: str, topic: str, record: Any, timeout: float) -> Any:
        from chalicelib.ports import PublishResult

        if self.fail_next > 0:
            self.fail_next -= 1
            return PublishResult(False, self._error)
        self.published.append(Published(bootstrap_servers, topic, record, timeout))
        return PublishResult(True)


class MemorySeenEvents:
    """SeenEvents in a dict; ``calls`` counts claim, confirm and release calls (one each per
    batch, as the adapter makes at best); ``fail_next`` makes that many calls raise
    UnavailableError, ``fail_releases`` every release and ``fail_confirms`` every confirm."""

    def __init__(self) -> None:
        self._seen: dict[tuple[str, str, str], tuple[float, bool]] = {}  # (until, confirmed)
        self._lock = threading.Lock()
        self.calls = 0
        self.fail_next = 0
        self.fail_releases = False
        self.fail_confirms = False

    def _call(self) -> None:
        self.calls += 1
        if self.fail_next:
            self.fail_next -= 1
            raise UnavailableError("seen events: injected failure")

    def claim(
        self, scope: str, keys: Sequence[tuple[str, str]], hold_s: float, now: float
    ) -> Claimed:
        with self._lock:
            self._call()
            fresh: set[int] = set()
            held: dict[int, float] = {}
            for i, (source, event_id) in enumerate(keys):
                key = (scope, source, event_id)
                until, confirmed = self._seen.get(key, (now, True))
                if until <= now:
                    self._seen[key] = (now + hold_s, False)
                    fresh.add(i)
                elif not confirmed:
                    held[i] = until
            return Claimed(frozenset(fresh), held)

    def confirm(self, scope: str, keys: Sequence[tuple[str, str]], until: float) -> None:
        with self._lock:
            self._call()
            if self.fail_confirms:
                raise UnavailableError("seen events: injected confirm failure")
            for source, event_id in keys:
                self._seen[(scope, source, event_id)] = (until, True)

    def release(self, scope: str, keys: Sequence[tuple[str, str]]) -> None:
        with self._lock:
            self._call()
            if self.fail_releases:
                raise UnavailableError("seen events: injected release failure")
            for source, event_id in keys:
                self._seen.pop((scope, source, event_id), None)


class MemoryRateLimiter:
    """RateLimiter in a dict, on the same arithmetic as the adapter; ``calls`` counts acquires and
    ``fail_next`` makes that many raise UnavailableError."""

    def __init__(self) -> None:
        self._buckets: dict[str, Bucket] = {}
        self._lock = threading.Lock()
        self.calls = 0
        self.fail_next = 0

    def acquire(self, key: str, rate: float, n: int, now: float, horizon: float) -> Grant:
        with self._lock:
            self.calls += 1
            if self.fail_next:
                self.fail_next -= 1
                raise UnavailableError("rate limiter: injected failure")
            self._buckets[key], grant = take(self._buckets.get(key), rate, n, now, horizon)
            return grant
