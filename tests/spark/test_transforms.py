"""The transforms on a local SparkSession, over the hand-built archive of ``sample_archive``: every
figure below was worked out by hand there (late, duplicate and malformed records, retries and
dead letters, and an hour with no traffic)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import functions as F

from spark_glue import pipeline, schema, transforms
from tests.spark import sample_archive as sample

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def archive_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return sample.write(tmp_path_factory.mktemp("archive"))


@pytest.fixture(scope="module")
def result(spark: Any, archive_dir: Path) -> Any:
    res = pipeline.compute(pipeline.read_archive(spark, [str(archive_dir)]))
    yield res
    res.release()


def _utc(value: datetime) -> datetime:
    # Spark hands timestamps to Python as naive local time; the tests compare instants.
    return value.astimezone(UTC) if value.tzinfo else value.replace(tzinfo=UTC)


def _hour(value: datetime) -> int:
    return _utc(value).hour


def test_the_archive_is_read_with_the_explicit_schema(spark: Any, archive_dir: Path) -> None:
    raw = pipeline.read_archive(spark, [str(archive_dir)])
    assert [f.name for f in raw.schema.fields][:-1] == schema.spark_schema().fieldNames()
    assert raw.count() == sample.LINES  # gzip file included, every line (malformed too) kept


def test_the_hour_each_file_is_filed_under_is_joined_once_per_file(
    spark: Any, archive_dir: Path
) -> None:
    """Every line gets its file's hour (parsed on the driver, not per line), and the late flag it
    gives is the one the per-line path check gives: the sample's one late record, and no other."""
    raw = pipeline.read_archive(spark, [str(archive_dir)])
    joined = pipeline.with_filed_hours(raw)
    assert joined.where(F.col(transforms.FILED).isNull()).count() == 0
    filed = {(r.path.split("/archive/")[1][:13], _hour(r.filed)) for r in joined.collect()}
    assert {(prefix, int(prefix[-2:])) for prefix, _ in filed} == filed

    def late(df: Any) -> list[tuple[Any, ...]]:
        rows = transforms.normalize(df).select("kind", "event_id", "attempt", "at", "late")
        return sorted(tuple(r) for r in rows.collect() if r.late)

    assert late(joined) == late(raw)
    assert [(kind, event_id) for kind, event_id, *_ in late(joined)] == [("accepted", "e4")]


def test_a_path_the_listing_does_not_know_takes_the_per_line_check(spark: Any) -> None:
    """Without a filed hour (a path spelt another way, a key with no hour prefix) the hour comes
    from the line's own path; a path that is not an hour prefix never makes a line late."""
    record = sample.acc("e1", sample.A, sample.S1, [], 10, sample.at(9, 59, 59, 999))
    paths = ["s3://b/archive/2024/05/01/10/f", "s3://b/archive/2024/05/01/09/f", "s3://b/x/f"]
    raw = spark.createDataFrame(
        [(*(record.get(f.name) for f in schema.spark_schema().fields[:-1]), None, p, None)
         for p in paths],
        schema.spark_schema().add("path", "string").add(transforms.FILED, "timestamp"),
    )  # fmt: skip
    rows = transforms.normalize(raw).collect()
    assert [r.late for r in rows] == [1, 0, 0]


def test_broker_hourly_is_dense_and_counts_each_event_once(result: Any) -> None:
    rows = result.tables["broker_hourly"].collect()
    got = {
        (r.broker, _hour(r.hour)): {k: r[k] for k in sample.BROKER_HOURLY[("b1", 10)]} for r in rows
    }
    assert got == sample.BROKER_HOURLY
    assert {str(r.date) for r in rows} == {"2024-05-01"}


def test_rejections_by_reason_and_status(result: Any) -> None:
    got = {
        (r.broker, _hour(r.hour), r.reason, r.status): r.rejected
        for r in result.tables["broker_rejections"].collect()
    }
    assert got == sample.REJECTIONS


def test_trigger_hourly_outcomes_and_exact_latency_percentiles(result: Any) -> None:
    rows = result.tables["trigger_hourly"].collect()
    got = {(r.trigger, _hour(r.hour)): r.asDict() for r in rows}
    assert set(got) == set(sample.TRIGGER_HOURLY)
    for key, expected in sample.TRIGGER_HOURLY.items():
        for name, value in expected.items():
            assert got[key][name] == (pytest.approx(value) if value is not None else None), (
                key,
                name,
            )


def test_event_types_per_broker_with_first_and_last_seen(result: Any) -> None:
    per_hour = {
        (r.broker, _hour(r.hour), r.event_type, r.event_source): r.events
        for r in result.tables["broker_event_types"].collect()
    }
    assert per_hour == sample.BROKER_EVENT_TYPES
    types = {
        (r.broker, r.event_type, r.event_source): (_utc(r.first_seen), _utc(r.last_seen), r.events)
        for r in result.tables["event_types"].collect()
    }
    assert types == sample.EVENT_TYPES


