"""The job's body, shared by both runtimes (``job.py`` on Glue, ``__main__.py`` locally): read the
archive with the explicit schema, run the transforms once over a cached, deduplicated frame, write
the tables, and gather the figures that ``summary.json`` and the report show."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, datetime
from pathlib import Path
from typing import Any

from pyspark import StorageLevel
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


@dataclass
class Result:
    grain: DataFrame
    tables: dict[str, DataFrame]
    summary: dict[str, Any]

    def release(self) -> None:
        for df in (self.grain, *self.tables.values()):
            df.unpersist()


def compute(raw: DataFrame, dates: Sequence[str] | None = None) -> Result:
    """Run the transforms. The archive is parsed and deduplicated once, in the job that builds the
    (small, cached) grain; every table and figure is cut from the grain. With ``dates`` (ISO
    days), only records of those dates are kept (incremental runs read a day more than that)."""
    clean = transforms.deduplicate(transforms.normalize(raw))
    if dates is not None:
        clean = clean.where(F.col("malformed").isNotNull() | F.col("date").isin(list(dates)))
    grain = transforms.grain(clean)
    # The grain is small: as many partitions as cores keeps the many little jobs cut from it
    # from paying for idle tasks (locally, per-job overhead is most of their cost).
    parallelism = raw.sparkSession.sparkContext.defaultParallelism
    grain = grain.coalesce(parallelism).persist(StorageLevel.MEMORY_AND_DISK)
    tables = {name: getattr(transforms, name)(grain) for name in TABLES}
    for name in _SUMMARISED:  # read again by the summary, then written
        tables[name] = tables[name].persist(StorageLevel.MEMORY_AND_DISK)
    return Result(grain, tables, _summary(grain, tables))


_SUMMARISED = ("broker_hourly", "broker_rejections", "trigger_hourly", "event_types")


def write(result: Result, out: str) -> None:
    """Parquet tables partitioned by date (one file per date)."""
    for name, df in result.tables.items():
        # The tables are small and cached: one task writes one file per date, with no shuffle.
        df.coalesce(1).write.mode("overwrite").partitionBy("date").parquet(
            f"{out.rstrip('/')}/{name}"
        )


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


def _summary(grain: DataFrame, tables: dict[str, DataFrame]) -> dict[str, Any]:
    """Headline figures. The hourly tables are small enough to bring to the driver whole (one row
    per broker or trigger and hour); the rest is reduced in Spark first."""
    quality = _rows(
        transforms.quality(grain)
        .withColumn("first", _iso("first_seen"))
        .withColumn("last", _iso("last_seen"))
    )
    valid = [q for q in quality if q["malformed"] is None]
    by_kind = {q["kind"]: q["records"] for q in valid}
    malformed = {q["malformed"]: q["lines"] for q in quality if q["malformed"] is not None}
    brokers = _rows(tables["broker_hourly"].withColumn("hour", _iso("hour")))
    triggers = _rows(tables["trigger_hourly"].withColumn("hour", _iso("hour")))
    figures = _rows(
        transforms.trigger_figures(grain, []).unionByName(
            transforms.delivery_totals(grain), allowMissingColumns=True
        )
    )
    per_trigger = sorted(
        (_rates(f) for f in figures if f["trigger"] is not None),
        key=lambda t: (t["namespace"], t["broker"], t["trigger"]),
    )
    overall = next((f for f in figures if f["trigger"] is None), None) or {}
    rejections = _rows(
        tables["broker_rejections"]
        .groupBy("reason", "status")
        .agg(F.sum("rejected").alias("rejected"))
        .orderBy(F.desc("rejected"), "reason", "status")
    )
    top_types = _rows(
        tables["event_types"]
        .groupBy("event_type")
        .agg(F.sum("events").alias("events"), F.countDistinct("event_source").alias("sources"))
        .orderBy(F.desc("events"), "event_type")
        .limit(TOP_N)
    )
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
