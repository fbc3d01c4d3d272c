"""The ``kafka_ingress`` function (design.md §10): every record of a Lambda MSK or self-managed
Kafka event is decoded with the Kafka binding and ingested into the broker of the KafkaSource that
reads its topic, through the same ``Ingress.ingest`` as HTTP.

A record that cannot be ingested because of what it holds (not a valid CloudEvent, too large, or
any unexpected error while decoding or matching it, such as a RecursionError) is a counted
rejection: it goes to the source's failure queue with the reason and the record as received, is
counted (``event_count``, 4xx), archived as ``rejected`` and logged with its topic, partition and
offset, and the batch goes on: never silently dropped, never blocking the partition. Only the
infrastructure (a broker that cannot store, a failure queue that cannot take a record: any
``BrokerError`` other than a refusal of the record) fails the whole batch, so Lambda retries it
from the first offset, at most 10 times (the mapping has an OnFailure destination) before it
records the batch there: duplicates are possible, a stalled partition is not.
"""

from __future__ import annotations

import base64
import binascii
import json
import threading
import time
import traceback
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from chalicelib import logs
from chalicelib.core import archive, senders
from chalicelib.core.clock import utcnow
from chalicelib.core.cloudevents import codec
from chalicelib.core.cloudevents.event import CloudEvent
from chalicelib.core.cloudevents.kafka_binding import KafkaRecord, decode_record
from chalicelib.core.cloudevents.sqs_message import passthrough_headers
from chalicelib.core.errors import (
    BrokerError,
    ForbiddenError,
    PayloadTooLargeError,
    Problem,
    UnavailableError,
    ValidationError,
)
from chalicelib.core.resources import kafka_source as ks
from chalicelib.ports import Archive, Blobs, OutgoingMessage, Queues, ResourceStore
from chalicelib.services.archiver import Archiver
from chalicelib.services.claims import INLINE_LIMIT, Claims
from chalicelib.services.ingress import Ingress, TtlExceededError
from chalicelib.services.metrics import Metrics
from chalicelib.services.resources import Resources
from chalicelib.services.routing import BrokerConfig, ConfigCache

log = logs.get("kafka_ingress")


@dataclass(frozen=True)
class _Item:
    """One record of the event, in offset order within its partition."""

    raw: Mapping[str, Any]
    record: KafkaRecord | None  # None: the Lambda record itself is malformed
    why: str = ""

    @property
    def where(self) -> str:
        return f"{self.raw.get('topic')}-{self.raw.get('partition')}@{self.raw.get('offset')}"


def lambda_records(event: Mapping[str, Any]) -> list[_Item]:
    """The records of a Lambda Kafka event (``records`` maps "topic-partition" to a list), with
    key and value base64-decoded and headers (a list of one-entry objects whose values are
    arrays of signed bytes, as Java has them) turned into ``(name, bytes)`` pairs."""
    items: list[_Item] = []
    for records in (event.get("records") or {}).values():
        for raw in records or []:
            try:
                items.append(_Item(raw, _kafka_record(raw)))
            except (ValueError, TypeError, AttributeError, binascii.Error) as exc:
                items.append(_Item(raw, None, f"the Lambda record is malformed: {exc}"))
    return items


def _kafka_record(raw: Mapping[str, Any]) -> KafkaRecord:
    headers: list[tuple[str, bytes]] = []
    for entry in raw.get("headers") or []:
        for name, values in dict(entry).items():
            headers.append((str(name), bytes(int(b) & 0xFF for b in values)))
    return KafkaRecord(_b64(raw.get("key")), _b64(raw.get("value")), tuple(headers))


def _b64(value: object) -> bytes | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise TypeError("key and value are base64 strings")
    return base64.b64decode(value, validate=True)


