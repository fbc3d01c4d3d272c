"""Emulates Lambda's SQS event source mappings in-process, as Lambda's poller does on AWS:
long-poll each enabled mapping's queue (20 s polls that return as soon as a message arrives, so
an idle queue costs one call per 20 s, not one a second), invoke the registered handler with real
SQS event records, delete what succeeded and leave the ``batchItemFailures`` (and everything, if the
handler raised) for SQS to redeliver after their visibility timeout, so receive counts,
visibility and redrive behave as on AWS. Mappings are re-read from the Lambda API now and then,
and at once when the control plane creates, changes or deletes one, without a restart.

Unlike Lambda, an idle queue is not polled without end: after two empty long polls, with nothing
in flight or delayed, its poller sleeps until a send through this process wakes it (or
``IDLE_POLL_SECONDS`` pass), so a broker with hundreds of quiet triggers leaves the endpoint
alone."""

from __future__ import annotations

import hashlib
import json
import threading
import time
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from brokerctl.lambda_context import LocalLambdaContext
from chalicelib.adapters.aws_clients import AwsClients

Handler = Callable[[dict[str, Any], Any], Any]


@dataclass(frozen=True)
class _Mapping:
    uuid: str
    queue_arn: str
    function_name: str
    batch_size: int
    report_failures: bool


def sqs_record(message: Mapping[str, Any], queue_arn: str, region: str) -> dict[str, Any]:
    body = message["Body"]
    return {
        "messageId": message["MessageId"],
        "receiptHandle": message["ReceiptHandle"],
        "body": body,
        "attributes": dict(message.get("Attributes", {})),
        "messageAttributes": {  # Lambda's shape: {"stringValue": ..., "dataType": ...}
            k: {"stringValue": v.get("StringValue"), "dataType": v.get("DataType")}
            for k, v in message.get("MessageAttributes", {}).items()
        },
        "md5OfBody": message.get("MD5OfBody") or hashlib.md5(body.encode()).hexdigest(),
        "eventSource": "aws:sqs",
        "eventSourceARN": queue_arn,
        "awsRegion": region,
    }


# Lambda's pollers long-poll for up to 20 s, the longest SQS allows; a receive returns as soon as a
# message arrives, so the wait costs no latency, and 500 idle triggers (1,000 queues with their
# DLQs) cost 50 calls a second to the endpoint instead of 1,000.
LONG_POLL_SECONDS = 20
# A FIFO queue (an ordered trigger) is not long-polled: moto takes the set of message groups in
# flight once, when a receive starts, so a long poll would not see a group freed by a delete during
# it and could hold that group's next message back for the whole wait (SQS answers as soon as a
# group is free); and while every visible message is in a busy group, its wait (moto_fixes'
# quiet_idle_long_polls waits for visible messages) returns at once and the poll spins on the
# CPU. Instead an empty receive is followed by a pause of FIFO_PAUSE_SECONDS, doubled after each
# empty receive in a row up to FIFO_MAX_PAUSE_SECONDS (a group waiting out a long backoff costs two
# calls a second), cut short when one of the queue's batches ends (its deletes free groups) or a
# send wakes the poller; two empty polls with nothing pending still put an idle queue to sleep.
FIFO_PAUSE_SECONDS = 0.2
FIFO_MAX_PAUSE_SECONDS = 0.5


# Each poller holds a connection for up to 20 s: the pollers share a client of their own, whose
# pool keeps a connection per poller, apart from the pool the functions' own calls use.
POLLER_POOL_CONNECTIONS = 2048
# Lambda runs several batches of one queue at once (it starts with five pollers per queue and
# scales with the backlog): a subscriber that answers slowly, or times out, holds up one batch,
# not the queue. Here a poller keeps up to this many batches in flight, each on a thread of its
# own, started only when a receive brings messages (an idle queue costs no thread but its poller).
MAX_BATCHES_IN_FLIGHT = 4
# How long stopping waits for the batches a poller is running (a batch's deliveries, archive
# records and deletes): Lambda lets an invocation finish too. Past it, a batch's unfinished
# messages come back once their visibility runs out.
BATCH_DRAIN_SECONDS = 30.0
# A queue is idle after this many empty long polls in a row (40 s) when SQS also counts no message
# in flight (a retry waiting out its backoff) and none delayed. Its poller then sleeps until a send
# to the queue through this process's clients wakes it (ingress, replies, redrive, the local Kafka
# bridge: SqsEventSources.watch_sends), its source queue's poller receives (a redrive to this DLQ
# happens inside such a receive), or IDLE_POLL_SECONDS pass (a message sent by another program).
IDLE_AFTER_EMPTY_POLLS = 2
IDLE_POLL_SECONDS = 300.0
_COUNTS = (
    "ApproximateNumberOfMessages",
    "ApproximateNumberOfMessagesNotVisible",
    "ApproximateNumberOfMessagesDelayed",
)


