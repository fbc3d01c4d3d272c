"""The local runtime: a local SparkSession, and an S3 archive copied to a staging directory first
(local Spark has no S3 connector here; on Glue the job reads ``s3://`` directly)."""

from __future__ import annotations

import gzip
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from pyspark.sql import SparkSession

from spark_glue import pipeline, report

_GZIP_MAGIC = b"\x1f\x8b"
_LOG_CONFIG = Path(__file__).with_name("log4j2-local.properties")

Progress = Callable[[str], None]


def _silent(line: str) -> None:
    pass


@dataclass(frozen=True)
class LocalOptions:
    master: str = "local[2]"
    driver_memory: str = "4g"
    shuffle_partitions: int = 8
    max_partition_bytes: str = "64m"


def session(options: LocalOptions = LocalOptions()) -> SparkSession:
    # A local run binds to loopback: without this Spark warns that the host name resolves to
    # 127.0.0.1 and picks another interface, which a laptop on a train may not have.
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    # Python workers run this interpreter (PySpark's default is whatever `python3` is on PATH,
    # which need not be the driver's version: PySpark refuses to run across minor versions).
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = (
        SparkSession.builder.master(options.master)
        .appName("serverless-broker-metrics")
        .config("spark.driver.memory", options.driver_memory)
        # The throughput collector: a batch job on two cores has no pauses to keep short, and
        # G1's concurrent work competes with the tasks for them (5-10 % of the job's time).
        # The log configuration is read before the session exists, so it goes on the JVM's
        # command line: errors only, none of Spark's start-up warnings.
        .config(
            "spark.driver.extraJavaOptions",
            f"-XX:+UseParallelGC -Dlog4j2.configurationFile={_LOG_CONFIG.as_uri()}",
        )
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", str(options.shuffle_partitions))
        # One machine, one small job: adaptive execution re-plans each of a run's ~20 queries
        # (~20 ms each) to balance partitions that are already few and even (6 % of the job's
        # time at 1 M records). Glue keeps its default (on): there it pays for skew and joins.
        .config("spark.sql.adaptive.enabled", "false")
        .config("spark.sql.files.maxPartitionBytes", options.max_partition_bytes)
        .config("spark.sql.session.timeZone", "UTC")
        # Exact percentiles per trigger and hour keep one buffer per group: hundreds of groups
        # fit in memory, and the default (128) would sort every row first.
        .config("spark.sql.objectHashAggregate.sortBased.fallbackThreshold", "10000")
        # One run generates ~150 classes; the default cache (100) evicts them before the next
        # run in the same JVM, which then compiles them all again and the JIT starts over.
        .config("spark.sql.codegen.cache.maxEntries", "1000")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    pipeline.configure(spark)
    return spark


def run(
    archive: str,
    out: str | Path,
    endpoint_url: str | None = None,
    options: LocalOptions = LocalOptions(),
    spark: SparkSession | None = None,
    progress: Progress = _silent,
) -> dict[str, Any]:
    """Compute the metrics of ``archive`` (a directory or ``s3://bucket/prefix``) into ``out``:
    the Parquet tables, ``summary.json`` and ``report.html``. Returns the summary. ``progress``
    gets one line as each stage starts (the CLI prints them; Spark's own console bar is off)."""
    out_dir = Path(out).resolve()
    out_dir.mkdir(parents=True, exist_ok=True)
    with _local_archive(archive, endpoint_url, progress) as directory:
        if spark is None:
            progress("starting Spark")
            spark = session(options)
        started = time.monotonic()
        progress("reading, deduplicating and aggregating the archive")
        result = pipeline.compute(pipeline.read_archive(spark, [str(directory)]))
        progress(f"writing the tables to {out_dir}")
        pipeline.write(result, str(out_dir))
        types_json = pipeline.event_types_json(result.tables["event_types"])
        result.release()
    (out_dir / "event_types.json").write_text(types_json)
    summary = {**result.summary, "source": archive, "seconds": round(time.monotonic() - started, 3)}
    pipeline.write_local_summary(summary, out_dir)
    progress("rendering the report")
    (out_dir / "report.html").write_text(report.render(summary), encoding="utf-8")
    return summary


@contextmanager
def _local_archive(
    archive: str, endpoint_url: str | None, progress: Progress = _silent
) -> Iterator[Path]:
    if not archive.startswith("s3://"):
        path = Path(archive)
        if not path.is_dir():
            raise FileNotFoundError(f"archive directory not found: {archive}")
        yield path
        return
    with tempfile.TemporaryDirectory(prefix="archive-staging-") as staging:
        progress(f"copying {archive} from {endpoint_url or 'S3'}")
        count = stage_s3(archive, Path(staging), endpoint_url)
        if not count:
            raise FileNotFoundError(f"no objects under {archive}")
        progress(f"copied {count} archive file(s)")
        yield Path(staging)


def stage_s3(uri: str, staging: Path, endpoint_url: str | None = None) -> int:
    """Copy every object under ``s3://bucket/prefix`` into ``staging``, keeping the key layout.
    A gzip object whose key lacks ``.gz`` gets it, so that Spark decompresses it. The client
    honours ``AWS_ENDPOINT_URL`` (moto, LocalStack) unless ``endpoint_url`` is given."""
    import boto3

    parsed = urlparse(uri)
    bucket, prefix = parsed.netloc, parsed.path.lstrip("/")
    client = boto3.client("s3", endpoint_url=endpoint_url) if endpoint_url else boto3.client("s3")
    count = 0
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        for obj in page.get("Contents", []):
            key = obj["Key"]
            if key.endswith("/"):
                continue
            target = staging / key
            target.parent.mkdir(parents=True, exist_ok=True)
            body = client.get_object(Bucket=bucket, Key=key)["Body"]
            with open(target, "wb") as fh:
                shutil.copyfileobj(body, fh)
            if not key.endswith(".gz") and _is_gzip(target):
                target.rename(target.with_name(target.name + ".gz"))
            count += 1
    return count


def _is_gzip(path: Path) -> bool:
    with open(path, "rb") as fh:
        if fh.read(2) != _GZIP_MAGIC:
            return False
    try:
        with gzip.open(path) as gz:
            gz.read(1)
    except OSError:
        return False
    return True