class SourceIndex:
    """KafkaSources by (cluster, topic), reloaded after ``ttl`` seconds or when a record names a
    pair it does not know (a source created a moment ago), at most once a second."""

    def __init__(
        self, store: ResourceStore, ttl: float, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._store = store
        self._ttl = ttl
        self._clock = clock
        self._loaded_at = -1e18
        self._sources: dict[tuple[str, str], ks.KafkaSource] = {}
        self._lock = threading.Lock()

    def find(self, cluster_id: str, topic: str) -> ks.KafkaSource | None:
        key = (cluster_id, topic)
        age = self._clock() - self._loaded_at
        if age >= self._ttl or (key not in self._sources and age >= 1.0):
            self._load()
        return self._sources.get(key)

    def _load(self) -> None:
        sources: dict[tuple[str, str], ks.KafkaSource] = {}
        for stored in Resources(self._store, ks.KAFKA_SOURCES).list():
            source = stored.resource
            sources[(source.cluster_id, source.topic)] = source
        with self._lock:
            self._sources, self._loaded_at = sources, self._clock()


class KafkaIngress:
    def __init__(
        self,
        sources: SourceIndex,
        cache: ConfigCache,
        ingress: Ingress,
        queues: Queues,
        blobs: Blobs,
        archive_sink: Archive,
        metrics: Metrics,
        *,
        queue_prefix: str,
        claim_bucket: str,
        clock: Callable[[], datetime] = utcnow,
    ) -> None:
        self._sources = sources
        self._cache = cache
        self._ingress = ingress
        self._queues = queues
        self._claims = Claims(blobs, claim_bucket)
        self._archiver = Archiver(archive_sink, metrics, "kafka_ingress")
        self._metrics = metrics
        self._prefix = queue_prefix
        self._clock = clock

    def handle(self, event: Mapping[str, Any], context: Any = None) -> dict[str, Any]:
        """Ingest every record or raise (the whole batch is then retried)."""
        cluster = ks.event_cluster_id(event)
        groups: dict[tuple[str, str], list[tuple[_Item, CloudEvent]]] = {}
        configs: dict[tuple[str, str], tuple[ks.KafkaSource, BrokerConfig]] = {}
        invalid: list[dict[str, Any]] = []
        for item in lambda_records(event):
            source = self._sources.find(cluster, str(item.raw.get("topic", "")))
            if source is None:
                raise UnavailableError(
                    f"no KafkaSource reads topic {item.raw.get('topic')!r} of {cluster}; "
                    "the batch is retried until one does"
                )
            key = (source.namespace, source.name)
            if key not in configs:
                configs[key] = (source, self._config(source))
            config = configs[key][1]
            try:
                decoded = _decode(item, config)
            except Exception as exc:  # the record's fault, unless _refuse says otherwise
                invalid.append(self._refuse(source, item, exc))
                continue
            groups.setdefault(key, []).append((item, decoded))
        ingested = 0
        for key, pairs in groups.items():
            source, config = configs[key]
            refused = self._ingest(source, config, pairs)
            ingested += len(pairs) - len(refused)
            invalid += refused
        return {"ingested": ingested, "invalid": invalid}

    def _config(self, source: ks.KafkaSource) -> BrokerConfig:
        config = self._cache.get(source.namespace, source.sink_broker)
        if config is None:
            raise UnavailableError(
                f'broker "{source.namespace}/{source.sink_broker}" of kafkasource '
                f'"{source.name}" does not exist; the batch is retried'
            )
        return config

    def _ingest(
        self,
        source: ks.KafkaSource,
        config: BrokerConfig,
        pairs: Sequence[tuple[_Item, CloudEvent]],
    ) -> list[dict[str, Any]]:
        headers = [_passthrough(item) for item, _ in pairs]
        if all(h == headers[0] for h in headers):
            try:
                # Nothing is sent before every event is prepared and matched, so a refusal (or an
                # error of one event's matching) sends nothing.
                self._ingress.ingest(config, [e for _, e in pairs], headers[0], _sender(source))
                self._count(source, "2xx", len(pairs))
                return []
            except Exception as exc:
                if _infrastructure(exc):
                    raise
                # one event's fault: find which, one by one
        invalid: list[dict[str, Any]] = []
        for (item, event), h in zip(pairs, headers, strict=True):
            try:
                self._ingress.ingest(config, [event], h, _sender(source))
                self._count(source, "2xx", 1)
            except Exception as exc:
                invalid.append(self._refuse(source, item, exc))
        return invalid

    def _refuse(self, source: ks.KafkaSource, item: _Item, exc: Exception) -> dict[str, Any]:
        """The rejection of ``item`` for ``exc``, or ``exc`` raised again when it is the
        infrastructure's (the batch is then retried)."""
        if _infrastructure(exc):
            raise exc
        if isinstance(exc, PayloadTooLargeError):
            return self._reject(source, item, "too_large", exc.detail, [])
        if isinstance(exc, ForbiddenError):  # the broker's EventPolicies (docs/security.md)
            return self._reject(source, item, "unauthorized", exc.detail, [])
        if isinstance(exc, ValidationError):
            reason = "ttl_exceeded" if isinstance(exc, TtlExceededError) else "invalid_event"
            return self._reject(source, item, reason, exc.detail, exc.problems)
        # Not a refusal anybody wrote: a defect or a limit (RecursionError) met by this record's
        # content, which is invalid for this broker as surely as a missing id. Its message may
        # quote the data, so the detail names the error and where it was raised, never its text.
        detail = f"the record could not be processed: {type(exc).__name__} at {_raised_at(exc)}"
        return self._reject(source, item, "invalid_event", detail, [])

    def _reject(
        self,
        source: ks.KafkaSource,
        item: _Item,
        reason: str,
        detail: str,
        problems: Sequence[Problem],
    ) -> dict[str, Any]:
        now = self._clock()
        doc = ks.failure_record(
            source, item.raw, reason=reason, detail=detail, problems=problems,
            at=archive.rfc3339(now),
        )  # fmt: skip
        body = json.dumps(doc, separators=(",", ":"))
        if len(body.encode()) > INLINE_LIMIT:
            body = self._claim(source, item, doc)
        queue = ks.failure_queue_name(self._prefix, source.namespace, source.name)
        try:
            failed = self._queues.send_batch(queue, [OutgoingMessage("0", body)])
        except BrokerError as exc:
            raise UnavailableError(f"failure queue {queue}: {exc.detail}") from exc
        if failed:
            raise UnavailableError(f"could not store an invalid record in {queue}")
        log.warning(
            "kafkasource %s/%s: record %s is rejected (%s): %s",
            source.namespace, source.name, item.where, reason, detail,
            extra={"namespace": source.namespace, "kafkasource": source.name, "record": item.where},
        )  # fmt: skip
        self._count(source, "4xx", 1)
        if reason == "unauthorized":
            dims = {"namespace": source.namespace, "broker": source.sink_broker}
            self._metrics.count("unauthorized_count", dims)
        self._archive_rejection(source, reason, detail, now)
        return {
            "topic": item.raw.get("topic"),
            "partition": item.raw.get("partition"),
            "offset": item.raw.get("offset"),
            "reason": reason,
        }

    def _claim(self, source: ks.KafkaSource, item: _Item, doc: dict[str, Any]) -> str:
        """A record too large for SQS goes to S3, the message keeps the reason and a pointer."""
        data = json.dumps(doc["record"], separators=(",", ":")).encode()
        path = (
            f"kafka-failures/{source.namespace}/{source.name}/"
            f"{item.raw.get('topic')}-{item.raw.get('partition')}-{item.raw.get('offset')}-"
            f"{uuid.uuid4().hex[:8]}.json"
        )
        try:
            claim = self._claims.put(path, data)
        except BrokerError as exc:
            raise UnavailableError(f"could not store an invalid record in S3: {exc}") from exc
        small = {k: v for k, v in doc.items() if k != "record"}
        small["record"] = {
            k: item.raw.get(k) for k in ("topic", "partition", "offset", "timestamp")
        }
        small["recordClaim"] = {"bucket": claim.bucket, "key": claim.key, "size": claim.size}
        return json.dumps(small, separators=(",", ":"))

    def _count(self, source: ks.KafkaSource, status_class: str, n: int) -> None:
        dims = {
            "namespace": source.namespace,
            "broker": source.sink_broker,
            "response_code_class": status_class,
        }
        self._metrics.count("event_count", dims, n)

    def _archive_rejection(
        self, source: ks.KafkaSource, reason: str, detail: str, now: datetime
    ) -> None:
        status = {"too_large": 413, "unauthorized": 403}.get(reason, 400)
        record = archive.rejected_record(
            source.namespace, source.sink_broker, status, reason, detail, now
        )
        self._archiver.write([archive.encode_line(record)])  # retried, counted, logged


def _decode(item: _Item, config: BrokerConfig) -> CloudEvent:
    if item.record is None:
        raise ValidationError([Problem("record", item.why)])
    return decode_record(
        item.record,
        legacy=config.legacy,
        limits=codec.Limits(max_body_bytes=config.max_event_bytes),
    )


def _infrastructure(exc: Exception) -> bool:
    """Whether ``exc`` is the infrastructure's failure (retry the batch) rather than a refusal
    of the record: every error the services raise on purpose except a ValidationError or a
    PayloadTooLargeError or a ForbiddenError. Anything else (a defect, a RecursionError) is the
    record's fault."""
    return isinstance(exc, BrokerError) and not isinstance(
        exc, ValidationError | PayloadTooLargeError | ForbiddenError
    )


def _sender(source: ks.KafkaSource) -> str:
    """Who the source's events come from, to the broker's EventPolicies."""
    return senders.source(source.namespace, ks.KIND, source.name)


def _raised_at(exc: BaseException) -> str:
    frames = traceback.extract_tb(exc.__traceback__)
    if not frames:
        return "an unknown place"
    last = frames[-1]
    return f"{Path(last.filename).name}:{last.lineno}"


def _passthrough(item: _Item) -> dict[str, str]:
    """Kafka headers that Knative passes through over HTTP (traceparent, knative-*, ...)."""
    if item.record is None:
        return {}
    text: dict[str, str] = {}
    for name, value in item.record.headers:
        if name.lower().startswith("ce_") or name.lower() == "content-type":
            continue
        try:
            text[name] = value.decode("utf-8")
        except UnicodeDecodeError:
            continue
    return passthrough_headers(text)
