"""Dead-letter operations on a trigger's DLQ: list without consuming, redrive, purge."""

from __future__ import annotations

import builtins
import json
from typing import Any

from chalicelib.core import codec, names
from chalicelib.core.errors import NotFoundError, Problem, ValidationError
from chalicelib.core.message import decode_message
from chalicelib.ports import OutgoingMessage, Queues, ReceivedMessage
from chalicelib.services.claims import Claims

ERROR_EXTENSIONS = ("knativeerrordest", "knativeerrorcode", "knativeerrordata")
PEEK_VISIBILITY = 30
MAX_LIST = 1000


class DeadLetters:
    def __init__(self, queues: Queues, claims: Claims, queue_prefix: str) -> None:
        self._queues = queues
        self._claims = claims
        self._prefix = queue_prefix

    def _names(self, namespace: str, broker: str, trigger: str) -> tuple[str, str]:
        queue = names.queue_name(self._prefix, namespace, broker, trigger)
        dlq = names.dlq_name(self._prefix, namespace, broker, trigger)
        if self._queues.get(dlq) is None:
            raise NotFoundError(
                f'trigger "{namespace}/{trigger}" has no dead-letter queue (is its broker ready?)'
            )
        return queue, dlq

    def list(self, namespace: str, broker: str, trigger: str, limit: int) -> dict[str, Any]:
        if not 1 <= limit <= MAX_LIST:
            raise ValidationError([Problem("limit", f"must be between 1 and {MAX_LIST}")])
        _, dlq = self._names(namespace, broker, trigger)
        seen = self._peek(dlq, limit)
        items = []
        try:
            for m in seen:
                items.append(self._describe(m))
        finally:
            for m in seen:  # make them visible again: listing does not consume
                self._queues.change_visibility(dlq, m.receipt_handle, 0)
        return {"items": items, "count": len(items), "depth": self._queues.depth(dlq)}

    def redrive(self, namespace: str, broker: str, trigger: str) -> dict[str, Any]:
        queue, dlq = self._names(namespace, broker, trigger)
        moved = 0
        while True:
            batch = self._queues.receive(dlq, 10, 0, PEEK_VISIBILITY)
            if not batch:
                break
            bodies = [self._without_errors(m.body) for m in batch]
            failed = set(
                self._queues.send_batch(
                    queue, [OutgoingMessage(str(i), b) for i, b in enumerate(bodies)]
                )
            )
            for i, m in enumerate(batch):
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

    def _describe(self, m: ReceivedMessage) -> dict[str, Any]:
        try:
            queued = decode_message(m.body)
            event = self._claims.load(queued)
        except (ValidationError, NotFoundError, ValueError) as exc:
            return {"messageId": m.message_id, "unreadable": str(exc)}
        return {
            "messageId": m.message_id,
            "receiveCount": int(m.attributes.get("ApproximateReceiveCount", "1")),
            "event": codec.to_json(event),
        }

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
