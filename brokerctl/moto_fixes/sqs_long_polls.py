"""moto's long poll (``Queue.wait_for_messages``) wakes every second to look for messages whose
visibility ran out; its busy loop of old was https://github.com/getmoto/moto/pull/871. A queue
holding no message at all has none to wait for (a send wakes the poll at once), so there it sleeps
longer: 1,000 idle queues (500 triggers, each with its DLQ) woke the endpoint 1,000 times a
second. A poll may end up to ``IDLE_QUEUE_WAIT_SECONDS`` after its WaitTimeSeconds (clients read
for 30 s)."""

from __future__ import annotations

from typing import Any

# How long a long poll on an empty queue sleeps between checks (moto: 1 s, whatever the queue).
IDLE_QUEUE_WAIT_SECONDS = 5


def quiet_idle_long_polls() -> None:
    from moto.sqs import models

    def wait_for_messages(self: Any, timeout: int) -> None:
        with self._messages_lock:
            if not self._messages:
                timeout = max(timeout, IDLE_QUEUE_WAIT_SECONDS)
            self._messages_lock.wait_for(lambda: self.messages, timeout=timeout)

    models.Queue.wait_for_messages = wait_for_messages  # type: ignore[method-assign]