def test_summary_counts_malformed_duplicates_and_late_records(result: Any) -> None:
    s = result.summary
    assert s["input"]["malformed_by_reason"] == sample.MALFORMED_BY_REASON
    assert {k: s["input"][k] for k in sample.SUMMARY_INPUT} == sample.SUMMARY_INPUT
    assert s["ingress"]["accepted"] == 7
    assert s["ingress"]["rejected"] == 4
    assert s["ingress"]["matched"] == 5
    assert s["ingress"]["no_match"] == 2
    for name, value in sample.DELIVERY.items():
        assert s["delivery"][name] == pytest.approx(value), name
    assert s["window"] == {"first": "2024-05-01T10:00:00.000Z", "last": "2024-05-01T12:30:00.000Z"}
    assert [t["hour"][11:13] for t in s["traffic"]] == ["10", "11", "12"]
    assert s["traffic"][1] == {
        "hour": "2024-05-01T11:00:00.000Z", "accepted": 0, "rejected": 0, "matched": 0,
        "no_match": 0,
    }  # fmt: skip
    worst = s["worst_triggers"][0]
    assert (worst["trigger"], worst["dead_lettered"], worst["dead_letter_rate"]) == ("t1", 1, 0.2)
    assert s["top_event_types"][0] == {"event_type": sample.A, "events": 4, "sources": 1}
    pipeline.summary_json(s)  # serialisable


def test_deduplication_keeps_the_earliest_copy(spark: Any) -> None:
    """Two copies of one attempt that differ (a writer retried after a timeout): one record, the
    earlier one's values; a different attempt of the same event stays apart."""
    first = sample.dlv("t1", "e9", sample.A, sample.S1, sample.at(9, 0), 1, 503, "retry", 1.0,
                       sample.at(9, 0, 1))  # fmt: skip
    later = {**first, "at": "2024-05-01T09:00:02.000Z", "status": 200, "outcome": "delivered"}
    other = {**first, "attempt": 2, "at": "2024-05-01T09:00:03.000Z"}
    raw = spark.createDataFrame(
        [(*(r.get(f.name) for f in schema.spark_schema().fields[:-1]), None, "p")
         for r in (later, first, other)],
        schema.spark_schema().add("path", "string"),
    )  # fmt: skip
    clean = transforms.deduplicate(transforms.normalize(raw))
    rows = sorted(clean.collect(), key=lambda r: r.attempt)
    assert [(r.attempt, r.copies, r.status, r.outcome) for r in rows] == [
        (1, 2, 503, transforms.OUTCOME_CODE["retry"]),
        (2, 1, 503, transforms.OUTCOME_CODE["retry"]),
    ]


def test_rollup_of_event_types_over_dates(spark: Any, result: Any) -> None:
    table = result.tables["event_types"]
    doubled = table.unionByName(table)  # the same figures on a second date roll up as sums
    rolled = {
        (r.broker, r.event_type): r.events for r in transforms.rollup_event_types(doubled).collect()
    }
    assert rolled == {("b1", sample.A): 8, ("b1", sample.B): 4, ("b2", sample.C): 2}


def test_utc_timestamps_take_the_fast_path_with_the_same_instant(spark: Any) -> None:
    """The writer's shape is parsed with its fixed pattern; every other form (offsets, no date,
    stray spaces, other precisions) takes the general cast: both give what a plain cast gives."""
    texts = [
        "2024-05-01T10:00:00.123Z", "2024-05-01T10:00:00Z", "2024-05-01T10:00:00.123456Z",
        "2024-05-01 10:00:00Z", "2024-5-1T1:0:0Z", "2024-05-01T10:00:00.123+02:00",
        "2024-05-01T23:30:00-05:00", "T10:00:00Z", "10:00:00Z", " 2024-05-01T10:00:00Z ",
        "2024-05-01T10:00:00.123 Z", "2024-05-01T25:00:00Z", "2024-05-01Z", "Z", "not a time", None,
        "2024-05-01TZ", "2024-05-01T10Z", "2024-05-01T10:00Z", "2024-05-01T10:00:00ZZ",
        "2024-05-01T10:00:00.Z", "2024-05-01T10:00:00.1234567Z", "2024-05-01T10:00:00.123z",
        "+2024-05-01T10:00:00Z", "12024-05-01T10:00:00Z", "2024-05-01t10:00:00Z",
        "2024-05-01T10:00:00.12:3Z", "2024-02-30T10:00:00Z", "2024-05-01T10:60:00Z",
        "2024-02-30T10:00:00.123Z", "2024-05-01T10:00:00.1Z", "2024-05-01T10:00:00.1234Z",
        "2024-05-01T10:00:00.123+02", "2024-05-01T10:00:00.123+0200",
        "2024-05-01T10:00:00.123-05:30",
        "2024-05-01T10:00:00.123z", "2024-05-01T10:00:00.123Z ", "0001-01-01T00:00:00.000Z",
        "9999-12-31T23:59:59.999Z", "2024-05-01T24:00:00.000Z", "1970-01-01T00:00:00.000Z",
        "2024-05-01t10:00:00.123Z", "2024-05-01T10:00:00.123Zz", "2024-05-01T10:00:00.123ZZ",
    ]  # fmt: skip
    df = spark.createDataFrame([(t,) for t in texts], "t string")
    both = df.select(
        "t",
        F.unix_micros(transforms._timestamp(F.col("t"))).alias("fast"),
        F.unix_micros(F.col("t").cast("timestamp")).alias("cast"),
    ).collect()
    assert [(r.t, r.fast) for r in both] == [(r.t, r.cast) for r in both]
    assert both[0].fast == 1714557600123000


