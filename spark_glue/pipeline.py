"""The job's body, shared by both runtimes (``job.py`` on Glue, ``__main__.py`` locally): read the
archive with the explicit schema, deduplicate it once into a checkpointed grain, cut the tables
from that grain and write them, and gather the figures that ``summary.json`` and the report show."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, date, datetime
from functools import partial
from pathlib import Path
from typing import Any

from pyspark import SparkContext, StorageLevel
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from spark_glue import transforms
from spark_glue.schema import CORRUPT_COLUMN, spark_schema

TABLES = (
    "broker_hourly",
    "broker_rejections",
    "broker_event_types",
    "trigger_hourly",
    "event_types",
)
TOP_N = 10


def configure(spark: SparkSession) -> None:
    """Session settings the figures depend on, set by both runtimes."""
    conf = spark.conf
    conf.set("spark.sql.session.timeZone", "UTC")  # hours and dates are UTC, whatever the host
    conf.set("spark.sql.sources.partitionOverwriteMode", "dynamic")  # rewrite only dates we saw
    conf.set("spark.sql.parquet.outputTimestampType", "TIMESTAMP_MICROS")  # not legacy INT96
    # A text that does not fit a datetime pattern is null (then cast), never an exception about
    # what Spark 2's parser would have made of it.
    conf.set("spark.sql.legacy.timeParserPolicy", "CORRECTED")


def read_archive(spark: SparkSession, paths: Sequence[str]) -> DataFrame:
    """Every line under ``paths`` (recursively; ``.gz`` files are decompressed) with the explicit
    schema; lines that do not fit it are kept with ``_corrupt_record`` set."""
    return (
        spark.read.schema(spark_schema())
        .option("mode", "PERMISSIVE")
        .option("columnNameOfCorruptRecord", CORRUPT_COLUMN)
        .option("recursiveFileLookup", "true")
        .json(list(paths))
        .withColumn("path", F.col("_metadata.file_path"))
    )


# An archive key's hour prefix, just before the file name: .../YYYY/MM/DD/HH/<file>
_FILED = re.compile(r"/(\d{4})/(\d{2})/(\d{2})/(\d{2})/[^/]+$")


def with_filed_hours(raw: DataFrame) -> DataFrame:
    """``raw`` with ``filed``: the hour each line's file is filed under, parsed once per file here
    (on the driver, from the files the read listed) and broadcast, instead of cut from the path of
    every line. A file whose key has no hour prefix gets null; so does a line whose path Spark
    spells differently from the listing: ``normalize`` then reads the hour from the line's path."""
    rows = []
    for uri in raw.inputFiles():
        match = _FILED.search(uri)
        if match is None:
            continue
        try:
            year, month, day, hh = (int(g) for g in match.groups())
            hour = datetime(year, month, day, hh, tzinfo=UTC)
        except ValueError:  # not a date: left to the per-line check, which refuses it too
            continue
        # The listing spells local files file:///path; a line's metadata spells them file:/path.
        spellings = {uri, re.sub(r"^file:///", "file:/", uri)}
        rows += [(spelling, hour) for spelling in spellings]
    if not rows:
        return raw
    hours = raw.sparkSession.createDataFrame(rows, f"path string, {transforms.FILED} timestamp")
    return raw.join(F.broadcast(hours), "path", "left")


@dataclass
class Result:
    grain: DataFrame
    tables: dict[str, DataFrame]
    summary: dict[str, Any]

    def release(self) -> None:
        for df in self.tables.values():
            df.unpersist()
        release_grain(self.grain)


def compute(raw: DataFrame, dates: Sequence[str] | None = None) -> Result:
    """Run the transforms. The archive is parsed and deduplicated once, in the job that builds the
    (small, checkpointed) grain; every table and figure is cut from the grain. With ``dates`` (ISO
    days), only records of those dates are kept (incremental runs read a day more than that)."""
    clean = records(raw)
    if dates is not None:
        clean = clean.where(F.col("malformed").isNotNull() | F.col("date").isin(list(dates)))
    grain = cached_grain(clean)  # built here, once, before the concurrent jobs below read it
    tables = {name: getattr(transforms, name)(grain) for name in TABLES}
    for name in _SUMMARISED:  # read again by the summary, then written
        tables[name] = tables[name].persist(StorageLevel.MEMORY_AND_DISK)
    queries = _summary_queries(grain, tables)
    rows = _concurrently({name: partial(_rows, df) for name, df in queries.items()})
    return Result(grain, tables, _summary(rows))


def records(raw: DataFrame) -> DataFrame:
    """One row per record of ``raw`` (malformed lines: one per reason): each file's hour joined,
    normalized, deduplicated."""
    return transforms.deduplicate(transforms.normalize(with_filed_hours(raw)))


