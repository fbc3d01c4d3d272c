"""``brokerctl metrics report``: run the metrics job on local PySpark over an archive (a directory,
or an ``s3://`` prefix on the S3 endpoint: the local-mode moto server, LocalStack or AWS) and write
the Parquet tables, ``summary.json``, ``event_types.json`` and ``report.html`` into ``out``."""

from __future__ import annotations

import time
import webbrowser
from pathlib import Path

from brokerctl import output
from brokerctl.client import CliError


class _Steps:
    """One line per stage of the job, with the time since the command started."""

    def __init__(self) -> None:
        self._started = time.monotonic()

    def __call__(self, line: str) -> None:
        output.say(f"[{time.monotonic() - self._started:5.1f}s] {line}")


def run_report(
    archive: str, out: str, endpoint_url: str | None, open_browser: bool = False
) -> Path:
    """Returns the path of ``report.html``; raises ``CliError`` when the archive is missing or
    empty, or the job fails."""
    try:
        from spark_glue import local
    except ImportError as exc:  # pyspark is a development dependency only
        raise CliError(f"the metrics job needs pyspark (make install): {exc}") from exc

    progress = _Steps()
    progress("starting Spark")
    spark = local.session()
    try:
        local.run(archive, out, endpoint_url, spark=spark, progress=progress)
    except FileNotFoundError as exc:
        raise CliError(str(exc)) from exc
    except Exception as exc:  # botocore and Py4J errors: one line for the user, not a trace
        raise CliError(f"the metrics job failed: {type(exc).__name__}: {exc}") from exc
    finally:
        spark.stop()
    report = Path(out).resolve() / "report.html"
    if open_browser:
        webbrowser.open(report.as_uri())
    return report
