"""The ``sources`` function (docs/sources.md, IntegrationSource): the records an event source
mapping hands over (an SQS queue's messages, a DynamoDB stream's records) or an S3 object event
EventBridge hands over, each made a CloudEvent (core/integration_records.py) and sent to the sink
of every IntegrationSource on that queue, table or bucket, through the one send path the
schedules' events take (a broker: ingress's own store path with the source's identity; a uri:
POSTed).

A batch answers Lambda's partial batch response (``ReportBatchItemFailures``): a record that
cannot be an event, or whose sink is unavailable, is named alone and comes back (then to the
queue's redrive policy, or the mapping's failure destination); the others are done. A refusal
that a retry cannot cure (a missing broker, an EventPolicy's 403) is counted and logged, not
retried, as for PingSource.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from chalicelib.core import integration_records as records
from chalicelib.core.cloudevents.event import CloudEvent
from chalicelib.core.errors import UnavailableError
from chalicelib.core.resources.integration_source import IntegrationSource
from chalicelib.core.schedules import Sink
from chalicelib.services.metrics import Metrics
from chalicelib.services.resources import Resources

log = logging.getLogger(__name__)
FAILURE_METRIC = "source_failure_count"
# (connector, resource) -> the sources reading it: resource is a queue or bucket ARN, or a table
Lookup = Callable[[str, str], Sequence[IntegrationSource]]
# (sink, sender, event) -> None when sent, else why it never will be; UnavailableError: retry
Send = Callable[[Sink, str | None, CloudEvent], str | None]
_MAPPED = {"aws:sqs": records.SQS, "aws:dynamodb": records.DDB_STREAMS}
_TO_EVENT = {records.SQS: records.sqs_event, records.DDB_STREAMS: records.ddb_streams_event}


class SourceEvents:
    def __init__(self, lookup: Lookup, send: Send, metrics: Metrics) -> None:
        self._lookup = lookup
        self._send = send
        self._metrics = metrics

    def handle(self, event: Any, context: Any = None) -> dict[str, Any]:
        try:
            if isinstance(event, Mapping) and isinstance(event.get("Records"), list):
                return {"batchItemFailures": self._batch(event["Records"])}
            if isinstance(event, Mapping) and event.get("source") == "aws.s3":
                self._s3(event)  # raises UnavailableError: EventBridge retries the event
                return {"sent": True}
            self._failed("unknown", "input", "not a batch of SQS or stream records, nor S3's")
            return {"sent": False, "reason": "not an event of an IntegrationSource's"}
        finally:
            self._metrics.flush()

    def _batch(self, batch: list[Any]) -> list[dict[str, str]]:
        failures: list[dict[str, str]] = []
        for record in batch:
            connector = _MAPPED.get(str(record.get("eventSource"))) if _is_map(record) else None
            if connector is None:
                self._failed("unknown", "input", f"a record of {str(record)[:80]!r}")
                continue  # nothing to name it by: Lambda only hands over its own records
            if not self._record(connector, record):
                failures.append({"itemIdentifier": records.item_identifier(connector, record)})
        return failures

    def _record(self, connector: str, record: Mapping[str, Any]) -> bool:
        """True when done (sent, or refused for good); False when it should come back."""
        resource = _resource(connector, str(record.get("eventSourceARN", "")))
        for source in self._lookup(connector, resource):
            try:
                event = _TO_EVENT[connector](record)
            except records.RecordError as exc:
                self._failed(source.namespace, "record", f"{resource}: {exc}")
                return False
            try:
                self._deliver(source, event)
            except UnavailableError as exc:
                self._failed(source.namespace, "unavailable", f"{event.id}: {exc.detail}")
                return False
        return True

    def _s3(self, event: Mapping[str, Any]) -> None:
        detail = event.get("detail")
        bucket = detail.get("bucket") if isinstance(detail, Mapping) else None
        name = bucket.get("name") if isinstance(bucket, Mapping) else None
        for source in self._lookup(records.S3, f"arn:aws:s3:::{name}"):
            try:
                cloud_event = records.s3_event(event)
            except records.RecordError as exc:
                self._failed(source.namespace, "record", f"{name}: {exc}")
                return
            try:
                self._deliver(source, cloud_event)
            except UnavailableError as exc:
                self._failed(source.namespace, "unavailable", f"{cloud_event.id}: {exc.detail}")
                raise

    def _deliver(self, source: IntegrationSource, event: CloudEvent) -> None:
        reason = self._send(source.target, source.sender, event)
        if reason is not None:
            self._failed(source.namespace, "refused", f"{source.name} {event.id}: {reason}")

    def _failed(self, namespace: str, reason: str, detail: str) -> None:
        self._metrics.count(FAILURE_METRIC, {"namespace": namespace, "reason": reason})
        log.warning("sources: %s (%s)", detail, reason)


def stored_lookup(sources: Resources[IntegrationSource]) -> Lookup:
    """The sources reading a queue, bucket or table, from the store (one read per invocation:
    a source saved a moment ago gets its records at once)."""

    def lookup(connector: str, resource: str) -> list[IntegrationSource]:
        return [
            s.resource
            for s in sources.list()
            if s.resource.aws is not None
            and (s.resource.aws.connector, s.resource.aws.resource) == (connector, resource)
        ]

    return lookup


def _is_map(value: object) -> bool:
    return isinstance(value, Mapping)


def _resource(connector: str, arn: str) -> str:
    """A record's queue ARN, or its stream's table (``...:table/NAME/stream/LABEL``)."""
    if connector == records.DDB_STREAMS:
        _, _, rest = arn.partition(":table/")
        return rest.split("/stream/")[0]
    return arn
