"""moto's SQS queue appends a sent message under the queue's lock, but ``Queue.delete_message``
rebuilds the message list without it: two deletes at once (two batches of one queue finishing
together) could undo one another, and a delete racing a send could drop the new message. No moto
issue is filed. Deletes take the same lock."""

from __future__ import annotations

from typing import Any


def lock_deletes() -> None:
    from moto.sqs import models

    delete = models.Queue.delete_message

    def delete_message(self: Any, receipt_handle: str) -> None:
        with self._messages_lock:
            delete(self, receipt_handle)

    models.Queue.delete_message = delete_message  # type: ignore[method-assign]
