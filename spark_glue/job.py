"""The AWS Glue entry point (Glue 5.0: Spark 3.5, Python 3.11, Java 17); the only module that
imports ``awsglue``. Reached through ``__main__.py`` with ``--runtime glue`` (a default argument of
the job), never by probing whether ``awsglue`` imports.

Job arguments: ``--archive s3://bucket/archive`` (the prefix holding ``YYYY/MM/DD/HH/``),
``--out s3://bucket/metrics`` and ``--job-bookmark-option job-bookmark-enable``.

Incremental runs. The bookmark (``transformation_ctx="archive"``) yields only the files added
since the last committed run; they tell which dates have new records (the dates of their ``at``).
Those dates are then recomputed whole, from every file under their prefixes and the next day's
(where late records of a date can still be filed), and only their partitions are overwritten
(dynamic partition overwrite). Deduplication and exact percentiles stay correct across runs;
``summary.json`` and ``report.html`` describe the dates of the last run, ``event_types.json`` all
dates. A run that fails commits nothing, and its retry redoes the same dates.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from datetime import date, timedelta
from pathlib import Path
from typing import Any

from pyspark.sql import functions as F

from spark_glue import pipeline, report

ARGUMENTS = ["JOB_NAME", "archive", "out"]
LATE_DAYS = 1  # how far after its date a record can still be filed (Firehose retries ≤ 24 h)


def main(argv: Sequence[str] | None = None) -> None:
    from awsglue.context import GlueContext
    from awsglue.job import Job
    from awsglue.utils import getResolvedOptions
    from pyspark.context import SparkContext

    args = getResolvedOptions(list(sys.argv if argv is None else argv), ARGUMENTS)
    glue = GlueContext(SparkContext.getOrCreate())
    spark = glue.spark_session
    pipeline.configure(spark)
    job = Job(glue)
    job.init(args["JOB_NAME"], args)

    archive, out = args["archive"].rstrip("/"), args["out"].rstrip("/")
    new = glue.create_dynamic_frame.from_options(
        connection_type="s3",
        connection_options={"paths": [archive + "/"], "recurse": True},
        format="json",
        transformation_ctx="archive",  # the bookmark: only files added since the last commit
    )
    dates = touched_dates(new.toDF())
    if dates:
        raw = pipeline.read_archive(spark, [date_glob(archive, dates)])
        result = pipeline.compute(raw, dates=[d.isoformat() for d in dates])
        pipeline.write(result, out)
        result.release()
        summary = {**result.summary, "source": archive, "dates": [d.isoformat() for d in dates]}
        _put(out, "summary.json", pipeline.summary_json(summary), "application/json")
        _put(out, "report.html", report.render(summary), "text/html; charset=utf-8")
        table = spark.read.parquet(f"{out}/event_types")  # every date, not only this run's
        _put(out, "event_types.json", pipeline.event_types_json(table), "application/json")
    job.commit()


def touched_dates(new_records: Any) -> list[date]:
    """The UTC dates of the ``at`` of the new records (malformed ones have none)."""
    if "at" not in new_records.columns:
        return []
    day = F.to_date(F.col("at").cast("string").cast("timestamp"))
    rows = new_records.select(day.alias("d")).where(F.col("d").isNotNull()).distinct().collect()
    return sorted(r.d for r in rows)


def date_glob(archive: str, dates: Sequence[date]) -> str:
    """One path matching the prefixes of ``dates`` and of the days after (late records)."""
    days = sorted({d + timedelta(days=k) for d in dates for k in range(LATE_DAYS + 1)})
    return f"{archive}/{{{','.join(f'{d:%Y/%m/%d}' for d in days)}}}"


def _put(out: str, name: str, body: str, content_type: str) -> None:
    """Small documents next to the tables (boto3 ships with Glue); a local ``out`` is a
    directory (the tests run this module against a stand-in for awsglue)."""
    if not out.startswith("s3://"):
        target = Path(out.removeprefix("file://")) / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(body, encoding="utf-8")
        return
    import boto3

    bucket, _, prefix = out.removeprefix("s3://").partition("/")
    key = f"{prefix}/{name}" if prefix else name
    boto3.client("s3").put_object(
        Bucket=bucket, Key=key, Body=body.encode(), ContentType=content_type
    )
