"""The local entry point end to end, as a user runs it (a subprocess): on a local directory, on an
``s3://`` archive in a moto server (staged first; a gzip object without ``.gz``, as Firehose may
name them), and on the archive the local runtime itself wrote (``brokerctl metrics report``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import duckdb
import httpx
import pytest

from tests.spark import sample_archive as sample

pytestmark = pytest.mark.spark
ROOT = Path(__file__).resolve().parents[2]


def _run(
    *args: str, env: dict[str, str] | None = None, timeout: float = 180, bare: bool = False
) -> str:
    """``bare``: as on a new machine, no AWS credentials or endpoint in the environment."""
    base = {k: v for k, v in os.environ.items() if not (bare and k.startswith("AWS_"))}
    proc = subprocess.run(
        [sys.executable, *args],
        cwd=ROOT,
        env={**base, **(env or {})},
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # Local runs are quiet: none of Spark's start-up warnings or log-level hints (issue 22).
    noise = [line for line in proc.stderr.splitlines() if line.strip()]
    assert noise == [], noise
    return proc.stdout


def _check_outputs(out: Path) -> dict[str, Any]:
    summary = json.loads((out / "summary.json").read_text())
    assert {k: summary["input"][k] for k in sample.SUMMARY_INPUT} == sample.SUMMARY_INPUT
    assert summary["input"]["malformed_by_reason"] == sample.MALFORMED_BY_REASON
    for name, value in sample.DELIVERY.items():
        assert summary["delivery"][name] == pytest.approx(value), name
    # The Parquet tables are readable by other tools (timestamps not in legacy INT96).
    con = duckdb.connect()
    hourly = con.execute(
        "SELECT broker, hour(hour AT TIME ZONE 'UTC'), accepted, rejected, no_match, "
        f"CAST(date AS VARCHAR) FROM read_parquet('{out}/broker_hourly/*/*.parquet', "
        "hive_partitioning = true) ORDER BY 1, 2"
    ).fetchall()
    assert hourly == [
        ("b1", 10, 5, 3, 1, "2024-05-01"),
        ("b1", 11, 0, 0, 0, "2024-05-01"),
        ("b1", 12, 1, 1, 0, "2024-05-01"),
        ("b2", 12, 1, 0, 1, "2024-05-01"),
    ]
    p99 = con.execute(
        f"SELECT latency_p99_ms FROM read_parquet('{out}/trigger_hourly/*/*.parquet') "
        "WHERE trigger = 't1' AND attempts = 7"
    ).fetchone()
    assert p99 == (pytest.approx(396.0),)
    types = json.loads((out / "event_types.json").read_text())["event_types"]
    assert {(t["broker"], t["event_type"], t["event_source"]): t["events"] for t in types} == {
        k: v[2] for k, v in sample.EVENT_TYPES.items()
    }
    assert (out / "report.html").read_text().count('class="chart"') == 5
    return summary


def test_local_directory(tmp_path: Path) -> None:
    archive = sample.write(tmp_path / "archive-root")
    out = tmp_path / "out"
    stdout = _run("-m", "spark_glue", "--archive", str(archive), "--out", str(out))
    assert f"{sample.RECORDS} records" in stdout
    _check_outputs(out)


def test_s3_archive_in_moto(tmp_path: Path) -> None:
    import boto3
    from moto.server import ThreadedMotoServer

    from brokerctl.embedded_aws import free_port

    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        endpoint = f"http://127.0.0.1:{port}"
        s3 = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1")
        s3.create_bucket(Bucket="archive-bucket")
        for key, body in sample.FILES.items():
            # Firehose names its gzip objects without the extension unless told otherwise.
            s3.put_object(Bucket="archive-bucket", Key=key.removesuffix(".gz"), Body=body)
        s3.put_object(Bucket="archive-bucket", Key="elsewhere/ignored", Body=b"{}\n")
        out = tmp_path / "out"
        _run(
            "-m", "spark_glue", "--archive", "s3://archive-bucket/archive/", "--out", str(out),
            "--endpoint-url", endpoint,
        )  # fmt: skip
        summary = _check_outputs(out)
        assert summary["source"] == "s3://archive-bucket/archive/"
    finally:
        server.stop()


@pytest.mark.e2e
def test_archive_written_by_the_local_runtime(tmp_path: Path) -> None:
    from brokerctl.commands_metrics import LOCAL_ARCHIVE
    from brokerctl.event_display import EventDisplay
    from tests.e2e.conftest import start_local_broker, stop_local_broker, wait_until

    ns = f"m-{uuid.uuid4().hex[:6]}"
    broker = start_local_broker()
    try:
        with EventDisplay() as subscriber:
            assert broker.put(
                ns, "brokers", "default", {"metadata": {"name": "default"}}
            ).is_success
            trigger = {
                "metadata": {"name": "orders"},
                "spec": {
                    "broker": "default",
                    "filter": {"attributes": {"type": "com.example.order"}},
                    "subscriber": {"uri": subscriber.url + "/orders"},
                },
            }
            assert broker.put(ns, "triggers", "orders", trigger).is_success
            broker.wait_ready(ns, "triggers", "orders")
            broker.wait_ready(ns, "brokers", "default")
            ingress = f"{broker.url}/{ns}/default"
            ce = {"content-type": "application/cloudevents+json"}
            for n, etype in enumerate(["com.example.order", "com.example.order", "com.x.other"]):
                event = {"specversion": "1.0", "id": f"ev-{n}", "source": "/shop", "type": etype}
                assert httpx.post(ingress, json=event, headers=ce).status_code == 202
            assert httpx.post(ingress, content=b"{", headers=ce).status_code == 400
            assert subscriber.wait_for(lambda got: len(got) >= 2, timeout=30)

            def archived() -> dict[str, int]:
                import boto3

                s3 = boto3.client("s3", endpoint_url=broker.aws_url, region_name="us-east-1")
                bucket, _, prefix = LOCAL_ARCHIVE.removeprefix("s3://").partition("/")
                kinds: dict[str, int] = {}
                pages = s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
                for obj in (o for page in pages for o in page.get("Contents", [])):
                    body = s3.get_object(Bucket=bucket, Key=obj["Key"])["Body"].read()
                    for line in body.splitlines():
                        record = json.loads(line)
                        if record.get("namespace") == ns:
                            kinds[record["kind"]] = kinds.get(record["kind"], 0) + 1
                return kinds

            wait_until(lambda: archived().get("delivery", 0) >= 2, 30, "delivery records")
        out = tmp_path / "report"
        # As the README has it, on a new machine: no AWS credentials, no endpoint given; the
        # runtime's AWS port is not the default one, so it is found through /healthz.
        stdout = _run(
            "-m", "brokerctl", "--url", broker.url, "metrics", "report", "--out", str(out),
            bare=True,
        )  # fmt: skip
        # One progress line per stage instead of Spark's console output.
        assert [line.split("] ", 1)[1] for line in stdout.splitlines() if "] " in line][:2] == [
            "starting Spark",
            f"copying {LOCAL_ARCHIVE} from {broker.aws_url}",
        ]
    finally:
        stop_local_broker(broker)
    summary = json.loads((out / "summary.json").read_text())
    mine = [t for t in summary["per_trigger"] if t["namespace"] == ns]
    assert [(t["trigger"], t["delivered"], t["dead_lettered"]) for t in mine] == [("orders", 2, 0)]
    types = json.loads((out / "event_types.json").read_text())["event_types"]
    assert {(t["event_type"], t["events"]) for t in types if t["namespace"] == ns} == {
        ("com.example.order", 2),
        ("com.x.other", 1),
    }
    assert summary["ingress"]["rejected"] >= 1
    assert (out / "report.html").is_file()
