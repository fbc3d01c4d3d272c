"""The local runtime's part of IntegrationSource's AWS plumbing (docs/sources.md), where moto runs
no Lambda poller and no EventBridge delivery: the ``sources`` function invoked as AWS would.

- ``StreamEventSources``: Lambda's DynamoDB Streams poller. One thread per stream mapping of the
  function (read from the Lambda API, re-read when the control plane changes one): each shard
  read from ``LATEST`` (the mappings' starting position), its new records handed over as Lambda
  does (``Records`` with ``eventSourceARN``). A batch whose answer names failures is handed over
  again from the first failed record, with backoff, as Lambda retries a stream (the shard waits).
- ``BucketEvents``: S3's EventBridge notifications and our rule. Every ``interval`` the buckets
  our rules (named ``{prefix}s3-…``) match are listed; an object that is new or changed since
  the last listing is an ``Object Created`` event as EventBridge delivers it. The first listing
  of a bucket is taken when the rule is made (``poke`` on the control plane's PutTargets), so an
  object put after the source was saved is never mistaken for an old one. A failed invocation
  is retried ``S3_ATTEMPTS`` times (EventBridge retries), then logged.

The SQS sources need nothing here: their mappings are SQS mappings, which brokerctl/
event_sources.py polls for the ``sources`` function as for the others.
"""

from __future__ import annotations

import json
import threading
import traceback
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from brokerctl.event_sources import Handler, MappingSupervisor, list_mappings
from brokerctl.lambda_context import LocalLambdaContext
from chalicelib.adapters.aws_clients import AwsClients

STREAM_POLL_SECONDS = 0.5
STREAM_BATCH = 100
RETRY_MAX_SECONDS = 5.0
S3_ATTEMPTS = 3
MAX_KEYS_PER_BUCKET = 10_000  # a listing beyond this is cut (and said): local mode is small


@dataclass(frozen=True)
class _StreamMapping:
    uuid: str
    stream_arn: str
    function_name: str
    batch_size: int
    report_failures: bool


def stream_record(record: dict[str, Any], stream_arn: str, region: str) -> dict[str, Any]:
    """A GetRecords record as Lambda hands it over: times as epoch seconds, the stream's ARN."""
    change = dict(record.get("dynamodb") or {})
    created = change.get("ApproximateCreationDateTime")
    if isinstance(created, datetime):
        change["ApproximateCreationDateTime"] = int(created.timestamp())
    return {
        "eventID": record.get("eventID"),
        "eventName": record.get("eventName"),
        "eventVersion": record.get("eventVersion", "1.1"),
        "eventSource": "aws:dynamodb",
        "awsRegion": record.get("awsRegion", region),
        "dynamodb": change,
        "eventSourceARN": stream_arn,
    }


