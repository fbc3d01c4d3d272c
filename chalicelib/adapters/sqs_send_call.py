"""SendMessageBatch without botocore's request pipeline (adapters/json_call.py): every enqueue
(ingress, delivery's send-backs, redrive, replays) is this call, and botocore spends more CPU on
it than on anything else the broker does (about 2.9 ms for ten 50 KB messages, 1.1 ms of it in
the stdlib's ``json``). ``Settings.sqs_direct_send`` (``BROKER_SQS_DIRECT_SEND=false``) turns it
off.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from chalicelib.adapters.json_call import MAX_ATTEMPTS, JsonCall, built, encode_body, usable

__all__ = ["MAX_ATTEMPTS", "OPERATION", "SendMessageBatchCall", "encode_body"]

OPERATION = "SendMessageBatch"


class SendMessageBatchCall(JsonCall):
    """``send_message_batch(queue_url, entries)``: the answer (``Successful``, ``Failed``) as
    boto3's client gives it, or its exception."""

    def __init__(
        self,
        client: Any,
        credentials: Any,
        http_session: Any,
        max_attempts: int = MAX_ATTEMPTS,
        sleep: Callable[[float], None] | None = None,
        rand: Callable[[], float] | None = None,
    ) -> None:
        extra: dict[str, Any] = {}
        if sleep is not None:
            extra["sleep"] = sleep
        if rand is not None:
            extra["rand"] = rand
        super().__init__(client, credentials, http_session, OPERATION, max_attempts, **extra)

    @classmethod
    def for_client(  # type: ignore[override]
        cls, client: Any, credentials: Any
    ) -> SendMessageBatchCall | None:
        found = usable(client, OPERATION)
        if found is None:
            return None
        http, attempts = found
        return built(lambda: cls(client, credentials, http, max_attempts=attempts))

    def send_message_batch(self, queue_url: str, entries: Sequence[Mapping[str, Any]]) -> Any:
        """As ``client.send_message_batch(QueueUrl=..., Entries=...)``."""
        return self.call({"QueueUrl": queue_url, "Entries": list(entries)})
