"""The claim check: what is too large for SQS (256 KiB) is stored on S3 and travels by reference.
One place writes and reads those objects, for events and for Kafka ingress's failure records."""

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


def address(claim: ClaimCheck) -> str:
    """The ``s3://`` address of a claimed object (the archive's ``dataref``)."""
    return f"s3://{claim.bucket}/{claim.key}"


# Where the archive keeps the whole of each event it archives by reference (docs/replay.md): in
# the archive bucket, whose lifecycle keeps objects as long as archive records (claims/ expire
# after ClaimRetentionDays, as queued messages do).
ARCHIVED_PREFIX = "archive-payloads/"


# The key prefix of claim-checked events in the claim bucket: the one the functions' policies may
# write and read, and the template's lifecycle rule expires (infra/template.yaml).
CLAIM_PREFIX = "claims/"


class Claims:
    def __init__(self, blobs: Blobs, bucket: str, archive_bucket: str | None = None) -> None:
        self._blobs = blobs
        self._bucket = bucket
        self._archive_bucket = archive_bucket

    def message_body(
        self,
        namespace: str,
        broker: str,
        trigger: str,
        event: CloudEvent,
        headers: Mapping[str, str],
        claimed: dict[int, ClaimCheck] | None = None,
    ) -> str:
        """The SQS message for an event: inline when it fits, else its claim check."""
        body = encode_message(QueuedEvent(namespace, broker, trigger, event, None, headers))
        if len(body.encode()) <= INLINE_LIMIT:
            return body
        claim = self.claim(namespace, broker, event, claimed)
        return encode_message(QueuedEvent(namespace, broker, trigger, None, claim, headers))

    def claim(
        self,
        namespace: str,
        broker: str,
        event: CloudEvent,
        claimed: dict[int, ClaimCheck] | None = None,
    ) -> ClaimCheck:
        """Store the event in the JSON format, once per event object when ``claimed`` remembers
        them (the triggers of one fan-out, and its archive record, share one object)."""
        claim = claimed.get(id(event)) if claimed is not None else None
        if claim is None:
            claim = self.put(f"{namespace}/{broker}/{uuid.uuid4()}.json", encode_event_blob(event))
            if claimed is not None:
                claimed[id(event)] = claim
        return claim

    def archived(
        self, namespace: str, broker: str, event: CloudEvent, claimed: dict[int, ClaimCheck]
    ) -> ClaimCheck:
        """The copy of a large event its archive record refers to (``dataref``): kept as long as
        the archive when an archive bucket is set; else the queue's claim (which expires)."""
        if self._archive_bucket is None:
            return self.claim(namespace, broker, event, claimed)
        key = f"{ARCHIVED_PREFIX}{namespace}/{broker}/{uuid.uuid4()}.json"
        data = encode_event_blob(event)
        self._blobs.put(self._archive_bucket, key, data)
        return ClaimCheck(bucket=self._archive_bucket, key=key, size=len(data))

    def put(self, path: str, data: bytes) -> ClaimCheck:
        """Store ``data`` under the claim prefix."""
        key = f"{CLAIM_PREFIX}{path}"
        self._blobs.put(self._bucket, key, data)
        return ClaimCheck(bucket=self._bucket, key=key, size=len(data))

    def load(self, queued: QueuedEvent) -> CloudEvent:
        if queued.event is not None:
            return queued.event
        if queued.claim is None:
            raise ValueError("a queued event has either an event or a claim check")
        raw = self._blobs.get(queued.claim.bucket, queued.claim.key)
        return decode_event_blob(raw)
