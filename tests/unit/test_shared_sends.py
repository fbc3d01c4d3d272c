"""Sends to one queue made while another is in flight share the next SendMessageBatch call."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor

import pytest

from chalicelib.core.errors import UnavailableError
from chalicelib.ports import OutgoingMessage
from chalicelib.services.shared_sends import SharedSends


class GatedQueue:
    """Records each call; the first call to a queue waits until the test opens the gate."""

    def __init__(self, fail: Callable[[OutgoingMessage], bool] = lambda m: False) -> None:
        self.calls: list[tuple[str, list[OutgoingMessage]]] = []
        self.gate = threading.Event()
        self.entered = threading.Event()
        self.error: Exception | None = None
        self._fail = fail

    def send_batch(self, name: str, messages: Sequence[OutgoingMessage]) -> list[str]:
        self.calls.append((name, list(messages)))
        self.entered.set()
        assert self.gate.wait(10), "the test never opened the gate"
        if self.error is not None:
            raise self.error
        return [m.id for m in messages if self._fail(m)]


def _msgs(tag: str, n: int, size: int = 10) -> list[OutgoingMessage]:
    return [OutgoingMessage(str(i), f"{tag}{i}".ljust(size, "x")) for i in range(n)]


def _waiting(sends: SharedSends, name: str, count: int) -> None:
    deadline = time.monotonic() + 10
    while True:
        lane = sends._lanes.get(name)
        if lane is not None and len(lane.waiting) >= count:
            return
        assert time.monotonic() < deadline, "the senders never queued up"
        time.sleep(0.005)


def _in_flight_then(
    sends: SharedSends,
    queue: GatedQueue,
    pool: ThreadPoolExecutor,
    later: list[list[OutgoingMessage]],
) -> tuple[Future[list[str]], list[Future[list[str]]]]:
    first = pool.submit(sends.send_batch, "q", _msgs("first", 1))
    assert queue.entered.wait(10)
    rest = [pool.submit(sends.send_batch, "q", m) for m in later]
    _waiting(sends, "q", len(later))
    queue.gate.set()
    return first, rest


def test_a_lone_send_is_passed_through_unchanged() -> None:
    queue = GatedQueue()
    queue.gate.set()
    messages = _msgs("a", 3)
    assert SharedSends(queue).send_batch("q", messages) == []
    assert queue.calls == [("q", messages)]


def test_sends_made_during_a_call_share_the_next_one_and_get_their_own_failures() -> None:
    queue = GatedQueue(fail=lambda m: m.body.startswith(("b1", "c0")))
    sends = SharedSends(queue)
    with ThreadPoolExecutor(4) as pool:
        first, rest = _in_flight_then(
            sends, queue, pool, [_msgs("b", 2), _msgs("c", 3), _msgs("d", 4)]
        )
        assert first.result(10) == []
        assert [f.result(10) for f in rest] == [["1"], ["0"], []]
    assert [len(m) for _, m in queue.calls] == [1, 9]  # 2 + 3 + 4 in one call
    assert len({m.id for m in queue.calls[1][1]}) == 9  # ids unique within the call
    assert [m.body for m in queue.calls[1][1]][:2] == ["b0".ljust(10, "x"), "b1".ljust(10, "x")]
    assert sends._lanes == {}


def test_a_shared_call_keeps_to_ten_entries_and_the_byte_limit() -> None:
    queue = GatedQueue()
    sends = SharedSends(queue, max_bytes=1000)
    with ThreadPoolExecutor(6) as pool:
        _, rest = _in_flight_then(
            sends, queue, pool,
            [_msgs("b", 6), _msgs("c", 5), _msgs("d", 2, size=400), _msgs("e", 2, size=150)],
        )  # fmt: skip
        for f in rest:
            assert f.result(10) == []
    sizes = [(len(m), sum(len(x.body) for x in m)) for _, m in queue.calls[1:]]
    assert all(n <= 10 and size <= 1000 for n, size in sizes), sizes
    assert sum(n for n, _ in sizes) == 15
    # oldest first, each call as full as the limits allow without passing anyone
    assert [sorted({x.body[0] for x in m}) for _, m in queue.calls[1:]] == [
        ["b"],
        ["c", "d"],
        ["e"],
    ]


def test_the_error_of_a_shared_call_is_raised_to_each_of_its_callers() -> None:
    queue = GatedQueue()
    queue.error = UnavailableError("throttled")
    sends = SharedSends(queue)
    with ThreadPoolExecutor(3) as pool:
        first, rest = _in_flight_then(sends, queue, pool, [_msgs("b", 1), _msgs("c", 1)])
        for f in [first, *rest]:
            with pytest.raises(UnavailableError, match="throttled"):
                f.result(10)
    assert sends._lanes == {}


def test_queues_do_not_wait_on_one_another() -> None:
    queue = GatedQueue()
    sends = SharedSends(queue)
    with ThreadPoolExecutor(2) as pool:
        blocked = pool.submit(sends.send_batch, "slow", _msgs("a", 1))
        assert queue.entered.wait(10)
        other = GatedQueue()
        other.gate.set()
        sends._queues = other  # the next call goes elsewhere: it must not wait for "slow"
        assert sends.send_batch("fast", _msgs("b", 1)) == []
        queue.gate.set()
        assert blocked.result(10) == []
