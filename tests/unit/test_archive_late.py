"""Carried archive records written late (services/late_archive.py): straight to an S3 object of
the hour of their ``at``, one object per hour, where a replay of their range looks; fresh ones
through Firehose as before; a failed put retried, then counted and logged."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from chalicelib.adapters.archive_spool import FileSpool
from chalicelib.config import Settings
from chalicelib.container import Container
from chalicelib.core import archive
from chalicelib.core.archive_reader import hour_of_key, object_records
from chalicelib.core.errors import UnavailableError
from chalicelib.services import late_archive
from chalicelib.services.archiver import Archiver, SpooledArchive
from chalicelib.services.late_archive import LATE_SECONDS, LateArchive
from chalicelib.services.metrics import Metrics
from infra.spool_extension import extension
from tests.fakes import MemoryArchive, MemoryBlobs

BUCKET = "archive-bucket"
T = datetime(2026, 3, 4, 10, 59, 40, 123000, tzinfo=UTC)


class Wall:
    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


class FailingBlobs(MemoryBlobs):
    def __init__(self, failures: int) -> None:
        super().__init__()
        self.failures = failures
        self.calls: list[str] = []

    def put(self, bucket: str, key: str, data: bytes) -> None:
        self.calls.append(key)
        if self.failures > 0:
            self.failures -= 1
            raise UnavailableError("put s3://archive-bucket: SlowDown")
        super().put(bucket, key, data)


def _accepted(event_id: str, at: datetime) -> bytes:
    event = {"specversion": "1.0", "id": event_id, "source": "/s", "type": "t"}
    return archive.encode_line(archive.accepted_record("ns", "b", event, ["t1"], 10, at))


def _carrying(
    tmp_path: Path, blobs: MemoryBlobs, wall: Wall, metrics: Metrics | None = None
) -> tuple[Archiver, MemoryArchive]:
    firehose = MemoryArchive()
    sink = SpooledArchive(
        firehose,
        lambda role: FileSpool(str(tmp_path), role),
        late=LateArchive(blobs, BUCKET, clock=wall),
    )
    archiver = Archiver(
        sink, metrics or Metrics(enabled=True), "ingress", sleep=lambda s: None, carry_seconds=3600
    )
    return archiver, firehose


def _objects(blobs: MemoryBlobs) -> dict[str, list[str]]:
    """key -> event ids, read back as a replay reads them."""
    out = {}
    for (bucket, key), blob in sorted(blobs.objects.items()):
        assert bucket == BUCKET
        out[key] = [r["event"]["id"] for r in object_records(key, blob).records if r]
    return out


def test_late_records_go_to_one_object_per_hour_of_arrival_and_fresh_ones_to_firehose(
    tmp_path: Path,
) -> None:
    wall, blobs, metrics = Wall(T + timedelta(hours=2)), MemoryBlobs(), Metrics(enabled=True)
    archiver, firehose = _carrying(tmp_path, blobs, wall, metrics)
    before_hour = _accepted("a1", T)  # 10:59:40
    after_hour = [
        _accepted("b1", T + timedelta(seconds=30)),
        _accepted("b2", T + timedelta(minutes=5)),
    ]
    fresh = _accepted("c1", wall.now - timedelta(seconds=5))
    for record in [before_hour, *after_hour, fresh]:
        assert archiver.write([record])
    assert firehose.calls == 0 and blobs.objects == {}  # carried, nothing written yet

    assert archiver.flush()

    objects = _objects(blobs)
    assert sorted(objects.values()) == [["a1"], ["b1", "b2"]]  # two hours, two objects
    assert {hour_of_key(k) for k in objects} == {
        datetime(2026, 3, 4, 10, tzinfo=UTC),
        datetime(2026, 3, 4, 11, tzinfo=UTC),
    }
    for key in objects:
        assert key.startswith("archive/2026/03/04/1") and "/late-ingress-" in key
        assert key.endswith(".gz") and blobs.objects[(BUCKET, key)][:2] == b"\x1f\x8b"
    assert firehose.records == [fresh]
    assert 'broker_archive_late_count_total{function="ingress"} 3' in metrics.prometheus_text()
    assert list(tmp_path.iterdir()) == []  # the spool is done with


def test_the_limit_is_late_seconds_after_at(tmp_path: Path) -> None:
    wall, blobs = Wall(T), MemoryBlobs()
    archiver, firehose = _carrying(tmp_path, blobs, wall)
    just_in_time = _accepted("in", T - timedelta(seconds=LATE_SECONDS))
    just_late = _accepted("late", T - timedelta(seconds=LATE_SECONDS, milliseconds=1))
    archiver.write([just_in_time, just_late])
    assert archiver.flush()
    assert firehose.records == [just_in_time]
    assert list(_objects(blobs).values()) == [["late"]]


def test_the_limit_leaves_firehose_time_to_file_a_record_before_a_replay_lists() -> None:
    """The arithmetic of LATE_SECONDS: a record sent to Firehose up to LATE_SECONDS after its
    ``at`` is in S3 (buffer ≤ 300 s) before a replay whose ``to`` follows it lists (360 s after
    ``to``), with at least 30 s to spare."""
    firehose_buffer, replay_settle = 300, 360  # infra/template.yaml, .chalice/config.json
    assert LATE_SECONDS + firehose_buffer + 30 <= replay_settle
    assert Settings.from_env({"BROKER_REPLAY_SETTLE_SECONDS": "360"}).replay_settle_seconds == 360


def test_a_failed_put_is_retried_with_the_same_key(tmp_path: Path) -> None:
    wall, blobs = Wall(T + timedelta(hours=1)), FailingBlobs(failures=2)
    archiver, firehose = _carrying(tmp_path, blobs, wall)
    archiver.write([_accepted("a1", T)])
    assert archiver.flush()
    assert len(blobs.calls) == 3 and len(set(blobs.calls)) == 1  # overwritten, never duplicated
    assert list(_objects(blobs).values()) == [["a1"]] and firehose.records == []


def test_a_put_that_keeps_failing_is_counted_and_logged_with_the_event_ids(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    wall, blobs, metrics = Wall(T + timedelta(hours=1)), FailingBlobs(10), Metrics(enabled=True)
    archiver, firehose = _carrying(tmp_path, blobs, wall, metrics)
    fresh = _accepted("f1", wall.now)
    archiver.write([_accepted("a1", T), _accepted("a2", T), fresh])
    with caplog.at_level(logging.ERROR):
        assert not archiver.flush()
    assert len(blobs.calls) == 3 and blobs.objects == {}
    text = metrics.prometheus_text()
    assert 'broker_archive_failure_count_total{function="ingress"} 2' in text
    assert 'broker_archive_late_count_total{function="ingress"}' not in text
    assert firehose.records == [fresh]  # the fresh ones are written all the same
    [logged] = [r for r in caplog.records if "late archive object" in r.getMessage()]
    assert logged.__dict__["event_ids"] == ["a1", "a2"]
    assert f"s3://{BUCKET}/archive/2026/03/04/10/late-ingress-" in logged.getMessage()
    assert list(tmp_path.iterdir()) == []  # counted as not archived: not sent again at shutdown


def test_records_without_an_at_and_archivers_that_do_not_carry_are_as_before(
    tmp_path: Path,
) -> None:
    wall, blobs = Wall(T + timedelta(days=1)), MemoryBlobs()
    archiver, firehose = _carrying(tmp_path, blobs, wall)
    archiver.write([b'{"event": {"id": "x"}}\n'])
    assert archiver.flush() and firehose.records == [b'{"event": {"id": "x"}}\n']
    sink = SpooledArchive(
        firehose, lambda role: FileSpool(str(tmp_path), role), late=LateArchive(blobs, BUCKET)
    )
    plain = Archiver(sink, Metrics(enabled=True), "ingress")  # writes before answering
    assert plain.write([_accepted("old", T)])
    assert firehose.records[-1] == _accepted("old", T) and blobs.objects == {}


def test_arrival_reads_the_records_own_at_only() -> None:
    assert late_archive.arrival(_accepted("x", T)) == T
    delivery = archive.delivery_record(
        "ns", "b", "t", "x", "t", "/s", T, 1, 200, "delivered", 1.0, T
    )
    assert late_archive.arrival(archive.encode_line(delivery)) == T
    sneaky = b'{"v":1,"kind":"accepted","event":{"data":{"at":"2020-01-01T00:00:00Z"}}}\n'
    assert late_archive.arrival(sneaky) is None
    assert late_archive.arrival(b'{"v":1,"kind":"x","at":"2026-13-01T00:00:00Z"}') is None
    assert late_archive.arrival(b'{"v":1,"kind":"x","at":"2026-01-01T00:00:00"}') is None  # no zone


def test_an_at_in_another_rfc3339_shape_is_compared_as_a_time() -> None:
    offset = b'{"v":1,"kind":"accepted","at":"2026-03-04T12:59:40.5+02:00"}\n'  # 10:59:40.5Z
    fresh, late = late_archive.split([offset], T + timedelta(seconds=LATE_SECONDS))
    assert fresh == [offset] and late == {}
    fresh, late = late_archive.split([offset], T + timedelta(seconds=LATE_SECONDS + 1))
    assert fresh == [] and late == {datetime(2026, 3, 4, 10, tzinfo=UTC): [offset]}


def test_the_shutdown_extension_applies_the_same_rule() -> None:
    """The extension's own copy (it runs with the standard library only) agrees."""
    records = [
        _accepted("a", T),
        _accepted("b", T + timedelta(minutes=50)),
        _accepted("c", T + timedelta(hours=1, seconds=30)),
        b'{"event": {"id": "no-at"}}\n',
    ]
    now = T + timedelta(hours=1, minutes=1)
    ours = late_archive.split(records, now)
    theirs = extension.split_late(records, now.timestamp())
    assert theirs == (ours[0], {int(h.timestamp()): rs for h, rs in ours[1].items()})
    assert extension.LATE_SECONDS == LATE_SECONDS
    hour = datetime(2026, 3, 4, 10, tzinfo=UTC)
    assert extension.late_key(int(hour.timestamp()), "ingress", "u1") == late_archive.late_key(
        hour, "ingress", "u1"
    )
    assert extension.object_body(records) == late_archive.object_body(records)


