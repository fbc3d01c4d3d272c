"""What a delivery attempt came to, in the words the archive and the metrics use (design.md §3)."""

from __future__ import annotations

import enum
from typing import NamedTuple

from chalicelib.core.cloudevents.event import CloudEvent


class Outcome(enum.Enum):
    # The values are the archive's outcomes, in the order of the metrics job's schema
    # (spark_glue/schema.py numbers them by position).
    SUCCESS = "delivered"  # delivered; nothing comes back
    RETRY = "retry"  # failed; try again after the backoff
    DEAD_LETTER = "dead_lettered"  # failed for good: to the dead-letter queue, or kept in it
    REPLY = "reply"  # delivered; the answer is an event to ingest into the same broker

    @property
    def metric(self) -> str:
        """The counter an attempt with this outcome adds to (design.md §4)."""
        return "dead_letter_count" if self is Outcome.DEAD_LETTER else "delivery_count"


class Attempt(NamedTuple):  # a tuple: one is built per delivery attempt, cheaply
    """One attempt's answer, whether an HTTP response or a Kafka acknowledgement: all that the
    retry, the dead letter and the archive record read from it."""

    outcome: Outcome
    status: int | None  # the status to record; None: a transport error, a timeout, no ack
    detail: bytes  # the response body, or what went wrong (``knativeerrordata``)
    elapsed_ms: float
    retry_after: str | None = None  # the ``Retry-After`` header
    reply: CloudEvent | None = None
