"""The carry spool (adapters/archive_spool.py) under the archiver, and the shutdown extension's
drain (infra/spool_extension/extension.py) over what it leaves: carried records are on disk until
written, a crash between Firehose and the removal sends them twice (never zero times), the spool
is bounded as the carry is, and what the extension cannot send is counted."""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from pathlib import Path

import pytest

from chalicelib.adapters.archive_spool import FileSpool
from chalicelib.adapters.firehose_archive import FirehoseArchive
from chalicelib.config import SPOOL_DIR, SPOOL_EXTENSION, Settings
from chalicelib.container import Container
from chalicelib.services import archiver
from chalicelib.services.archiver import CARRY_BYTES, FLUSH_RECORDS, Archiver, SpooledArchive
from chalicelib.services.metrics import Metrics
from infra.spool_extension import extension
from infra.spool_layer import EXTENSION_NAME
from tests.fakes import MemoryArchive


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Killed(BaseException):
    """The runtime process dying (SIGKILL, a timeout) at that very point: nothing after runs."""


class KilledAfterFirehose:
    """Firehose takes the records, then the process dies before the archiver goes on."""

    def __init__(self) -> None:
        self.firehose = MemoryArchive()

    def put(self, records: Sequence[bytes]) -> None:
        self.firehose.put(records)
        raise Killed


def _records(n: int, start: int = 0) -> list[bytes]:
    return [
        json.dumps({"event": {"id": f"e{i}"}}).encode() + b"\n" for i in range(start, n + start)
    ]


def _spooled(sink: object, directory: Path) -> SpooledArchive:
    return SpooledArchive(sink, lambda role: FileSpool(str(directory), role))  # type: ignore[arg-type]


def _spool_lines(directory: Path) -> list[bytes]:
    return [line for p in sorted(directory.iterdir()) for line in p.read_bytes().splitlines(True)]


def _memory_sender(firehose: MemoryArchive) -> extension.Sender:
    def send(records: list[bytes]) -> list[bool]:
        firehose.put(records)
        return [False] * len(records)

    return send


def test_carried_records_are_on_disk_until_written_then_removed(tmp_path: Path) -> None:
    sink, clock = MemoryArchive(), Clock()
    archiver = Archiver(
        _spooled(sink, tmp_path), Metrics(enabled=True), "ingress", carry_seconds=1.0, clock=clock
    )
    for i in range(3):
        assert archiver.write(_records(1, i))
    assert sink.calls == 0 and _spool_lines(tmp_path) == _records(3)
    [carried] = tmp_path.iterdir()
    assert carried.name.startswith("ingress.") and carried.name.endswith(".carry")
    clock.now += 1.1
    assert archiver.write(_records(1, 3))  # due: one Firehose call, then the spool is removed
    assert sink.records == _records(4) and list(tmp_path.iterdir()) == []
    assert archiver.write(_records(1, 4))  # the next window spools in a new file
    assert _spool_lines(tmp_path) == _records(1, 4)
    assert archiver.flush() and list(tmp_path.iterdir()) == []


def test_a_crash_between_firehose_and_the_removal_sends_twice_never_loses(tmp_path: Path) -> None:
    sink = KilledAfterFirehose()
    archiver = Archiver(
        _spooled(sink, tmp_path), Metrics(enabled=True), "delivery", carry_seconds=60
    )
    assert archiver.write(_records(5))
    with pytest.raises(Killed):
        archiver.flush()
    assert sink.firehose.records == _records(5)
    [left] = tmp_path.iterdir()  # rotated before the call, not yet removed
    assert left.name.endswith(".sending") and left.read_bytes() == b"".join(_records(5))

    report = extension.drain(str(tmp_path), lambda: _memory_sender(sink.firehose), 1e12)

    assert report.sent == 5 and report.lost == {}
    assert b"".join(sink.firehose.records) == b"".join(_records(5) * 2)  # duplicates only
    assert list(tmp_path.iterdir()) == []


