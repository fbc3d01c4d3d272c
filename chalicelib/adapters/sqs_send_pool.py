"""SendMessageBatch from other processes: a small persistent pool of sender processes, so that a
replay's botocore work (serialising a call, signing it, parsing the answer) runs on another core
than the one reading and packing the archive (docs/replay.md, Throughput).

Only ``multiprocessing.Process`` and ``Pipe`` (a socketpair) in the 'spawn' context: inside AWS
Lambda there is no /dev/shm, so anything built on semaphores (multiprocessing.Queue, Pool,
ProcessPoolExecutor) fails there; and a process with threads is never forked. Each worker builds
its own SQS client from the Settings it is given (credentials from the environment, as usual)
and serves calls side by side on a few threads; a call travels as plain data (queue name and
the entries as tuples) and its answer is the ids of the entries that failed, as
``SqsQueues.send_batch`` answers, or the error it raised. The pool is a ``QueueSender``:
``send_in_batches`` retries failed entries over it as over the adapter.

'spawn' runs the parent's main module again in each worker (as ``__mp_main__``): a script that
starts a pool keeps its work under ``if __name__ == "__main__"``, as ``python -m brokerctl`` and
Lambda's runtime bootstrap do.

The pool starts at its first call and lives as long as the process (a warm Lambda container,
the local runtime) until ``stop``. A worker that dies fails its calls in flight with
UnavailableError (a replay then does not checkpoint and sends the batch again) and is replaced
at the next call.
"""

from __future__ import annotations

import builtins
import contextlib
import itertools
import logging
import multiprocessing
import threading
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeoutError
from multiprocessing.connection import Connection
from typing import Any

from chalicelib.config import Settings
from chalicelib.core.errors import (
    BrokerError,
    CallTooLargeError,
    ConflictError,
    NotFoundError,
    UnavailableError,
)
from chalicelib.ports import OutgoingMessage

log = logging.getLogger("broker.sqs_send_pool")

WORKER_THREADS = 4  # calls in flight in one worker process
CALL_TIMEOUT_S = 120.0  # longer than botocore's own worst case: 3 attempts of 5 s + 30 s
STOP_TIMEOUT_S = 5.0  # a worker finishes its calls in flight, then is terminated
_ERRORS: dict[str, type[BrokerError]] = {
    "NotFoundError": NotFoundError,
    "ConflictError": ConflictError,
    "UnavailableError": UnavailableError,
    "CallTooLargeError": CallTooLargeError,  # a call the queue refused as too long
}
_Entry = tuple[str, str, int, str | None, str | None, dict[str, str] | None]


class SqsSendPool:
    def __init__(self, settings: Settings, processes: int, threads: int = WORKER_THREADS) -> None:
        if processes < 1:
            raise ValueError("a send pool has at least one process")
        self.processes = processes
        self._settings = settings
        self._threads = threads
        self._workers: list[_Worker] = []
        self._lock = threading.Lock()
        self._ids = itertools.count()
        self._stopped = False
        self.started = 0  # worker processes started so far (replacements included)

    def pids(self) -> builtins.list[int | None]:
        """The worker processes' ids (none before the first call)."""
        with self._lock:
            return [w.pid for w in self._workers]

    def in_flight(self) -> int:
        """Calls sent to a worker and not answered yet."""
        with self._lock:
            return sum(len(w.pending) for w in self._workers)

    def start(self, timeout_s: float = 60.0) -> None:
        """Start (or replace) the workers now, rather than at the first call, and wait until
        each has its SQS client."""
        with self._lock:
            self._ensure()
            workers = list(self._workers)
        for worker in workers:
            if not worker.ready.wait(timeout_s) or worker.dead:
                raise UnavailableError(f"send process {worker.pid} did not start")

    def send_batch(self, name: str, messages: Sequence[OutgoingMessage]) -> builtins.list[str]:
        entries: list[_Entry] = [
            (
                m.id,
                m.body,
                m.delay_seconds,
                m.group_id,
                m.dedup_id,
                dict(m.message_attributes) if m.message_attributes else None,
            )
            for m in messages
        ]
        with self._lock:
            self._ensure()
            worker = min(self._workers, key=lambda w: len(w.pending))
            call = next(self._ids)
        future = worker.submit(call, name, entries)
        try:
            answer: builtins.list[str] = future.result(CALL_TIMEOUT_S)
        except FutureTimeoutError:
            worker.forget(call)
            raise UnavailableError(f"send to {name}: no answer from the send process") from None
        return answer

    def stop(self) -> None:
        """Stop every worker (each finishes its calls in flight) and refuse further calls."""
        with self._lock:
            self._stopped = True
            workers, self._workers = self._workers, []
        for worker in workers:
            worker.stop()

    def _ensure(self) -> None:
        if self._stopped:
            raise UnavailableError("the send processes are stopped")
        alive = []
        for worker in self._workers:
            if worker.dead:
                log.warning("send process %s exited (%s); replacing it", worker.pid, worker.code())
                worker.stop()
            else:
                alive.append(worker)
        while len(alive) < self.processes:
            alive.append(_Worker(self._settings, self._threads))
            self.started += 1
        self._workers = alive