def cached_grain(clean: DataFrame) -> DataFrame:
    """The grain of ``clean`` (deduplicated records), built now and held in the executors' memory
    (spilling to disk): small, so as many partitions as cores, by broker, so that every table is
    cut from it with no shuffle.

    It is held as a local checkpoint, not cached. Caching encodes the rows into compressed
    column batches and every later query plans the whole lineage again to find them; the
    checkpoint keeps the rows as they are, and later queries start from it (0.65 s less at 1 M
    records, of 7). The partitioning by broker is kept. Like cached blocks, the checkpoint lives
    on the executors: on Glue, Spark keeps an executor that holds blocks (dynamic allocation's
    ``cachedExecutorIdleTimeout`` is infinite by default), and a lost one fails the run, which
    the next run repeats. (Sorting by kind, so that a table's scan could skip other kinds, cost
    more to build than the scans saved: 0.3 s at 1 M records.)"""
    parallelism = clean.sparkSession.sparkContext.defaultParallelism
    return transforms.grain(clean).repartition(parallelism, *transforms.BROKER).localCheckpoint()


def grain_blocks(grain: DataFrame) -> Any:
    """The (JVM) RDD whose blocks hold a grain from ``cached_grain``."""
    return grain._jdf.queryExecution().logical().rdd()


def release_grain(grain: DataFrame) -> None:
    """Drop the blocks of a grain from ``cached_grain``; the frame cannot be read after this.
    (``unpersist`` does not reach them: a checkpointed frame is not in Spark's cache.)"""
    grain_blocks(grain).unpersist(False)


_SUMMARISED = ("broker_hourly", "broker_rejections", "trigger_hourly", "event_types")


def write(result: Result, out: str) -> None:
    """Parquet tables partitioned by date (one file per date), written concurrently."""

    def writer(name: str, df: DataFrame) -> Callable[[], None]:
        # The tables are small: one task writes one file per date, with no shuffle.
        target = f"{out.rstrip('/')}/{name}"
        return lambda: df.coalesce(1).write.mode("overwrite").partitionBy("date").parquet(target)

    _concurrently({name: writer(name, df) for name, df in result.tables.items()})


def _concurrently(work: dict[str, Callable[[], Any]]) -> dict[str, Any]:
    """Run independent Spark actions from threads of the driver: each small job spends most of
    its time in scheduling and commit, which then overlap (and their tasks share the cores). The
    jobs are named after their work in the Spark UI."""
    context = SparkContext.getOrCreate()

    def named(name: str, fn: Callable[[], Any]) -> Any:
        context.setJobDescription(name)
        return fn()

    with ThreadPoolExecutor(max_workers=len(work) or 1) as pool:
        futures = {name: pool.submit(named, name, fn) for name, fn in work.items()}
        return {name: future.result() for name, future in futures.items()}


def event_types_json(table: DataFrame) -> str:
    """``event_types.json``: the ``event_types`` table rolled up over its dates, for the registry
    (Lambda reads neither Parquet nor Spark). Pass the whole table: a local run has it in
    ``Result.tables``; an incremental Glue run reads back every date written so far."""
    rolled = transforms.rollup_event_types(table).orderBy(*transforms.EVENT_TYPE_KEYS)
    rows = _rows(
        rolled.withColumn("first_seen", _iso("first_seen")).withColumn(
            "last_seen", _iso("last_seen")
        )
    )
    return json.dumps({"event_types": rows}, indent=1, sort_keys=True) + "\n"


def summary_json(summary: dict[str, Any]) -> str:
    return json.dumps(summary, indent=2, sort_keys=True, default=_json_default) + "\n"


def write_local_summary(summary: dict[str, Any], out: Path) -> Path:
    path = out / "summary.json"
    path.write_text(summary_json(summary))
    return path


def _summary_queries(grain: DataFrame, tables: dict[str, DataFrame]) -> dict[str, DataFrame]:
    """What the summary reads. The hourly tables are small enough to bring to the driver whole
    (one row per broker or trigger and hour); the rest is reduced in Spark first, and sorted (and
    cut to the top types) on the driver."""
    return {
        "quality": transforms.quality(grain)
        .withColumn("first", _iso("first_seen"))
        .withColumn("last", _iso("last_seen")),
        "brokers": tables["broker_hourly"].withColumn("hour", _iso("hour")),
        "triggers": tables["trigger_hourly"].withColumn("hour", _iso("hour")),
        "figures": transforms.trigger_figures(grain, []).unionByName(
            transforms.delivery_totals(grain), allowMissingColumns=True
        ),
        "rejections": tables["broker_rejections"]
        .groupBy("reason", "status")
        .agg(F.sum("rejected").alias("rejected")),
        "event_types": tables["event_types"]
        .groupBy("event_type", "event_source")
        .agg(F.sum("events").alias("events")),
    }