class _Poller(threading.Thread):
    def __init__(
        self,
        mapping: _Mapping,
        sqs: Any,
        handler: Handler,
        region: str,
        log: Callable[[str], None],
        received: Callable[[str], None] = lambda dlq: None,
    ) -> None:
        super().__init__(name=f"esm-{mapping.uuid[:8]}", daemon=True)
        self.mapping = mapping
        self.queue_name = mapping.queue_arn.rsplit(":", 1)[-1]
        self._sqs = sqs
        self._handler = handler
        self._region = region
        self._log = log
        self._received = received  # told this queue's DLQ name after each receive
        self._dlq: str | None = None
        self._halt = threading.Event()
        self._wake = threading.Event()
        self.sleeping = threading.Event()  # set while idle (not polling)
        self._slots = threading.BoundedSemaphore(MAX_BATCHES_IN_FLIGHT)
        self._batches: set[threading.Thread] = set()
        self._batches_lock = threading.Lock()

    def stop(self) -> None:
        self._halt.set()
        self._wake.set()

    def drain(self, deadline: float) -> None:
        """Wait, until ``deadline`` (monotonic), for the batches this poller is running."""
        with self._batches_lock:
            running = list(self._batches)
        for batch in running:
            batch.join(timeout=max(0.0, deadline - time.monotonic()))

    def wake(self) -> None:
        """A message may have arrived: an idle poller polls again now."""
        self._wake.set()

    def run(self) -> None:
        sqs = self._sqs
        queue_name = self.queue_name
        url: str | None = None
        empty_polls = 0
        fifo = queue_name.endswith(".fifo")
        wait = 0 if fifo else LONG_POLL_SECONDS
        while not self._halt.is_set():
            # A slot before receiving: messages are never held while waiting for a thread.
            while not self._slots.acquire(timeout=0.5):
                if self._halt.is_set():
                    return
            self._wake.clear()  # before the receive: a send during it wakes the sleep after it
            try:
                if url is None:
                    url = sqs.get_queue_url(QueueName=queue_name)["QueueUrl"]
                    self._dlq = self._dead_letter_queue(url)
                out = sqs.receive_message(
                    QueueUrl=url,
                    MaxNumberOfMessages=min(10, self.mapping.batch_size),
                    WaitTimeSeconds=wait,
                    MessageSystemAttributeNames=["All"],
                    MessageAttributeNames=["All"],
                )
            except Exception as exc:  # the queue may be going away with its mapping
                self._slots.release()
                if self._halt.is_set():  # the endpoint may be stopping with us
                    return
                self._log(f"poller {queue_name}: {type(exc).__name__}: {exc}")
                url = None
                self._halt.wait(1.0)
                continue
            if self._dlq is not None:
                self._received(self._dlq)
            messages = out.get("Messages", [])
            if not messages:
                self._slots.release()
                empty_polls += 1
                if empty_polls >= IDLE_AFTER_EMPTY_POLLS and self._nothing_pending(url):
                    self.sleeping.set()
                    self._wake.wait(IDLE_POLL_SECONDS)
                    self.sleeping.clear()
                elif fifo:
                    pause = FIFO_PAUSE_SECONDS * 2 ** min(empty_polls - 1, 8)
                    self._wake.wait(min(pause, FIFO_MAX_PAUSE_SECONDS))
                continue
            empty_polls = 0
            if self._halt.is_set():  # stopping: hand them back, unprocessed
                self._slots.release()
                self._release(sqs, url, messages)
            else:
                batch = threading.Thread(
                    target=self._run_batch, args=(sqs, url, messages), name=f"{self.name}-batch",
                    daemon=True,
                )  # fmt: skip
                with self._batches_lock:
                    self._batches.add(batch)
                batch.start()

    def _dead_letter_queue(self, url: str) -> str | None:
        out = self._sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["RedrivePolicy"])
        policy = out.get("Attributes", {}).get("RedrivePolicy")
        if not policy:
            return None
        return str(json.loads(policy)["deadLetterTargetArn"]).rsplit(":", 1)[-1]

    def _nothing_pending(self, url: str) -> bool:
        """No message waiting, in flight or delayed (the counts are approximate: a message in
        none of them now was sent after this check began, and its send wakes this poller)."""
        try:
            out = self._sqs.get_queue_attributes(QueueUrl=url, AttributeNames=list(_COUNTS))
        except Exception:  # keep polling; the next empty poll asks again
            return False
        counts = out.get("Attributes", {})
        return all(int(counts.get(name, "1")) == 0 for name in _COUNTS)

    def _run_batch(self, sqs: Any, url: str, messages: list[dict[str, Any]]) -> None:
        try:
            self._invoke(sqs, url, messages)
        finally:
            with self._batches_lock:
                self._batches.discard(threading.current_thread())
            self._slots.release()
            if self.queue_name.endswith(".fifo"):
                self._wake.set()  # its deletes may have freed groups: a pausing poller polls now

    def _release(self, sqs: Any, url: str, messages: list[dict[str, Any]]) -> None:
        entries = [
            {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"], "VisibilityTimeout": 0}
            for i, m in enumerate(messages)
        ]
        try:
            sqs.change_message_visibility_batch(QueueUrl=url, Entries=entries)
        except Exception as exc:  # they come back once their visibility runs out
            self._log(f"poller {url}: could not hand back {len(messages)} messages: {exc}")

    def _invoke(self, sqs: Any, url: str, messages: list[dict[str, Any]]) -> None:
        event = {"Records": [sqs_record(m, self.mapping.queue_arn, self._region) for m in messages]}
        failed: set[str]
        try:
            result = self._handler(event, LocalLambdaContext(self.mapping.function_name))
            if self.mapping.report_failures and isinstance(result, dict):
                failed = {f["itemIdentifier"] for f in result.get("batchItemFailures", [])}
            else:
                failed = set()
        except Exception:
            self._log(f"{self.mapping.function_name} raised:\n{traceback.format_exc()}")
            failed = {m["MessageId"] for m in messages}
        done = [m for m in messages if m["MessageId"] not in failed]
        if done:
            try:
                out = sqs.delete_message_batch(
                    QueueUrl=url,
                    Entries=[
                        {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]}
                        for i, m in enumerate(done)
                    ],
                )
                for failed_entry in out.get("Failed", []):  # redelivered later: a duplicate
                    self._log(f"delete after {self.mapping.function_name}: {failed_entry}")
            except Exception as exc:
                self._log(f"delete after {self.mapping.function_name}: {exc}")