class _StreamPoller(threading.Thread):
    def __init__(
        self,
        mapping: _StreamMapping,
        streams: Any,
        handler: Handler,
        region: str,
        log: Callable[[str], None],
    ) -> None:
        super().__init__(name=f"ddb-{mapping.uuid[:8]}", daemon=True)
        self.mapping = mapping
        self._streams = streams
        self._handler = handler
        self._region = region
        self._log = log
        self._halt = threading.Event()
        self._iterators: dict[str, str] = {}

    def stop(self) -> None:
        self._halt.set()

    def start_positions(self) -> None:
        """Each shard at LATEST: taken before the thread starts, so nothing written after the
        mapping exists is missed."""
        arn = self.mapping.stream_arn
        shards = self._streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"]
        for shard in shards:
            if shard["ShardId"] not in self._iterators:
                out = self._streams.get_shard_iterator(
                    StreamArn=arn, ShardId=shard["ShardId"], ShardIteratorType="LATEST"
                )
                self._iterators[shard["ShardId"]] = out["ShardIterator"]

    def run(self) -> None:
        while not self._halt.is_set():
            try:
                self.start_positions()  # new shards too
                for shard, iterator in list(self._iterators.items()):
                    self._iterators[shard] = self._read(iterator)
            except Exception as exc:
                self._log(f"stream {self.mapping.stream_arn}: {type(exc).__name__}: {exc}")
            self._halt.wait(STREAM_POLL_SECONDS)

    def _read(self, iterator: str) -> str:
        out = self._streams.get_records(ShardIterator=iterator, Limit=STREAM_BATCH)
        records = [stream_record(r, self.mapping.stream_arn, self._region) for r in out["Records"]]
        for start in range(0, len(records), self.mapping.batch_size):
            self._deliver(records[start : start + self.mapping.batch_size])
        return str(out.get("NextShardIterator") or iterator)

    def _deliver(self, batch: list[dict[str, Any]]) -> None:
        """Until the whole batch is done: Lambda retries a stream's batch from its first failure
        (the shard waits), with backoff; stopping the runtime ends it."""
        pause = STREAM_POLL_SECONDS
        while batch and not self._halt.is_set():
            failed = self._invoke(batch)
            if failed is None:
                return
            numbers = [str((r["dynamodb"] or {}).get("SequenceNumber", "")) for r in batch]
            first = numbers.index(failed) if failed in numbers else 0
            batch = batch[first:]
            self._log(f"{self.mapping.function_name}: {len(batch)} stream records again")
            self._halt.wait(pause)
            pause = min(pause * 2, RETRY_MAX_SECONDS)

    def _invoke(self, batch: list[dict[str, Any]]) -> str | None:
        """None when done, else the first failed sequence number ("" for the whole batch)."""
        context = LocalLambdaContext(self.mapping.function_name)
        try:
            result = self._handler({"Records": batch}, context)
        except Exception:
            self._log(f"{self.mapping.function_name} raised:\n{traceback.format_exc()}")
            return ""
        failures = result.get("batchItemFailures", []) if isinstance(result, dict) else []
        if not failures or not self.mapping.report_failures:
            return None
        return str(failures[0].get("itemIdentifier", ""))


class StreamEventSources(MappingSupervisor):
    """One poller per DynamoDB Streams mapping of ``function_name``."""

    thread_name = "ddb-esm-refresh"

    def __init__(
        self,
        clients: AwsClients,
        function_name: str,
        handler: Handler,
        region: str,
        log: Callable[[str], None],
        refresh_seconds: float = 1.0,
    ) -> None:
        super().__init__(log, refresh_seconds)
        self._clients = clients
        self._function = function_name
        self._handler = handler
        self._region = region
        self._lock = threading.Lock()

    def poke(self, **_: Any) -> None:
        """The control plane changed a mapping (in this process): read them now, in its call,
        so a new mapping's shards are at LATEST before the PUT that made it answers."""
        try:
            self.refresh()
        except Exception as exc:
            self._log(f"{self.thread_name}: {type(exc).__name__}: {exc}")

    def refresh(self) -> None:
        with self._lock:
            super().refresh()

    def wanted(self) -> dict[str, Any]:
        wanted: dict[str, Any] = {}
        for m in list_mappings(self._clients, self._function):
            arn = str(m.get("EventSourceArn", ""))
            if ":dynamodb:" not in arn or "/stream/" not in arn or m.get("State") == "Deleting":
                continue
            wanted[m["UUID"]] = _StreamMapping(
                uuid=m["UUID"],
                stream_arn=arn,
                function_name=self._function,
                batch_size=int(m.get("BatchSize", 100)),
                report_failures="ReportBatchItemFailures" in m.get("FunctionResponseTypes", []),
            )
        return wanted

    def make_poller(self, mapping: Any) -> Any:
        streams = self._clients.client("dynamodbstreams")
        poller = _StreamPoller(mapping, streams, self._handler, self._region, self._log)
        poller.start_positions()
        return poller


