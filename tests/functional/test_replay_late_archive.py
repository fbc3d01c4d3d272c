"""A replay finds an event whose archive record was carried by a container that then sat idle:
written late, it lands in an object of the hour it arrived in (services/late_archive.py), where
the replay of its range looks. Without that, Firehose files it under the hour it received it, and
the same replay misses it (the second test: what the first one guards against)."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path

from chalicelib.adapters.archive_spool import FileSpool
from chalicelib.core.archive_reader import hour_of_key, object_records
from chalicelib.core.clock import utcnow
from chalicelib.services.archiver import SpooledArchive, flush_all
from chalicelib.services.late_archive import LateArchive
from tests.functional.harness import Harness
from tests.functional.replay_support import drain, flush_archive, harness, put_replay, window


class Wall:
    """The time the archiver sees when it writes: real time, moved on by ``idle``."""

    def __init__(self) -> None:
        self.offset = timedelta()

    def __call__(self) -> datetime:
        return utcnow() + self.offset


def _carrying(tmp_path: Path, late: bool) -> tuple[Harness, Wall]:
    h = harness(archive_carry_seconds=3600.0)  # a warm container carries its archive records
    wall = Wall()
    late_archive = LateArchive(h.blobs, h.settings.archive_bucket, clock=wall) if late else None
    h.container.archive = SpooledArchive(
        h.archive, lambda role: FileSpool(str(tmp_path), role), late=late_archive
    )
    h.broker()
    h.trigger("a")
    return h, wall


def _hour(at: str) -> datetime:
    return datetime.fromisoformat(at).replace(minute=0, second=0, microsecond=0)


def _ingest_one(h: Harness) -> tuple[datetime, datetime]:
    start, _ = window()
    assert h.send(id_="carried").status == 202
    _, end = window()
    assert [m["event"]["id"] for m in drain(h, "a")] == ["carried"]  # delivered live
    assert h.archive.records == []  # carried: not written yet
    return start, end


def test_a_record_written_an_hour_late_is_found_by_a_replay_of_its_range(tmp_path: Path) -> None:
    h, wall = _carrying(tmp_path, late=True)
    start, end = _ingest_one(h)
    wall.offset = timedelta(hours=1)  # the container sat idle for an hour
    flush_all()  # its next invocation (or its shutdown) writes what it carried

    assert h.archive.records == []  # not through Firehose
    [((_, key), blob)] = h.blobs.objects.items()
    [record] = object_records(key, blob).records
    assert record is not None and hour_of_key(key) == _hour(record["at"])  # its arrival's hour
    assert "/late-ingress-" in key
    put_replay(h, "catch-up", start, end)
    assert h.container.replay_runner.run("ns", "default", "catch-up", 10.0)
    replayed = drain(h, "a")
    assert [m["event"]["id"] for m in replayed] == ["carried"]
    assert replayed[0]["event"]["replayname"] == "catch-up"


def test_without_it_firehose_files_the_record_late_and_the_replay_misses_it(
    tmp_path: Path,
) -> None:
    h, _ = _carrying(tmp_path, late=False)
    start, end = _ingest_one(h)
    flush_all()
    [line] = h.archive.records
    arrival = datetime.fromisoformat(json.loads(line)["at"])
    # Firehose receives it two hours on (two: an hour on from a quarter to the hour would still
    # be in the hour after ``to`` that replays read) and files it under that hour.
    key = flush_archive(h, at=arrival + timedelta(hours=2))
    assert hour_of_key(key) == _hour(json.loads(line)["at"]) + timedelta(hours=2)
    put_replay(h, "catch-up", start, end)
    assert h.container.replay_runner.run("ns", "default", "catch-up", 10.0)
    assert drain(h, "a") == []
