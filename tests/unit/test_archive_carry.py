"""Archive records carried by a warm Lambda container (``carry_seconds``, no thread: a frozen
container runs none) and packed into few Firehose records (``firehose_archive.pack``)."""

from __future__ import annotations

import json

from chalicelib.adapters.firehose_archive import MAX_RECORD_BYTES, pack
from chalicelib.config import Settings
from chalicelib.services.archiver import CARRY_BYTES, FLUSH_RECORDS, Archiver, flush_all
from chalicelib.services.metrics import Metrics
from tests.fakes import MemoryArchive


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _records(n: int, start: int = 0) -> list[bytes]:
    return [
        json.dumps({"event": {"id": f"e{i}"}}).encode() + b"\n" for i in range(start, n + start)
    ]


def test_a_warm_container_writes_its_carried_records_once_they_are_due() -> None:
    sink, clock = MemoryArchive(), Clock()
    archiver = Archiver(sink, Metrics(enabled=True), "ingress", carry_seconds=1.0, clock=clock)
    for i in range(5):  # five requests within the second: answered, nothing written
        assert archiver.write(_records(1, i))
        clock.now += 0.1
    assert sink.calls == 0
    clock.now += 0.6  # the sixth request finds the oldest record 1.1 s old: one call for all six
    assert archiver.write(_records(1, 5))
    assert sink.calls == 1 and sink.records == _records(6)
    assert archiver.write(_records(1, 6))  # a new window starts
    assert sink.calls == 1


def test_a_full_buffer_is_written_at_once() -> None:
    sink, clock = MemoryArchive(), Clock()
    archiver = Archiver(sink, Metrics(enabled=True), "delivery", carry_seconds=60, clock=clock)
    archiver.write(_records(FLUSH_RECORDS - 1))
    assert sink.calls == 0
    archiver.write(_records(1, FLUSH_RECORDS))
    assert sink.calls == 1 and len(sink.records) == FLUSH_RECORDS
    half = b"x" * (CARRY_BYTES // 2) + b"\n"
    archiver.write([half])
    assert sink.calls == 1
    archiver.write([half])  # or a megabyte
    assert sink.calls == 2


def test_a_carried_write_that_fails_is_retried_counted_and_logged() -> None:
    sink, clock = MemoryArchive(), Clock()
    sink.fail_next = 10
    metrics = Metrics(enabled=True)
    archiver = Archiver(
        sink, metrics, "ingress", sleep=lambda s: None, carry_seconds=1.0, clock=clock
    )
    assert archiver.write(_records(2))
    clock.now += 2
    assert not archiver.write(_records(1, 2))  # due: written now, and it fails
    assert 'broker_archive_failure_count_total{function="ingress"} 3' in metrics.prometheus_text()


def test_without_carry_each_write_is_a_call_and_a_batch_window_wins_over_carry() -> None:
    sink = MemoryArchive()
    archiver = Archiver(sink, Metrics(enabled=True), "ingress")
    archiver.write(_records(1))
    assert sink.calls == 1
    both = Archiver(MemoryArchive(), Metrics(enabled=True), "i", batch_seconds=5, carry_seconds=1)
    assert both._carry_seconds == 0  # local mode's background window, not the carry


def test_the_setting_is_read_and_bounded() -> None:
    assert Settings.from_env({"BROKER_ARCHIVE_CARRY_SECONDS": "2"}).archive_carry_seconds == 2
    assert Settings.from_env({"BROKER_ARCHIVE_CARRY_SECONDS": "9999"}).archive_carry_seconds == 300
    assert Settings.from_env({}).archive_carry_seconds == 0


def test_pack_joins_lines_into_few_records_with_the_same_bytes() -> None:
    lines = _records(100)
    packed = pack(lines, limit=1000)
    assert b"".join(packed) == b"".join(lines)
    assert all(len(r) <= 1000 for r in packed)
    assert len(packed) < len(lines) / 10
    assert pack(lines) == [b"".join(lines)]


def test_pack_keeps_a_line_without_newline_apart_and_a_big_line_alone() -> None:
    big = b"y" * 5000 + b"\n"
    assert pack([b"a\n", b"b", b"c\n"]) == [b"a\nb", b"c\n"]
    assert pack([b"a\n", big, b"c\n"], limit=4000) == [b"a\n", big, b"c\n"]
    assert len(pack([b"z" * (MAX_RECORD_BYTES // 2) + b"\n"] * 2)) == 2


def test_flush_all_writes_what_every_holding_archiver_holds() -> None:
    """What the local runtime calls as it stops, before its embedded endpoint goes: the records
    a batching (background window) or carrying archiver holds are written, not left to exit."""
    batching_sink, carrying_sink = MemoryArchive(), MemoryArchive()
    batching = Archiver(batching_sink, Metrics(enabled=True), "ingress", batch_seconds=3600)
    carrying = Archiver(carrying_sink, Metrics(enabled=True), "delivery", carry_seconds=3600)
    assert batching.write([b'{"a":1}\n']) and carrying.write([b'{"b":2}\n'])
    assert batching_sink.records == [] and carrying_sink.records == []
    flush_all()
    assert batching_sink.records == [b'{"a":1}\n']
    assert carrying_sink.records == [b'{"b":2}\n']