class BucketEvents(threading.Thread):
    """S3 → EventBridge → our rules → ``sources``, for the buckets our rules match."""

    def __init__(
        self,
        clients: AwsClients,
        rule_prefix: str,
        handler: Handler,
        function_name: str,
        region: str,
        log: Callable[[str], None],
        interval: float = 1.0,
    ) -> None:
        super().__init__(name="s3-events", daemon=True)
        self._clients = clients
        self._prefix = f"{rule_prefix}s3-"
        self._handler = handler
        self._function = function_name
        self._region = region
        self._log = log
        self._interval = interval
        self._seen: dict[str, dict[str, str]] = {}  # bucket -> key -> etag
        self._lock = threading.Lock()
        self._halt = threading.Event()

    def stop(self) -> None:
        self._halt.set()

    def poke(self, **_: Any) -> None:
        """A rule changed (the control plane's PutTargets, in this process): its bucket's first
        listing is taken now, before the PUT that made it answers."""
        try:
            self.scan(emit=False)
        except Exception as exc:
            self._log(f"s3 events: {type(exc).__name__}: {exc}")

    def run(self) -> None:
        while not self._halt.wait(self._interval):
            try:
                self.scan(emit=True)
            except Exception as exc:
                self._log(f"s3 events: {type(exc).__name__}: {exc}")

    def scan(self, *, emit: bool) -> int:
        """One round: the objects new or changed since the last, as events (``emit``) for the
        buckets already known; a bucket seen for the first time only has its listing taken."""
        sent = 0
        with self._lock:
            buckets = set(self._buckets())
            for gone in set(self._seen) - buckets:
                del self._seen[gone]
            for bucket in sorted(buckets):
                listing = dict(self._objects(bucket))
                before = self._seen.get(bucket)
                self._seen[bucket] = listing
                if before is None or not emit:
                    continue
                for key, etag in sorted(listing.items()):
                    if before.get(key) != etag:
                        sent += self._send(bucket, key, etag)
        return sent

    def _buckets(self) -> Iterator[str]:
        events = self._clients.client("events")
        kwargs: dict[str, Any] = {"NamePrefix": self._prefix}
        while True:
            out = events.list_rules(**kwargs)
            for rule in out.get("Rules", []):
                pattern = json.loads(rule.get("EventPattern") or "{}")
                yield from ((pattern.get("detail") or {}).get("bucket") or {}).get("name", [])
            if not out.get("NextToken"):
                return
            kwargs["NextToken"] = out["NextToken"]

    def _objects(self, bucket: str) -> Iterator[tuple[str, str]]:
        s3 = self._clients.client("s3")
        kwargs: dict[str, Any] = {"Bucket": bucket}
        count = 0
        while True:
            out = s3.list_objects_v2(**kwargs)
            for item in out.get("Contents", []):
                count += 1
                if count > MAX_KEYS_PER_BUCKET:
                    self._log(f"s3 events: {bucket} has over {MAX_KEYS_PER_BUCKET} keys; cut")
                    return
                yield item["Key"], str(item.get("ETag", "")).strip('"')
            if not out.get("IsTruncated"):
                return
            kwargs["ContinuationToken"] = out["NextContinuationToken"]

    def _send(self, bucket: str, key: str, etag: str) -> int:
        event = {
            "version": "0",
            "id": str(uuid.uuid4()),
            "detail-type": "Object Created",
            "source": "aws.s3",
            "account": "123456789012",
            "time": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "region": self._region,
            "resources": [f"arn:aws:s3:::{bucket}"],
            "detail": {
                "version": "0",
                "bucket": {"name": bucket},
                "object": {"key": key, "etag": etag},
                "reason": "PutObject",
            },
        }
        for attempt in range(S3_ATTEMPTS):
            try:
                self._handler(event, LocalLambdaContext(self._function))
                return 1
            except Exception:
                self._log(f"{self._function} raised:\n{traceback.format_exc()}")
                self._halt.wait(0.2 * 2**attempt)
        self._log(f"s3 events: {bucket}/{key} not delivered after {S3_ATTEMPTS} attempts")
        return 0