def _summary(rows: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """Headline figures, from the rows of ``_summary_queries``."""
    quality, brokers, triggers = rows["quality"], rows["brokers"], rows["triggers"]
    valid = [q for q in quality if q["malformed"] is None]
    by_kind = {q["kind"]: q["records"] for q in valid}
    malformed = {q["malformed"]: q["lines"] for q in quality if q["malformed"] is not None}
    per_trigger = sorted(
        (_rates(f) for f in rows["figures"] if f["trigger"] is not None),
        key=lambda t: (t["namespace"], t["broker"], t["trigger"]),
    )
    overall = next((f for f in rows["figures"] if f["trigger"] is None), None) or {}
    rejections = sorted(
        rows["rejections"], key=lambda r: (-r["rejected"], r["reason"], r["status"])
    )
    top_types = _top_types(rows["event_types"])
    delivery_keys = ("attempts", "delivered", "replies", "retries", "dead_lettered")
    return {
        "schema_version": 1,
        "window": {
            "first": min((q["first"] for q in valid if q["first"]), default=None),
            "last": max((q["last"] for q in valid if q["last"]), default=None),
        },
        "input": {
            "lines": sum(q["lines"] for q in quality),
            "records": sum(by_kind.values()),
            "malformed": sum(malformed.values()),
            "malformed_by_reason": malformed,
            "duplicates": sum(q["duplicates"] or 0 for q in valid),
            "late": sum(q["late"] or 0 for q in valid),
        },
        "ingress": {
            "accepted": by_kind.get("accepted", 0),
            "rejected": by_kind.get("rejected", 0),
            # Events repeated within a broker's dedup window (each counted once however often).
            "duplicated_events": by_kind.get("duplicate", 0),
            "matched": sum(r["matched"] for r in brokers),
            "no_match": sum(r["no_match"] for r in brokers),
            "rejected_by_reason": rejections,
        },
        "delivery": {
            **{k: sum(t[k] for t in per_trigger) for k in (*delivery_keys, "transport_errors")},
            **{k: overall.get(k) for k in _LATENCY_KEYS},
        },
        "brokers": len({(r["namespace"], r["broker"]) for r in brokers}),
        "triggers": len(per_trigger),
        "traffic": _by_hour(brokers, ("accepted", "rejected", "matched", "no_match")),
        "deliveries": _by_hour(triggers, delivery_keys),
        "per_trigger": per_trigger,
        "worst_triggers": _worst(per_trigger),
        "top_event_types": top_types,
        "tables": list(TABLES),
    }


_LATENCY_KEYS = tuple(f"latency_p{round(p * 100)}_ms" for p in transforms.PERCENTILES)


def _rows(df: DataFrame) -> list[dict[str, Any]]:
    return [r.asDict() for r in df.collect()]


def _top_types(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The most frequent event types, with how many sources sent each, from (type, source,
    events) rows."""
    types: dict[str, dict[str, Any]] = {}
    for r in rows:
        t = types.setdefault(r["event_type"], {"event_type": r["event_type"], "events": 0})
        t["events"] += r["events"]
        t["sources"] = t.get("sources", 0) + 1
    return sorted(types.values(), key=lambda t: (-t["events"], t["event_type"]))[:TOP_N]


def _by_hour(rows: list[dict[str, Any]], keys: Sequence[str]) -> list[dict[str, Any]]:
    hours: dict[str, dict[str, Any]] = {}
    for r in rows:
        h = hours.setdefault(r["hour"], {"hour": r["hour"], **dict.fromkeys(keys, 0)})
        for k in keys:
            h[k] += r[k] or 0
    return [hours[h] for h in sorted(hours)]


def _rates(t: dict[str, Any]) -> dict[str, Any]:
    done = t["delivered"] + t["dead_lettered"]
    t["dead_letter_rate"] = t["dead_lettered"] / done if done else 0.0
    t["retry_rate"] = t["retries"] / t["attempts"] if t["attempts"] else 0.0
    return t


def _worst(per_trigger: list[dict[str, Any]], n: int = 5) -> list[dict[str, Any]]:
    """Worst first: most dead-lettered share of finished events, then retries, then slow p99."""
    ranked = sorted(
        (t for t in per_trigger if t["attempts"]),
        key=lambda t: (-t["dead_letter_rate"], -t["retry_rate"], -(t["latency_p99_ms"] or 0.0)),
    )
    return ranked[:n]


def _iso(column: Any) -> Any:
    """Timestamps leave Spark as UTC text: collected datetimes would be in the driver's zone."""
    return F.date_format(column, "yyyy-MM-dd'T'HH:mm:ss.SSS'Z'")


def _json_default(value: Any) -> Any:
    if isinstance(value, date | datetime):
        return value.isoformat()
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")
