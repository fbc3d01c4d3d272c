"""The SQS message body for an event: inline when it fits, else a claim check on S3 (events over
SQS's 256 KiB, up to the broker's limit). The blob is the event in the JSON format."""

from __future__ import annotations

import uuid
from collections.abc import Mapping

from chalicelib.core.cloudevents.event import CloudEvent
from chalicelib.core.cloudevents.sqs_message import (
    ClaimCheck,
    QueuedEvent,
    decode_event_blob,
    encode_event_blob,
    encode_message,
)
from chalicelib.ports import Blobs

SQS_MAX_BYTES = 256 * 1024
INLINE_LIMIT = SQS_MAX_BYTES - 1024  # room for the batch entry's own overhead


class Claims:
    def __init__(self, blobs: Blobs, bucket: str, prefix: str) -> None:
        self._blobs = blobs
        self._bucket = bucket
        self._prefix = prefix

    def message_body(
        self,
        namespace: str,
        broker: str,
        trigger: str,
        event: CloudEvent,
        headers: Mapping[str, str],
        claimed: dict[int, ClaimCheck] | None = None,
    ) -> str:
        """Encode inline, or store the event once (``claimed`` remembers it per event object
        across the triggers of one fan-out) and encode the claim check."""
        body = encode_message(QueuedEvent(namespace, broker, trigger, event, None, headers))
        if len(body.encode()) <= INLINE_LIMIT:
            return body
        claim = claimed.get(id(event)) if claimed is not None else None
        if claim is None:
            claim = self.store(namespace, broker, event)
            if claimed is not None:
                claimed[id(event)] = claim
        return encode_message(QueuedEvent(namespace, broker, trigger, None, claim, headers))

    def store(self, namespace: str, broker: str, event: CloudEvent) -> ClaimCheck:
        data = encode_event_blob(event)
        key = f"{self._prefix}{namespace}/{broker}/{uuid.uuid4()}.json"
        self._blobs.put(self._bucket, key, data)
        return ClaimCheck(bucket=self._bucket, key=key, size=len(data))

    def load(self, queued: QueuedEvent) -> CloudEvent:
        if queued.event is not None:
            return queued.event
        if queued.claim is None:
            raise ValueError("a queued event has either an event or a claim check")
        raw = self._blobs.get(queued.claim.bucket, queued.claim.key)
        return decode_event_blob(raw)