class MappingSupervisor:
    """Keeps one poller thread per wanted event source mapping, re-reading the wanted set from
    the Lambda API every ``refresh_seconds``. Subclasses say what is wanted and how to poll it."""

    thread_name = "esm-refresh"
    join_timeout = 5.0

    def __init__(self, log: Callable[[str], None], refresh_seconds: float = 1.0) -> None:
        self._log = log
        self._refresh = refresh_seconds
        self._pollers: dict[str, Any] = {}
        self._halt = threading.Event()
        self._wake = threading.Event()
        self._thread = threading.Thread(target=self._run, name=self.thread_name, daemon=True)

    def wanted(self) -> dict[str, Any]:
        """The mappings to poll, by UUID (each a frozen value: a change restarts its poller)."""
        raise NotImplementedError

    def make_poller(self, mapping: Any) -> Any:
        """A not-yet-started thread with ``.mapping`` and ``.stop()``."""
        raise NotImplementedError

    def start(self) -> None:
        self.refresh()
        self._thread.start()

    def stop(self) -> None:
        self._halt.set()
        self._wake.set()
        for poller in self._pollers.values():
            poller.stop()
        # A poller may sit in a long poll: wait for them all together, not one after the other
        # (they are daemons, and one that wakes after this hands its messages back).
        deadline = time.monotonic() + self.join_timeout
        for poller in self._pollers.values():
            poller.join(timeout=max(0.0, deadline - time.monotonic()))
        if self._thread.is_alive():
            self._thread.join(timeout=5)

    def poke(self, **_: Any) -> None:
        """Re-read the wanted mappings now (the control plane just changed one); usable as a
        botocore event handler."""
        self._wake.set()

    def _run(self) -> None:
        while not self._halt.is_set():
            self._wake.wait(self._refresh)
            self._wake.clear()
            if self._halt.is_set():
                return
            try:
                self.refresh()
            except Exception as exc:
                self._log(f"{self.thread_name}: {type(exc).__name__}: {exc}")

    def refresh(self) -> None:
        wanted = self.wanted()
        for uuid in list(self._pollers):
            if uuid not in wanted or self._pollers[uuid].mapping != wanted[uuid]:
                self._pollers.pop(uuid).stop()
        for uuid, mapping in wanted.items():
            if uuid not in self._pollers and not self._halt.is_set():
                poller = self.make_poller(mapping)
                self._pollers[uuid] = poller
                poller.start()