def test_every_table_is_cut_from_the_cached_grain_without_a_shuffle(result: Any) -> None:
    """The grain is checkpointed partitioned by broker, and every table groups by broker first:
    each table's plan starts from the checkpoint and holds no exchange (a broken key or
    partitioning shows here)."""
    for name, table in result.tables.items():
        plan = table._jdf.queryExecution().executedPlan().toString()
        assert "Scan ExistingRDD" in plan, name
        assert "Exchange" not in plan, (name, plan)


def test_release_drops_the_grain_and_the_held_tables(spark: Any, archive_dir: Path) -> None:
    """The grain is a local checkpoint, which ``unpersist`` does not reach: ``release`` drops its
    blocks (and the held tables), so a process running many jobs does not keep every grain."""
    res = pipeline.compute(pipeline.read_archive(spark, [str(archive_dir)]))
    grain_rdd = pipeline.grain_blocks(res.grain).id()

    def held() -> set[int]:
        return {info.id() for info in spark.sparkContext._jsc.sc().getRDDStorageInfo()}

    assert grain_rdd in held()
    assert any(df.is_cached for df in res.tables.values())
    res.release()
    assert grain_rdd not in held()
    assert not any(df.is_cached for df in res.tables.values())


def test_copies_meet_whatever_partitions_they_are_read_in(spark: Any) -> None:
    """Copies of one record read by different tasks are still merged (the lines are shuffled by
    a hash of dimensions every copy shares), and the merge keeps the earliest copy."""
    first = sample.dlv("t1", "e9", sample.A, sample.S1, sample.at(9, 0), 1, 503, "retry", 1.0,
                       sample.at(9, 0, 1))  # fmt: skip
    later = [{**first, "at": f"2024-05-01T09:00:0{s}.000Z", "status": 200 + s} for s in (2, 3, 4)]
    lines = [*later, first, *later]
    raw = spark.createDataFrame(
        [(*(r.get(f.name) for f in schema.spark_schema().fields[:-1]), None, f"p{i}")
         for i, r in enumerate(lines)],
        schema.spark_schema().add("path", "string"),
    ).repartition(len(lines))  # fmt: skip
    rows = transforms.deduplicate(transforms.normalize(raw)).collect()
    assert [(r.copies, r.status) for r in rows] == [(len(lines), 503)]


def test_top_event_types_break_ties_by_name() -> None:
    rows = [
        {"event_type": "b", "event_source": "/1", "events": 2},
        {"event_type": "a", "event_source": "/1", "events": 1},
        {"event_type": "a", "event_source": "/2", "events": 1},
        {"event_type": "c", "event_source": "/1", "events": 5},
    ]
    assert pipeline._top_types(rows) == [
        {"event_type": "c", "events": 5, "sources": 1},
        {"event_type": "a", "events": 2, "sources": 2},
        {"event_type": "b", "events": 2, "sources": 1},
    ]


def test_duplicate_records_are_valid_and_counted_without_changing_a_table(
    spark: Any, tmp_path: Path
) -> None:
    """``duplicate`` records (docs/dedup.md) are neither malformed nor accepted events: the
    summary counts the events that were repeated (each once), every table stays as it was."""
    from chalicelib.core import archive

    root = sample.write(tmp_path)
    repeats = [
        archive.duplicate_record("ns", "b1", "e1", sample.A, sample.S1, sample.at(10, 5)),
        archive.duplicate_record("ns", "b1", "e1", sample.A, sample.S1, sample.at(10, 6)),
        archive.duplicate_record("ns", "b1", "e2", sample.B, sample.S1, sample.at(10, 7)),
    ]
    extra = root / "archive/2024/05/01/10/duplicates"
    extra.write_bytes(archive.encode_lines(repeats))
    res = pipeline.compute(pipeline.read_archive(spark, [str(root)]))
    try:
        s = res.summary
        assert s["ingress"]["duplicated_events"] == 2
        assert s["ingress"]["accepted"] == 7
        assert s["input"]["malformed_by_reason"] == sample.MALFORMED_BY_REASON
        rows = res.tables["broker_hourly"].collect()
        got = {
            (r.broker, _hour(r.hour)): {k: r[k] for k in sample.BROKER_HOURLY[("b1", 10)]}
            for r in rows
        }
        assert got == sample.BROKER_HOURLY
    finally:
        res.release()
