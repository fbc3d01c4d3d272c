"""The Glue entry point, against a stand-in for ``awsglue`` (not installable outside Glue): a
GlueContext whose S3 source honours a job bookmark the way Glue does (files already committed are
not returned again), so the incremental path is exercised: the first run takes every file, a
second run only the new one, yet recomputes its whole date, so the figures stay exact."""

from __future__ import annotations

import json
import sys
import types
from pathlib import Path
from typing import Any

import pytest

from chalicelib.core import archive
from spark_glue import __main__ as entry
from tests.spark import sample_archive as sample

pytestmark = pytest.mark.spark


class _Bookmark:
    def __init__(self) -> None:
        self.committed: set[str] = set()
        self.pending: set[str] = set()
        self.commits = 0
        self.args: dict[str, str] = {}


def _fake_awsglue(spark: Any, bookmark: _Bookmark) -> dict[str, types.ModuleType]:
    class DynamicFrame:
        def __init__(self, df: Any) -> None:
            self._df = df

        def toDF(self) -> Any:
            return self._df

    class GlueContext:
        def __init__(self, sc: Any) -> None:
            self.spark_session = spark
            self.create_dynamic_frame = self

        def from_options(self, connection_type, connection_options, format, transformation_ctx):
            assert (connection_type, format, transformation_ctx) == ("s3", "json", "archive")
            assert connection_options["recurse"] is True
            root = Path(connection_options["paths"][0])
            files = {str(p) for p in root.rglob("*") if p.is_file()} - bookmark.committed
            bookmark.pending = files
            if not files:
                return DynamicFrame(spark.createDataFrame([], "at string"))
            return DynamicFrame(spark.read.schema("at string").json(sorted(files)))

    class Job:
        def __init__(self, glue: GlueContext) -> None:
            self.glue = glue

        def init(self, name: str, args: dict[str, str]) -> None:
            bookmark.args = args

        def commit(self) -> None:
            bookmark.committed |= bookmark.pending
            bookmark.commits += 1

    def getResolvedOptions(argv: list[str], names: list[str]) -> dict[str, str]:
        pairs = dict(zip(argv[1::2], argv[2::2], strict=False))
        return {n: pairs[f"--{n}"] for n in names}

    names = ("awsglue", "awsglue.context", "awsglue.job", "awsglue.utils")
    modules = {name: types.ModuleType(name) for name in names}
    modules["awsglue.context"].GlueContext = GlueContext  # type: ignore[attr-defined]
    modules["awsglue.job"].Job = Job  # type: ignore[attr-defined]
    modules["awsglue.utils"].getResolvedOptions = getResolvedOptions  # type: ignore[attr-defined]
    return modules


@pytest.fixture
def glue(spark: Any, monkeypatch: pytest.MonkeyPatch) -> _Bookmark:
    bookmark = _Bookmark()
    for name, module in _fake_awsglue(spark, bookmark).items():
        monkeypatch.setitem(sys.modules, name, module)
    return bookmark


def _hourly(spark: Any, out: Path) -> dict[tuple[str, int], int]:
    rows = spark.read.parquet(str(out / "broker_hourly")).collect()
    return {(r.broker, r.hour.hour): r.accepted for r in rows}


def test_incremental_runs_recompute_touched_dates(
    spark: Any, glue: _Bookmark, tmp_path: Path
) -> None:
    source = sample.write(tmp_path / "bucket") / "archive"
    out = tmp_path / "metrics"
    argv = ["--JOB_NAME", "metrics", "--archive", str(source), "--out", str(out),
            "--job-bookmark-option", "job-bookmark-enable"]  # fmt: skip

    assert entry.main(["--runtime", "glue", *argv]) == 0
    assert glue.commits == 1 and glue.args["JOB_NAME"] == "metrics"
    first = json.loads((out / "summary.json").read_text())
    assert first["dates"] == ["2024-05-01"]
    assert first["input"]["records"] == sample.RECORDS
    assert _hourly(spark, out)[("b1", 10)] == 5
    assert "<svg" in (out / "report.html").read_text()

    # A new file: one more event at 10:45 and yet another copy of e1, which must not count.
    extra = sample.acc("e8", sample.A, sample.S1, [], 1, sample.at(10, 45))
    new = source / "2024/05/01/11/stream-1-2024-05-01-11-00-00-c"
    new.parent.mkdir(parents=True)
    new.write_bytes(archive.encode_lines([extra, sample.HOUR10[0]]))
    assert entry.main(["--runtime", "glue", *argv]) == 0
    assert glue.commits == 2
    assert _hourly(spark, out) == {("b1", 10): 6, ("b1", 11): 0, ("b1", 12): 1, ("b2", 12): 1}
    types_doc = json.loads((out / "event_types.json").read_text())["event_types"]
    assert {(t["broker"], t["event_type"]): t["events"] for t in types_doc} == {
        ("b1", sample.A): 5,
        ("b1", sample.B): 2,
        ("b2", sample.C): 1,
    }

    # Nothing new: nothing recomputed, the bookmark still committed.
    (out / "summary.json").unlink()
    assert entry.main(["--runtime", "glue", *argv]) == 0
    assert glue.commits == 3 and not (out / "summary.json").exists()


def test_date_glob_covers_the_next_day_for_late_records() -> None:
    from datetime import date

    from spark_glue import job

    glob = job.date_glob("s3://b/archive", [date(2024, 5, 1), date(2024, 5, 31)])
    assert glob == "s3://b/archive/{2024/05/01,2024/05/02,2024/05/31,2024/06/01}"
