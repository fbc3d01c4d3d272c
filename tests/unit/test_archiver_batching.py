"""Archive records gathered across requests (``batch_seconds``): one write for many, on a timer
or at 500 records, flushed at exit, failures still retried, counted and logged."""

from __future__ import annotations

import json
import threading

from chalicelib.services.archiver import FLUSH_RECORDS, Archiver
from chalicelib.services.metrics import Metrics
from tests.e2e.conftest import wait_until
from tests.fakes import MemoryArchive


def _records(n: int, start: int = 0) -> list[bytes]:
    return [json.dumps({"event": {"id": f"e{i}"}}).encode() for i in range(start, start + n)]


def test_without_a_window_each_write_is_a_call() -> None:
    sink = MemoryArchive()
    archiver = Archiver(sink, Metrics(enabled=True), "ingress")
    for i in range(3):
        assert archiver.write(_records(1, i))
    assert sink.calls == 3 and len(sink.records) == 3


def test_writes_within_a_window_become_one_call() -> None:
    sink = MemoryArchive()
    archiver = Archiver(sink, Metrics(enabled=True), "ingress", batch_seconds=0.2)
    writers = [
        threading.Thread(target=archiver.write, args=(_records(2, 2 * i),)) for i in range(20)
    ]
    for w in writers:
        w.start()
    for w in writers:
        w.join()
    wait_until(lambda: len(sink.records) == 40, 10, "the window's records written")
    assert sink.calls <= 2  # one per window (two if the writers straddled one)


def test_a_full_call_is_written_without_waiting_for_the_window() -> None:
    sink = MemoryArchive()
    archiver = Archiver(sink, Metrics(enabled=True), "ingress", batch_seconds=3600)
    archiver.write(_records(FLUSH_RECORDS))
    wait_until(lambda: len(sink.records) == FLUSH_RECORDS, 10, "a full batch written")


def test_flush_writes_what_is_buffered() -> None:  # what atexit runs
    sink = MemoryArchive()
    archiver = Archiver(sink, Metrics(enabled=True), "delivery", batch_seconds=3600)
    archiver.write(_records(3))
    assert sink.records == []
    assert archiver.flush()
    assert len(sink.records) == 3


def test_a_buffered_write_that_fails_is_counted_and_logged(caplog) -> None:  # type: ignore[no-untyped-def]
    sink = MemoryArchive()
    sink.fail_next = 10
    metrics = Metrics(enabled=True)
    archiver = Archiver(sink, metrics, "ingress", sleep=lambda s: None, batch_seconds=3600)
    assert archiver.write(_records(2))  # buffered: the request is answered
    assert not archiver.flush()
    assert 'broker_archive_failure_count_total{function="ingress"} 2' in metrics.prometheus_text()
    assert any("e0" in r.getMessage() for r in caplog.records)
