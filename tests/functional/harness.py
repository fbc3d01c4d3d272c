"""A Container whose ports are the in-memory fakes, with helpers to play the event sources."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from chalicelib import http_ingress
from chalicelib.config import Settings
from chalicelib.container import Container
from chalicelib.core import names
from chalicelib.ports import HttpResponse
from chalicelib.services.schedules import Scheduling
from tests.fakes import (
    ACCOUNT,
    REGION,
    MemoryArchive,
    MemoryBlobs,
    MemoryMappings,
    MemoryQueues,
    MemoryRateLimiter,
    MemorySeenEvents,
    MemoryStore,
    ScriptedSender,
)
from tests.fakes.kafka_offsets import MemoryKafkaOffsets
from tests.fakes.schedules import MemorySchedules

CP = "/apis/eventing.knative.dev/v1/namespaces"


@dataclass(frozen=True)
class Answer:
    status: int
    headers: dict[str, str]
    body: bytes


class Harness:
    def __init__(self, *answers: HttpResponse, settings: Settings | None = None) -> None:
        self.settings = settings or replace(Settings(), cache_ttl_seconds=0.0, local_mode=True)
        c = Container(self.settings)
        self.store = MemoryStore()
        self.queues = MemoryQueues()
        self.mappings = MemoryMappings()
        self.blobs = MemoryBlobs()
        self.archive = MemoryArchive()
        self.sender = ScriptedSender(*answers)
        self.seen = MemorySeenEvents()
        self.rate = MemoryRateLimiter()
        # cached_property values can be set on the instance: the fakes replace the adapters.
        c.store = self.store  # type: ignore[misc]
        c.queues = self.queues  # type: ignore[misc]
        c.mappings = self.mappings  # type: ignore[misc]
        c.blobs = self.blobs  # type: ignore[misc]
        c.blob_listing = self.blobs  # type: ignore[misc]
        c.archive = self.archive  # type: ignore[misc]
        c.sender = self.sender  # type: ignore[misc]
        c.seen_events = self.seen  # type: ignore[misc]
        c.rate_limiter = self.rate  # type: ignore[misc]
        self.kafka_offsets = MemoryKafkaOffsets()
        c.kafka_offsets = self.kafka_offsets  # type: ignore[misc]
        self.schedules = MemorySchedules()  # the sources' schedules (docs/sources.md)
        c.scheduling = Scheduling(  # type: ignore[misc]
            self.schedules, self.settings.queue_prefix, seconds=self.settings.local_mode
        )
        self.container = c

    # ---- control plane shortcuts ----------------------------------------------------------------

    def broker(self, ns: str = "ns", name: str = "default", **spec: Any) -> dict[str, Any]:
        body: dict[str, Any] = {"metadata": {"name": name}}
        annotations = spec.pop("annotations", None)
        if annotations:
            body["metadata"]["annotations"] = annotations
        if spec:
            body["spec"] = spec
        doc, _ = self.container.brokers.put(ns, name, body)
        return doc

    def trigger(
        self,
        name: str,
        ns: str = "ns",
        broker: str = "default",
        uri: str = "http://sub.example/",
        filter: dict[str, str] | None = None,
        **spec: Any,
    ) -> dict[str, Any]:
        body = {
            "metadata": {"name": name},
            "spec": {"broker": broker, "subscriber": {"uri": uri}, **spec},
        }
        if filter is not None:
            body["spec"]["filter"] = {"attributes": filter}
        doc, _ = self.container.triggers.put(ns, name, body)
        return doc

    def queue_of(self, trigger: str, ns: str = "ns", broker: str = "default") -> str:
        return names.queue_name(self.settings.queue_prefix, ns, broker, trigger)

    def dlq_of(self, trigger: str, ns: str = "ns", broker: str = "default") -> str:
        return names.dlq_name(self.settings.queue_prefix, ns, broker, trigger)

    # ---- data plane -----------------------------------------------------------------------------

    def post(
        self, headers: dict[str, str], body: bytes, ns: str = "ns", broker: str = "default"
    ) -> Answer:
        return self.request("POST", headers, body, ns, broker)

    def request(
        self,
        method: str,
        headers: dict[str, str],
        body: bytes,
        ns: str = "ns",
        broker: str = "default",
    ) -> Answer:
        """What the ingress route answers, through the same adapter as the app."""
        response = http_ingress.answer(self.container.ingress, method, ns, broker, headers, body)
        body_text = response.body if isinstance(response.body, str) else ""
        out = {str(k): str(v) for k, v in response.headers.items()}
        return Answer(response.status_code, out, body_text.encode())

    def send(self, type_: str = "t", id_: str = "1", data: bytes = b"hi", **ext: str) -> Answer:
        headers = {
            "ce-specversion": "1.0",
            "ce-id": id_,
            "ce-source": "/src",
            "ce-type": type_,
            "content-type": "text/plain",
        }
        headers.update({f"ce-{k}": v for k, v in ext.items()})
        return self.post(headers, data)

    def deliver_once(self, trigger: str, *, dead_letter: bool = False) -> dict[str, Any]:
        """Play Lambda's poller once on the trigger's queue (or DLQ): receive a batch, invoke the
        function with real SQS records, delete what succeeded. Returns the handler's answer."""
        queue = self.dlq_of(trigger) if dead_letter else self.queue_of(trigger)
        event = self.sqs_event(queue)
        service = self.container.dead_letter if dead_letter else self.container.delivery
        answer = service.handle_sqs_event(event, None)
        failed = {f["itemIdentifier"] for f in answer.get("batchItemFailures", [])}
        for r in event["Records"]:
            if r["messageId"] not in failed:
                self.queues.delete_message(queue, r["receiptHandle"])
        answer["received"] = len(event["Records"])
        return answer

    def sqs_event(self, queue: str, batch_size: int = 10) -> dict[str, Any]:
        """The event Lambda's SQS poller invokes a function with: one batch received from
        ``queue`` (the messages stay in flight until deleted)."""
        received = self.queues.receive(queue, batch_size, 0, None)
        arn = f"arn:aws:sqs:{REGION}:{ACCOUNT}:{queue}"
        return {
            "Records": [
                {
                    "messageId": m.message_id,
                    "receiptHandle": m.receipt_handle,
                    "body": m.body,
                    "attributes": dict(m.attributes),
                    "messageAttributes": {  # Lambda's record shape
                        k: {"stringValue": v, "dataType": "String"}
                        for k, v in m.message_attributes.items()
                    },
                    "md5OfBody": "",
                    "eventSource": "aws:sqs",
                    "eventSourceARN": arn,
                    "awsRegion": REGION,
                }
                for m in received
            ]
        }

    def deliver_until_empty(self, queue: str, idle: Callable[[], None], rounds: int) -> None:
        """Play Lambda's poller on ``queue`` in batches of 10 until it is empty (at most
        ``rounds`` receives); ``idle`` runs when nothing is visible (e.g. let a backoff pass)."""
        for _ in range(rounds):
            if self.queues.depth(queue) == 0:
                return
            event = self.sqs_event(queue, batch_size=10)
            if not event["Records"]:
                idle()
                continue
            answer = self.container.delivery.handle_sqs_event(event, None)
            failed = {f["itemIdentifier"] for f in answer.get("batchItemFailures", [])}
            for r in event["Records"]:
                if r["messageId"] not in failed:
                    self.queues.delete_message(queue, r["receiptHandle"])

    def make_visible(self, trigger: str, *, dead_letter: bool = False) -> None:
        """Skip the backoff: what SQS does when the visibility timeout runs out."""
        queue = self.dlq_of(trigger) if dead_letter else self.queue_of(trigger)
        for m in self.queues._q(queue)["messages"]:
            m.visible_at = 0

    def messages(self, queue: str) -> list[dict[str, Any]]:
        return [json.loads(m.body) for m in self.queues._q(queue)["messages"]]


def call(client: Any, method: str, path: str, body: Any = None) -> Any:
    """A control-plane request through chalice's test client (``client``), the body JSON (or
    bytes as they are)."""
    kwargs: dict[str, Any] = {"headers": {"content-type": "application/json"}}
    if body is not None:
        kwargs["body"] = body if isinstance(body, bytes) else json.dumps(body)
    return getattr(client.http, method)(path, **kwargs)
