"""Dead-letter operations on a trigger's DLQ: list without consuming, redrive, purge."""

from __future__ import annotations

import builtins
import json
import time
from collections.abc import Callable
from operator import attrgetter
from typing import Any

from chalicelib.core import names
from chalicelib.core.cloudevents import codec
from chalicelib.core.cloudevents.sqs_message import call_chunks, decode_messages
from chalicelib.core.delivery import ordering
from chalicelib.core.errors import NotFoundError, Problem, ValidationError
from chalicelib.ports import OutgoingMessage, Queues, ReceivedMessage
from chalicelib.services.claims import Claims

ERROR_EXTENSIONS = ("knativeerrordest", "knativeerrorcode", "knativeerrordata")
PEEK_VISIBILITY = 30
MAX_LIST = 1000
# A redrive answers within API Gateway's 29 s integration timeout; what is left is reported.
REDRIVE_SECONDS = 20.0


class DeadLetters:
    def __init__(
        self,
        queues: Queues,
        claims: Claims,
        queue_prefix: str,
        clock: Callable[[], float] = time.monotonic,
        redrive_seconds: float = REDRIVE_SECONDS,
    ) -> None:
        self._queues = queues
        self._claims = claims
        self._prefix = queue_prefix
        self._clock = clock
        self._redrive_seconds = redrive_seconds

    def _names(self, namespace: str, broker: str, trigger: str) -> tuple[str, str]:
        """The trigger's queue and DLQ: standard ones, or FIFO ones for an ordered trigger
        (whichever exist: the queues say which, without reading the trigger)."""
        for fifo in (False, True):
            queue = names.queue_name(self._prefix, namespace, broker, trigger, fifo=fifo)
            dlq = names.dlq_name(self._prefix, namespace, broker, trigger, fifo=fifo)
            if self._queues.get(dlq) is not None:
                return queue, dlq
        raise NotFoundError(
            f'trigger "{namespace}/{trigger}" has no dead-letter queue (is its broker ready?)'
        )

    def list(self, namespace: str, broker: str, trigger: str, limit: int) -> dict[str, Any]:
        if not 1 <= limit <= MAX_LIST:
            raise ValidationError([Problem("limit", f"must be between 1 and {MAX_LIST}")])
        _, dlq = self._names(namespace, broker, trigger)
        seen = self._peek(dlq, limit)
        items: builtins.list[dict[str, Any]] = []
        try:
            for m in seen:
                items.extend(self._describe(m))
        finally:
            for m in seen:  # make them visible again: listing does not consume
                self._queues.change_visibility(dlq, m.receipt_handle, 0)
        items = items[:limit]  # a pack (docs/replay.md) lists each of its events
        return {"items": items, "count": len(items), "depth": self._queues.depth(dlq)}

    def redrive(self, namespace: str, broker: str, trigger: str) -> dict[str, Any]:
        """Moves the messages present when it starts, once: messages that fail again and come
        back to the DLQ while it runs are not moved a second time (the old loop could spin until
        the API timed out), and it stops at a deadline, reporting what remains."""
        queue, dlq = self._names(namespace, broker, trigger)
        budget = self._queues.depth(dlq)
        deadline = self._clock() + self._redrive_seconds
        moved = 0
        seen: set[str] = set()
        while moved < budget and self._clock() < deadline:
            received = self._queues.receive(dlq, min(10, budget - moved), 0, PEEK_VISIBILITY)
            batch = [m for m in received if m.message_id not in seen]
            for m in received:
                if m.message_id in seen:  # back again already: leave it for the next redrive
                    self._queues.change_visibility(dlq, m.receipt_handle, 0)
            if not batch:
                break
            bodies = [self._without_errors(m.body) for m in batch]
            fifo = names.is_fifo(queue)
            outgoing = [
                OutgoingMessage(
                    str(i),
                    b,
                    # FIFO: back into its own group (the DLQ kept it), in the DLQ's order
                    group_id=ordering.group_of(m.attributes) if fifo else None,
                    dedup_id=ordering.moved_dedup_id(m.message_id) if fifo else None,
                )
                for i, (m, b) in enumerate(zip(batch, bodies, strict=True))
            ]
            failed: set[str] = set()
            for chunk in call_chunks(
                outgoing, attrgetter("body")
            ):  # ten events of 200 KiB: several calls
                if failed:  # after a failed entry the rest waits for the next redrive (in order)
                    failed.update(m.id for m in chunk)
                    continue
                failed.update(self._queues.send_batch(queue, chunk))
            for i, m in enumerate(batch):
                seen.add(m.message_id)
                if str(i) in failed:
                    self._queues.change_visibility(dlq, m.receipt_handle, 0)
                else:
                    self._queues.delete_message(dlq, m.receipt_handle)
                    moved += 1
            if failed:
                break
        return {"redriven": moved, "remaining": self._queues.depth(dlq)}

    def purge(self, namespace: str, broker: str, trigger: str) -> dict[str, Any]:
        _, dlq = self._names(namespace, broker, trigger)
        depth = self._queues.depth(dlq)
        self._queues.purge(dlq)
        return {"purged": depth}

    def _peek(self, dlq: str, limit: int) -> builtins.list[ReceivedMessage]:
        seen: dict[str, ReceivedMessage] = {}
        while len(seen) < limit:
            batch = self._queues.receive(dlq, min(10, limit - len(seen)), 0, PEEK_VISIBILITY)
            if not batch:
                break
            for m in batch:
                seen.setdefault(m.message_id, m)
        return list(seen.values())

    def _describe(self, m: ReceivedMessage) -> builtins.list[dict[str, Any]]:
        """One item per event: a message's, or each of a pack's (with ``packIndex``)."""
        try:
            entries, packed = decode_messages(m.body)
            events = [self._claims.load(queued) for queued in entries]
        except (ValidationError, NotFoundError, ValueError) as exc:
            return [{"messageId": m.message_id, "unreadable": str(exc)}]
        receives = int(m.attributes.get("ApproximateReceiveCount", "1"))
        items = []
        for i, event in enumerate(events):
            item = {"messageId": m.message_id, "receiveCount": receives}
            if packed:
                item["packIndex"] = i
            item["event"] = codec.to_json(event)
            items.append(item)
        return items

    def _without_errors(self, body: str) -> str:
        """The original event again: the error extensions describe the failed delivery."""
        try:
            doc = json.loads(body)
        except ValueError:
            return body
        event = doc.get("event") if isinstance(doc, dict) else None
        if isinstance(event, dict):
            for name in ERROR_EXTENSIONS:
                event.pop(name, None)
            return json.dumps(doc, separators=(",", ":"))
        return body