def test_the_spool_is_bounded_as_the_carry_is(tmp_path: Path) -> None:
    sink = MemoryArchive()
    archiver = Archiver(
        _spooled(sink, tmp_path), Metrics(enabled=True), "ingress", carry_seconds=60
    )
    archiver.write(_records(FLUSH_RECORDS - 1))
    assert len(_spool_lines(tmp_path)) == FLUSH_RECORDS - 1
    archiver.write(_records(1, FLUSH_RECORDS))  # 500 records: written at once, spool removed
    assert sink.calls == 1 and list(tmp_path.iterdir()) == []
    half = b"x" * (CARRY_BYTES // 2) + b"\n"
    archiver.write([half])
    assert sum(p.stat().st_size for p in tmp_path.iterdir()) == len(half)
    archiver.write([half])  # or a megabyte
    assert sink.calls == 2 and list(tmp_path.iterdir()) == []


def test_a_failed_write_is_counted_and_its_spool_removed(tmp_path: Path) -> None:
    """As without a spool: retried, counted and logged; the extension does not send it later
    (that would archive what the metric counts as not archived)."""
    sink, metrics = MemoryArchive(), Metrics(enabled=True)
    sink.fail_next = 10
    archiver = Archiver(
        _spooled(sink, tmp_path), metrics, "ingress", sleep=lambda s: None, carry_seconds=60
    )
    assert archiver.write(_records(2))
    assert not archiver.flush()
    assert 'broker_archive_failure_count_total{function="ingress"} 2' in metrics.prometheus_text()
    assert list(tmp_path.iterdir()) == []


def test_a_spool_that_cannot_be_written_makes_the_write_immediate(tmp_path: Path) -> None:
    not_a_directory = tmp_path / "file"
    not_a_directory.write_text("")
    sink = MemoryArchive()
    archiver = Archiver(
        _spooled(sink, not_a_directory), Metrics(enabled=True), "ingress", carry_seconds=60
    )
    assert archiver.write(_records(2))  # not kept for the extension: written before answering
    assert sink.records == _records(2)


def test_only_a_carrying_archiver_spools(tmp_path: Path) -> None:
    sink = MemoryArchive()
    plain = Archiver(_spooled(sink, tmp_path), Metrics(enabled=True), "ingress")
    assert plain.write(_records(1)) and sink.records == _records(1)
    batching = Archiver(
        _spooled(sink, tmp_path), Metrics(enabled=True), "ingress", batch_seconds=3600
    )
    assert batching.write(_records(1, 1))  # local mode's background window: no spool
    assert list(tmp_path.iterdir()) == []
    assert batching.flush() and sink.records == _records(2)


def test_settings_and_wiring(tmp_path: Path) -> None:
    lambda_env = {"BROKER_STAGE": "prod", "AWS_LAMBDA_FUNCTION_NAME": "serverless-broker-prod"}
    assert Settings.from_env(lambda_env).archive_spool_dir == SPOOL_DIR
    assert Settings.from_env({"BROKER_STAGE": "prod"}).archive_spool_dir is None
    chosen = {**lambda_env, "BROKER_ARCHIVE_SPOOL_DIR": str(tmp_path)}
    assert Settings.from_env(chosen).archive_spool_dir == str(tmp_path)

    carrying = Settings(archive_carry_seconds=1.0, archive_spool_dir=str(tmp_path))
    archive = Container(carrying).archive
    assert isinstance(archive, SpooledArchive) and isinstance(archive.sink, FirehoseArchive)
    assert isinstance(archive.spools("ingress"), FileSpool)
    not_carrying = Settings(archive_carry_seconds=0.0, archive_spool_dir=str(tmp_path))
    assert isinstance(Container(not_carrying).archive, FirehoseArchive)


# ---- the extension's drain, in process --------------------------------------------------------


def test_a_torn_last_line_is_counted_not_sent(tmp_path: Path) -> None:
    (tmp_path / "ingress.1.a.1.carry").write_bytes(b"".join(_records(2)) + b'{"event": {"id"')
    firehose = MemoryArchive()
    report = extension.drain(str(tmp_path), lambda: _memory_sender(firehose), 1e12)
    assert firehose.records == [b"".join(_records(2))]  # packed: one Firehose record
    assert report.sent == 2 and report.lost_count == 1
    assert list(tmp_path.iterdir()) == []


def test_refused_entries_are_sent_again_until_the_deadline(tmp_path: Path) -> None:
    (tmp_path / "delivery.1.a.1.sending").write_bytes(b"".join(_records(3)))
    calls: list[int] = []

    def refuses_once(records: list[bytes]) -> list[bool]:
        calls.append(len(records))
        return [len(calls) == 1] * len(records)

    report = extension.drain(str(tmp_path), lambda: refuses_once, 1e12)
    assert calls == [1, 1] and report.sent == 3 and report.lost == {}

    (tmp_path / "ingress.1.a.1.carry").write_bytes(b"".join(_records(3)))
    now = {"t": 0.0}

    def refuses_until_the_deadline(records: list[bytes]) -> list[bool]:
        now["t"] = 5.0  # the call took the time that was left
        return [True] * len(records)

    report = extension.drain(
        str(tmp_path), lambda: refuses_until_the_deadline, 1.0, clock=lambda: now["t"]
    )
    assert report.sent == 0 and report.lost == {"ingress": _records(3)}
    out: list[str] = []
    extension.emit(report, "ServerlessBroker", out.append)
    [document] = [json.loads(line) for line in out if "_aws" in line]
    assert document["archive_spool_lost_count"] == [3.0] and document["function"] == "ingress"


def test_nothing_spooled_nothing_sent_nothing_emitted(tmp_path: Path) -> None:
    def no_client() -> extension.Sender:
        raise AssertionError("no Firehose client is built for an empty spool")

    report = extension.drain(str(tmp_path / "absent"), no_client, 1e12)
    assert report.sent == 0 and report.lost == {}
    out: list[str] = []
    extension.emit(report, "ServerlessBroker", out.append)
    assert out == []


def test_lambda_without_the_shutdown_extension_does_not_carry(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A stage deployed without the spool layer (a bare ``chalice deploy``) would lose what an idle
    container carries: it writes before answering instead, and says why once."""
    env = {
        "BROKER_STAGE": "prod",
        "AWS_LAMBDA_FUNCTION_NAME": "serverless-broker-prod",
        "BROKER_ARCHIVE_CARRY_SECONDS": "1",
        "BROKER_ARCHIVE_SPOOL_DIR": str(tmp_path / "spool"),
    }
    bare = Settings.from_env(env, extensions_dir=str(tmp_path))
    assert bare.archive_carry_seconds == 0.0
    assert bare.archive_carry_off is not None
    assert str(tmp_path / SPOOL_EXTENSION) in bare.archive_carry_off
    with caplog.at_level(logging.WARNING):
        assert isinstance(Container(bare).archive, FirehoseArchive)
    assert [r.getMessage() for r in caplog.records] == [bare.archive_carry_off]

    (tmp_path / SPOOL_EXTENSION).write_text("#!/bin/sh\n")
    layered = Settings.from_env(env, extensions_dir=str(tmp_path))
    assert layered.archive_carry_seconds == 1.0 and layered.archive_carry_off is None
    assert isinstance(Container(layered).archive, SpooledArchive)
    # Off Lambda (local mode, tests) there is no extension to look for.
    local = Settings.from_env({k: v for k, v in env.items() if k != "AWS_LAMBDA_FUNCTION_NAME"})
    assert local.archive_carry_seconds == 1.0 and local.archive_carry_off is None


def test_the_extension_name_is_the_layers() -> None:
    assert SPOOL_EXTENSION == EXTENSION_NAME


def test_a_carried_record_is_written_when_its_window_ends_without_another_record() -> None:
    """The reply path of a delivery function, an API container serving only the control plane:
    no later record comes to write it, so every invocation's end does (app.py middleware)."""
    now = {"t": 0.0}
    sink = MemoryArchive()
    carrying = Archiver(
        sink, Metrics(enabled=True), "delivery", carry_seconds=1.0, clock=lambda: now["t"]
    )
    assert carrying.write(_records(1)) and sink.records == []
    archiver.flush_due()
    assert sink.records == []  # not a window old yet
    now["t"] = 1.5
    archiver.flush_due()
    assert sink.records == _records(1)


def test_every_invocation_ends_by_writing_what_is_due(monkeypatch: pytest.MonkeyPatch) -> None:
    import app

    calls: list[str] = []
    monkeypatch.setattr(archiver, "flush_due", lambda: calls.append("flush"))

    def fails(event: object) -> object:
        calls.append("handler")
        raise RuntimeError("the handler failed")

    assert app._write_due_archive_records({}, lambda event: calls.append("handler")) is None
    with pytest.raises(RuntimeError):
        app._write_due_archive_records({}, fails)
    assert calls == ["handler", "flush", "handler", "flush"]
