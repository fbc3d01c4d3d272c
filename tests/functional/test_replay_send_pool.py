"""The replay's sender processes (adapters/sqs_send_pool.py) against a real moto server: calls
made by another process, a worker killed mid-call (no checkpoint past it, the batch sent again,
nothing lost), the dead worker replaced, and a clean stop that leaves no child process."""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from chalicelib.adapters.sqs_queues import SqsQueues
from chalicelib.adapters.sqs_send_pool import SqsSendPool
from chalicelib.container import Container
from chalicelib.core.cloudevents.sqs_message import SQS_MAX_BATCH_BYTES
from chalicelib.core.errors import CallTooLargeError, NotFoundError, UnavailableError
from chalicelib.core.resources.replay import REPLAYS
from chalicelib.ports import OutgoingMessage
from chalicelib.services.ingress import Ingress, send_in_batches
from chalicelib.services.replays import ReplayRunner, RunnerOptions
from chalicelib.services.resources import Resources
from chalicelib.services.routing import load_broker_config
from tests.functional.harness import Harness
from tests.functional.replay_support import flush_archive, harness, put_replay, window


def _pool_children() -> list[multiprocessing.process.BaseProcess]:
    return [p for p in multiprocessing.active_children() if p.name == "sqs-send"]


@pytest.fixture
def pool(aws_settings: Any) -> Iterator[SqsSendPool]:
    made = SqsSendPool(aws_settings, 1)
    yield made
    made.stop()
    assert not _pool_children()


def _queue(aws_clients: Any, name: str | None = None) -> tuple[SqsQueues, str]:
    queues = SqsQueues(aws_clients)
    name = name or f"pool-{uuid.uuid4().hex[:8]}"
    queues.create(name, {})
    return queues, name


def _bodies(queues: SqsQueues, name: str) -> list[str]:
    out = []
    while True:
        got = queues.receive(name, 10, 0, 30)
        if not got:
            return out
        for m in got:
            out.append(m.body)
            queues.delete_message(name, m.receipt_handle)


def _stop_and_kill_mid_call(pool: SqsSendPool) -> None:
    """Freeze the workers (a call sent to one cannot be answered), and kill them once a call is
    in flight: as a worker that dies during its call."""
    pool.start()
    pids = [pid for pid in pool.pids() if pid is not None]
    for pid in pids:
        os.kill(pid, signal.SIGSTOP)

    def kill() -> None:
        deadline = time.monotonic() + 10
        while pool.in_flight() == 0 and time.monotonic() < deadline:
            time.sleep(0.005)
        for pid in pids:
            os.kill(pid, signal.SIGKILL)

    threading.Thread(target=kill, daemon=True).start()


def test_calls_are_made_by_another_process(pool: SqsSendPool, aws_clients: Any) -> None:
    queues, name = _queue(aws_clients)
    messages = [OutgoingMessage(str(i), f"body {i}") for i in range(10)]
    assert pool.send_batch(name, messages) == []
    assert pool.pids() and os.getpid() not in pool.pids()
    assert sorted(_bodies(queues, name)) == sorted(f"body {i}" for i in range(10))
    with pytest.raises(NotFoundError):  # the adapter's errors, as the adapter raises them
        pool.send_batch(f"missing-{uuid.uuid4().hex[:8]}", messages[:1])
    over = [OutgoingMessage(str(i), "x" * (SQS_MAX_BATCH_BYTES // 10 + 1)) for i in range(10)]
    with pytest.raises(CallTooLargeError):  # what send_in_batches splits
        pool.send_batch(name, over)


def test_a_worker_killed_mid_call_fails_the_call_and_is_replaced(
    pool: SqsSendPool, aws_clients: Any
) -> None:
    queues, name = _queue(aws_clients)
    assert pool.send_batch(name, [OutgoingMessage("0", "before")]) == []
    (first,) = pool.pids()
    _stop_and_kill_mid_call(pool)
    with pytest.raises(UnavailableError, match="exited"):
        pool.send_batch(name, [OutgoingMessage("0", "lost")])
    assert pool.send_batch(name, [OutgoingMessage("0", "after")]) == []
    assert pool.started == 2 and pool.pids() != [first]
    assert sorted(_bodies(queues, name)) == ["after", "before"]  # the frozen call never ran


def test_stop_leaves_no_child_process_and_refuses_further_calls(aws_settings: Any) -> None:
    pool = SqsSendPool(aws_settings, 2)
    pool.start()
    assert len(_pool_children()) == 2
    pool.stop()
    assert not _pool_children()
    with pytest.raises(UnavailableError, match="stopped"):
        pool.send_batch("any", [OutgoingMessage("0", "x")])


class _KillingSender:
    """The pool, whose workers die during the calls numbered in ``kill``."""

    def __init__(self, pool: SqsSendPool, kill: set[int]) -> None:
        self.pool, self.kill, self.calls = pool, kill, 0

    def send_batch(self, name: str, messages: Any) -> list[str]:
        self.calls += 1
        if self.calls in self.kill:
            _stop_and_kill_mid_call(self.pool)
        return self.pool.send_batch(name, messages)


def _runner(h: Harness, sender: _KillingSender) -> ReplayRunner:
    c = h.container
    ingress = Ingress(c.cache, h.queues, c.claims, h.archive, c.metrics)
    return ReplayRunner(
        Resources(h.store, REPLAYS),
        lambda ns, b: load_broker_config(h.store, h.settings.queue_prefix, ns, b),
        ingress.send_all,  # FIFO queues (none here)
        c.claims,
        h.blobs,
        h.blobs,
        c.metrics,
        RunnerOptions(
            archive_bucket=h.settings.archive_bucket,
            settle_seconds=0,
            batch_events=10,
            send_processes=1,
        ),
        process_send=lambda n: lambda queue, items: send_in_batches(sender, queue, items),
    )


def test_a_replay_batch_whose_worker_dies_is_not_checkpointed_and_is_sent_again(
    pool: SqsSendPool, aws_clients: Any
) -> None:
    h = harness(queue_prefix=f"p{uuid.uuid4().hex[:6]}-")
    h.broker()
    h.trigger("a")
    queues, name = _queue(aws_clients, h.queue_of("a"))  # the trigger's queue, on moto
    start, _ = window()
    for i in range(30):
        assert h.send(id_=f"e{i}").status == 202
    flush_archive(h)
    _, end = window()
    put_replay(h, "r", start, end)
    # Every attempt (3) of the second batch's call: its worker dies during it.
    sender = _KillingSender(pool, kill={2, 3, 4})
    runner = _runner(h, sender)
    with pytest.raises(UnavailableError):
        runner.run("ns", "default", "r", 10.0)
    progress = h.container.replays.get("ns", "default", "r")["status"]["progress"]
    assert progress["eventsEnqueued"] == 10  # the first batch only: no checkpoint past the death
    assert runner.run("ns", "default", "r", 10.0)  # a new worker; from the checkpoint
    ids = [e["id"] for body in _bodies(queues, name) for e in json.loads(body)["pack"]]
    assert sorted(ids) == sorted(f"e{i}" for i in range(30))  # nothing lost, nothing twice
    assert pool.started == 4  # the first worker and one for each killed one


def test_only_the_sqs_adapter_gets_sender_processes(aws_settings: Any) -> None:
    assert Container(aws_settings).replay_runner._process_send is not None
    assert harness().container.replay_runner._process_send is None  # fakes stay here