def test_the_extension_retries_a_put_with_the_same_key_and_without_a_bucket_uses_firehose(
    tmp_path: Path,
) -> None:
    lines = [_accepted("a", T), _accepted("b", T + timedelta(hours=1))]
    now = (T + timedelta(hours=3)).timestamp()
    keys: list[str] = []

    def flaky(key: str, body: bytes) -> None:
        keys.append(key)
        if len(keys) == 1:
            raise RuntimeError("SlowDown")
        assert [r["event"]["id"] for r in object_records(key, body).records if r]

    (tmp_path / "ingress.1.a.1.carry").write_bytes(b"".join(lines))
    report = extension.drain(
        str(tmp_path), lambda: _unused, 1e12, putter=lambda: flaky, wall=lambda: now
    )
    assert report.late == {"ingress": 2} and report.sent == 2 and report.lost == {}
    assert len(keys) == 3 and keys[0] == keys[2] != keys[1]  # hour 10 retried after hour 11
    assert [hour_of_key(k) for k in keys[:2]] == [
        datetime(2026, 3, 4, 10, tzinfo=UTC),
        datetime(2026, 3, 4, 11, tzinfo=UTC),
    ]

    firehose: list[bytes] = []
    (tmp_path / "ingress.1.a.2.carry").write_bytes(b"".join(lines))
    report = extension.drain(
        str(tmp_path), lambda: _memory(firehose), 1e12, putter=None, wall=lambda: now
    )
    assert firehose == [b"".join(lines)] and report.late == {} and report.sent == 2


def _unused(records: list[bytes]) -> list[bool]:
    raise AssertionError("nothing fresh to send to Firehose")


def _memory(firehose: list[bytes]) -> extension.Sender:
    def send(records: list[bytes]) -> list[bool]:
        firehose.extend(records)
        return [False] * len(records)

    return send


def test_the_container_wires_the_archive_bucket(tmp_path: Path) -> None:
    settings = Settings(
        archive_carry_seconds=1.0, archive_spool_dir=str(tmp_path), archive_bucket="the-bucket"
    )
    container = Container(settings)
    sink = container.archive
    assert isinstance(sink, SpooledArchive) and sink.late is not None
    assert sink.late.bucket == "the-bucket" and sink.late.blobs is container.blobs