class _Worker:
    """One sender process, its pipe, and the thread that reads its answers."""

    def __init__(self, settings: Settings, threads: int) -> None:
        context = multiprocessing.get_context("spawn")
        self._conn, child = context.Pipe(duplex=True)
        self._process = context.Process(
            target=_serve, args=(child, settings, threads), name="sqs-send", daemon=True
        )
        self._process.start()
        child.close()
        self.pid = self._process.pid
        self.pending: dict[int, Future[builtins.list[str]]] = {}
        self.dead = False
        self.ready = threading.Event()  # its SQS client is built, or it died
        self._lock = threading.Lock()
        self._reader = threading.Thread(target=self._read, name="sqs-send-answers", daemon=True)
        self._reader.start()

    def submit(self, call: int, name: str, entries: list[_Entry]) -> Future[builtins.list[str]]:
        future: Future[builtins.list[str]] = Future()
        with self._lock:
            if self.dead:
                raise UnavailableError(f"send to {name}: the send process exited")
            self.pending[call] = future
            try:
                self._conn.send((call, name, entries))
            except OSError as exc:  # the worker is gone: its reader fails the rest
                self.pending.pop(call, None)
                raise UnavailableError(f"send to {name}: the send process is gone ({exc})") from exc
        return future

    def forget(self, call: int) -> None:
        with self._lock:
            self.pending.pop(call, None)

    def code(self) -> int | None:
        return self._process.exitcode

    def _read(self) -> None:
        while True:
            try:
                call, kind, payload = self._conn.recv()
            except (EOFError, OSError):
                break
            if kind == "ready":
                self.ready.set()
                continue
            with self._lock:
                future = self.pending.pop(call, None)
            if future is None:
                continue  # its caller gave up waiting (CALL_TIMEOUT_S) and said so
            if kind == "ok":
                future.set_result(payload)
            else:
                future.set_exception(_ERRORS.get(kind, UnavailableError)(payload))
        with self._lock:
            self.dead = True
            failed, self.pending = self.pending, {}
        self.ready.set()
        for future in failed.values():
            future.set_exception(UnavailableError("the send process exited during the call"))

    def stop(self) -> None:
        with contextlib.suppress(OSError):  # already gone
            self._conn.send(None)  # finish the calls in flight, then exit
        self._process.join(STOP_TIMEOUT_S)
        if self._process.is_alive():
            log.warning("send process %s did not stop in time; terminated", self.pid)
            self._process.terminate()
            self._process.join(STOP_TIMEOUT_S)
        self._conn.close()
        self._reader.join(STOP_TIMEOUT_S)


# ---- in the worker process ----------------------------------------------------------------------


def _serve(conn: Connection, settings: Settings, threads: int) -> None:
    """A worker's life: calls from ``conn`` until ``None`` or the parent's end of the pipe
    closes, ``threads`` at a time."""
    from chalicelib.adapters.aws_clients import AwsClients
    from chalicelib.adapters.sqs_queues import SqsQueues

    clients = AwsClients(settings)
    clients.client("sqs")  # built before the first call: a warm pool's calls find it made
    queues = SqsQueues(clients)
    answers = threading.Lock()
    conn.send((-1, "ready", None))

    def answer(call: int, name: str, entries: list[_Entry]) -> None:
        try:
            messages = [OutgoingMessage(*entry) for entry in entries]
            reply: tuple[int, str, Any] = (call, "ok", queues.send_batch(name, messages))
        except BrokerError as exc:
            reply = (call, type(exc).__name__, exc.detail)
        except Exception as exc:  # a bug: logged here, raised in the parent as UnavailableError
            log.exception("send to %s failed", name)
            reply = (call, "error", f"send to {name}: {type(exc).__name__}: {exc}")
        with answers:
            conn.send(reply)

    with ThreadPoolExecutor(threads, thread_name_prefix="sqs-send") as pool:
        while True:
            try:
                request = conn.recv()
            except (EOFError, OSError):
                break  # the parent is gone
            if request is None:
                break
            pool.submit(answer, *request)
    conn.close()