def list_mappings(clients: AwsClients, function_name: str) -> list[dict[str, Any]]:
    """Every event source mapping of ``function_name``, as Lambda lists them (all pages)."""
    lam = clients.client("lambda")
    found: list[dict[str, Any]] = []
    kwargs: dict[str, Any] = {"FunctionName": function_name}
    while True:
        out = lam.list_event_source_mappings(**kwargs)
        found.extend(out.get("EventSourceMappings", []))
        if not out.get("NextMarker"):
            return found
        kwargs["Marker"] = out["NextMarker"]


class SqsEventSources(MappingSupervisor):
    """Keeps one poller per enabled SQS mapping of the registered functions."""

    def __init__(
        self,
        clients: AwsClients,
        handlers: Mapping[str, Handler],
        region: str,
        log: Callable[[str], None],
        refresh_seconds: float = 1.0,
        *,
        include_disabled: bool = False,
    ) -> None:
        super().__init__(log, refresh_seconds)
        # True against an emulator with pollers of its own (LocalStack): the control plane creates
        # the mappings disabled there (Settings.mappings_enabled), and only these pollers consume.
        self._states = _POLLED_STATES | ({"Disabled", "Disabling"} if include_disabled else set())
        self._clients = clients
        self._handlers = dict(handlers)
        self._region = region
        self._sqs = clients.dedicated(
            "sqs", max_pool_connections=POLLER_POOL_CONNECTIONS, read_timeout=LONG_POLL_SECONDS + 10
        )
        self._by_queue: dict[str, list[_Poller]] = {}

    @property
    def sqs_client(self) -> Any:
        """The pollers' own SQS client (receives and deletes), e.g. to count its calls."""
        return self._sqs

    def refresh(self) -> None:
        super().refresh()
        by_queue: dict[str, list[_Poller]] = {}
        for poller in self._pollers.values():
            by_queue.setdefault(poller.queue_name, []).append(poller)
        self._by_queue = by_queue  # replaced whole: read without a lock by the senders' threads

    def stop(self) -> None:
        super().stop()
        # However long stopping waits for long polls, a batch already running finishes: its
        # archive records and deletes are made while the endpoint still answers.
        deadline = time.monotonic() + BATCH_DRAIN_SECONDS
        for poller in self._pollers.values():
            poller.drain(deadline)

    def wake_queue(self, name: str) -> None:
        """Something was sent to queue ``name``: its idle pollers poll again now."""
        for poller in self._by_queue.get(name, ()):
            poller.wake()

    def watch_sends(self, sqs: Any) -> None:
        """Wake a queue's pollers after each send to it through the boto3 client ``sqs``."""
        for operation in ("SendMessage", "SendMessageBatch"):
            sqs.meta.events.register(f"before-parameter-build.sqs.{operation}", _note_queue)
            sqs.meta.events.register(f"after-call.sqs.{operation}", self._sent)

    def _sent(self, context: dict[str, Any] | None = None, **_: Any) -> None:
        url = (context or {}).get(_QUEUE_URL_KEY)
        if url:
            self.wake_queue(str(url).rsplit("/", 1)[-1])

    def wanted(self) -> dict[str, Any]:
        wanted: dict[str, Any] = {}
        for function_name in self._handlers:
            for m in list_mappings(self._clients, function_name):
                arn = m.get("EventSourceArn", "")
                if not arn.startswith("arn:aws:sqs:"):
                    continue
                if m.get("State", "Enabled") not in self._states:
                    continue
                wanted[m["UUID"]] = _Mapping(
                    uuid=m["UUID"],
                    queue_arn=arn,
                    function_name=function_name,
                    batch_size=int(m.get("BatchSize", 10)),
                    report_failures="ReportBatchItemFailures" in m.get("FunctionResponseTypes", []),
                )
        return wanted

    def make_poller(self, mapping: Any) -> Any:
        handler = self._handlers[mapping.function_name]
        return _Poller(
            mapping, self._sqs, handler, self._region, self._log, received=self.wake_queue
        )


_POLLED_STATES = frozenset({"Enabled", "Enabling", "Creating"})
_QUEUE_URL_KEY = "brokerctl_queue_url"


def _note_queue(params: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
    """Keep a send's queue URL in its request context, where its after-call event finds it."""
    context[_QUEUE_URL_KEY] = params.get("QueueUrl")
