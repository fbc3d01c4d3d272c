"""``brokerctl metrics report``: the metrics job over the event archive, as an HTML report.

The work is ``brokerctl.metrics.run_report`` (imported only when the command runs: it needs
Spark, which the other commands do not). Without ``--archive`` the report reads the local-mode
archive on the embedded AWS endpoint.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from brokerctl import output
from brokerctl.client import DEFAULT_URL, CliError

LOCAL_ARCHIVE = "s3://serverless-broker-local-archive/archive/"


def add_metrics_parser(sub: Any) -> None:
    metrics = sub.add_parser("metrics", help="metrics from the event archive")
    verbs = metrics.add_subparsers(dest="verb", metavar="VERB", required=True)
    report = verbs.add_parser("report", help="run the metrics job and write an HTML report")
    report.add_argument(
        "--archive",
        default=None,
        metavar="URI",
        help=f"s3:// or local path of the archive (default: local mode's {LOCAL_ARCHIVE})",
    )
    report.add_argument(
        "--out", default="metrics-report", metavar="DIR", help="output directory (metrics-report)"
    )
    report.add_argument(
        "--endpoint-url",
        default=None,
        metavar="URL",
        help="S3 endpoint (default: AWS_ENDPOINT_URL; for the local archive "
        "http://127.0.0.1:$BROKER_AWS_PORT, port 4566)",
    )
    report.add_argument("--open", action="store_true", help="open the report in a browser")
    report.set_defaults(func=_report)


def report_arguments(args: argparse.Namespace, environ: Any = os.environ) -> dict[str, Any]:
    archive = args.archive or LOCAL_ARCHIVE
    endpoint = args.endpoint_url or environ.get("AWS_ENDPOINT_URL")
    if endpoint is None and args.archive is None:
        endpoint = local_aws_endpoint(getattr(args, "url", None), environ)
    return {
        "archive": archive,
        "out": args.out,
        "endpoint_url": endpoint,
        "open_browser": args.open,
    }


def local_aws_endpoint(url: str | None, environ: Any = os.environ) -> str:
    """The running local broker's AWS endpoint, as its ``/healthz`` reports it (``--url``,
    ``BROKERCTL_URL`` or the default address); else ``BROKER_AWS_PORT`` on loopback."""
    import httpx

    base = (url or environ.get("BROKERCTL_URL") or DEFAULT_URL).rstrip("/")
    try:
        reported = httpx.get(f"{base}/healthz", timeout=5).json().get("awsEndpoint")
    except (httpx.HTTPError, ValueError, AttributeError):
        reported = None
    if isinstance(reported, str) and reported:
        return reported
    return f"http://127.0.0.1:{environ.get('BROKER_AWS_PORT', '4566')}"


def _local_credentials(endpoint: str | None, environ: Any = os.environ) -> None:
    """The embedded endpoint takes any credentials, and a new machine has none: without these
    boto3 stops with NoCredentialsError before asking it anything. Only for loopback."""
    host = (urlparse(endpoint).hostname or "") if endpoint else ""
    if host in ("127.0.0.1", "localhost", "::1"):
        environ.setdefault("AWS_ACCESS_KEY_ID", "local")
        environ.setdefault("AWS_SECRET_ACCESS_KEY", "local")
        environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")


def _report(args: argparse.Namespace) -> int:
    try:
        from brokerctl.metrics import run_report
    except ImportError as exc:
        output.error(f"the metrics report is not available: {exc}")
        return 1
    kw = report_arguments(args)
    _local_credentials(kw["endpoint_url"])
    try:
        result = run_report(kw["archive"], kw["out"], kw["endpoint_url"], kw["open_browser"])
    except CliError as exc:
        output.error(str(exc))
        return exc.exit_code
    if isinstance(result, int) and not isinstance(result, bool):
        return result
    if isinstance(result, (str, Path)):
        output.say(f"Report: {result}")
    return 0
