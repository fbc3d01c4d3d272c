"""Concurrent sends to one queue share SendMessageBatch calls (a group commit).

A request that finds no send in flight to its queue sends at once, alone. Requests that arrive
while one is in flight wait for it, then go together in the next call, up to SQS's batch limits
(10 entries, 256 KiB), oldest first. Nothing ever waits for company: a lone request (a Lambda
container serves one at a time) costs what it did, and under concurrent requests (local mode's
threaded server, a Kafka batch) the AWS calls per event fall. Each caller gets back the ids of
its own entries that failed, or the error of the call that carried them.
"""

from __future__ import annotations

import builtins
import threading
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from chalicelib.ports import OutgoingMessage, QueueSender
from chalicelib.services.claims import SQS_MAX_BYTES

MAX_ENTRIES = 10


@dataclass
class _Send:
    messages: Sequence[OutgoingMessage]
    size: int
    failed: builtins.list[str] = field(default_factory=list)
    error: BaseException | None = None
    done: bool = False


class _Lane:
    """The sends waiting for one queue, and whether a call to it is in flight."""

    def __init__(self, lock: threading.Lock) -> None:
        self.waiting: deque[_Send] = deque()
        self.busy = False
        self.changed = threading.Condition(lock)


class SharedSends:
    def __init__(
        self,
        queues: QueueSender,
        max_entries: int = MAX_ENTRIES,
        max_bytes: int = SQS_MAX_BYTES,
    ) -> None:
        self._queues = queues
        self._max_entries = max_entries
        self._max_bytes = max_bytes
        self._lock = threading.Lock()
        self._lanes: dict[str, _Lane] = {}  # only queues with a send waiting or in flight

    def send_batch(self, name: str, messages: Sequence[OutgoingMessage]) -> builtins.list[str]:
        mine = _Send(list(messages), sum(len(m.body.encode()) for m in messages))
        with self._lock:
            lane = self._lanes.get(name)
            if lane is None:
                lane = self._lanes[name] = _Lane(self._lock)
            lane.waiting.append(mine)
            while not mine.done:
                if lane.busy:
                    lane.changed.wait()
                    continue
                lane.busy = True  # this thread carries the oldest waiting sends, maybe not its own
                batch = self._take(lane)
                self._lock.release()
                try:
                    self._carry(name, batch)
                finally:
                    self._lock.acquire()
                    for send in batch:
                        send.done = True
                    lane.busy = False
                    if not lane.waiting:  # every caller on this lane is answered
                        del self._lanes[name]
                    lane.changed.notify_all()
        if mine.error is not None:
            raise mine.error
        return mine.failed

    def _take(self, lane: _Lane) -> list[_Send]:
        batch = [lane.waiting.popleft()]
        entries, size = len(batch[0].messages), batch[0].size
        while lane.waiting:
            nxt = lane.waiting[0]
            if entries + len(nxt.messages) > self._max_entries or size + nxt.size > self._max_bytes:
                break
            batch.append(lane.waiting.popleft())
            entries += len(nxt.messages)
            size += nxt.size
        return batch

    def _carry(self, name: str, batch: list[_Send]) -> None:
        if len(batch) == 1:
            only = batch[0]
            try:
                only.failed = self._queues.send_batch(name, only.messages)
            except BaseException as exc:  # handed to the caller, raised in its own thread
                only.error = exc
            return
        owner: dict[str, tuple[_Send, str]] = {}
        entries: list[OutgoingMessage] = []
        for k, send in enumerate(batch):
            for m in send.messages:
                entry_id = f"{k}-{m.id}"
                owner[entry_id] = (send, m.id)
                entries.append(replace(m, id=entry_id))
        try:
            failed = self._queues.send_batch(name, entries)
        except BaseException as exc:  # handed to every caller, raised in its own thread
            for send in batch:
                send.error = exc
            return
        for entry_id in failed:
            send, own_id = owner[entry_id]
            send.failed.append(own_id)
