"""The archive spool's shutdown extension, run for real: the layer's zip unpacked as Lambda puts it
in /opt, its ``extensions/broker-archive-spool`` started as a process against a fake Extensions API
(real HTTP, tests/fakes/lambda_extensions_api.py), writing to a Firehose stream of a moto server
that delivers to S3. The spool is written by the archiver itself, in a process then killed
(SIGKILL) as Lambda reclaims a container: what it carried survives in the page cache."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import time
import uuid
import zipfile
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import boto3
import pytest

from brokerctl.embedded_aws import free_port
from chalicelib.core import archive
from chalicelib.core.archive_reader import hour_of_key, object_records
from chalicelib.services.metrics import emf_record
from infra import spool_layer
from infra.spool_extension import extension
from tests.fakes.lambda_extensions_api import LambdaExtensionsApi

REPO = Path(__file__).resolve().parents[2]
DEADLINE = 10.0  # seconds any wait here may take before the test fails


@pytest.fixture
def opt(tmp_path: Path) -> Path:
    """The layer as Lambda unpacks it in /opt (modes kept: zipfile's extractall drops them)."""
    opt = tmp_path / "opt"
    with zipfile.ZipFile(_zip(tmp_path)) as archive:
        for info in archive.infolist():
            path = Path(archive.extract(info, opt))
            path.chmod((info.external_attr >> 16) & 0o777)
    return opt


def _zip(tmp_path: Path) -> Path:
    path = tmp_path / spool_layer.ZIP_NAME
    path.write_bytes(spool_layer.layer_zip())
    return path


@pytest.fixture
def api() -> Iterator[LambdaExtensionsApi]:
    server = LambdaExtensionsApi().start()
    yield server
    server.stop()


@pytest.fixture
def stream(moto_endpoint: str) -> tuple[str, str]:
    """A Firehose stream delivering to its own S3 bucket on the moto server: (stream, bucket)."""
    name = f"spool-{uuid.uuid4().hex[:8]}"
    kw: dict[str, Any] = {"endpoint_url": moto_endpoint, "region_name": "us-east-1"}
    boto3.client("s3", **kw).create_bucket(Bucket=name)
    boto3.client("firehose", **kw).create_delivery_stream(
        DeliveryStreamName=name,
        ExtendedS3DestinationConfiguration={
            "RoleARN": "arn:aws:iam::123456789012:role/firehose",
            "BucketARN": f"arn:aws:s3:::{name}",
            "Prefix": "archive/",
        },
    )
    return name, name


def _records(role: str, n: int) -> list[bytes]:
    return [
        json.dumps({"v": 1, "kind": "accepted", "event": {"id": f"{role}-{i}"}}).encode() + b"\n"
        for i in range(n)
    ]


_CONTAINER = """
import json, os, signal, sys
from chalicelib.adapters.archive_spool import FileSpool
from chalicelib.services.archiver import Archiver, SpooledArchive
from chalicelib.services.metrics import Metrics
from tests.fakes import MemoryArchive

spool_dir, carried = sys.argv[1], json.loads(sys.argv[2])
for role, records in carried.items():
    archive = SpooledArchive(MemoryArchive(), lambda r: FileSpool(spool_dir, r))
    archiver = Archiver(archive, Metrics(enabled=False), role, carry_seconds=3600)
    for record in records:
        assert archiver.write([record.encode()])
os.kill(os.getpid(), signal.SIGKILL)  # reclaimed: no exit handler, no flush
"""


def _carry(spool_dir: Path, carried: dict[str, list[bytes]]) -> None:
    """What a warm container leaves when it is killed: a process whose archivers carried
    ``carried`` (role -> records) and never wrote them."""
    payload = json.dumps({role: [r.decode() for r in records] for role, records in carried.items()})
    process = subprocess.run(
        [sys.executable, "-c", _CONTAINER, str(spool_dir), payload],
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        timeout=DEADLINE,
    )
    assert process.returncode == -signal.SIGKILL, process.stderr


def _start(opt: Path, api: LambdaExtensionsApi, env: dict[str, str]) -> subprocess.Popen[str]:
    launcher = opt / "extensions" / spool_layer.EXTENSION_NAME
    assert launcher.stat().st_mode & stat.S_IXUSR
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    process = subprocess.Popen(
        [str(launcher)],
        env={
            "PATH": path,  # python3 is the runtime's interpreter on Lambda
            "AWS_LAMBDA_RUNTIME_API": api.host_port,
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_REGION": "us-east-1",
            "AWS_DEFAULT_REGION": "us-east-1",
            **env,
        },
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    if not api.waiting.wait(DEADLINE):
        process.kill()
        pytest.fail(f"the extension never waited for an event: {process.communicate()}")
    return process


def _archived(endpoint: str, bucket: str) -> list[bytes]:
    s3 = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1")
    lines: list[bytes] = []
    for item in s3.list_objects_v2(Bucket=bucket).get("Contents", []):
        body = s3.get_object(Bucket=bucket, Key=item["Key"])["Body"].read()
        lines += body.splitlines(keepends=True)
    return lines


def test_at_shutdown_every_carried_record_is_archived_and_the_spool_removed(
    opt: Path, api: LambdaExtensionsApi, stream: tuple[str, str], moto_endpoint: str, tmp_path: Path
) -> None:
    spool = tmp_path / "spool"
    carried = {"ingress": _records("ingress", 40), "delivery": _records("delivery", 7)}
    _carry(spool, carried)
    assert len(list(spool.iterdir())) == 2  # one file per archiver
    name, bucket = stream
    process = _start(
        opt,
        api,
        {
            "AWS_ENDPOINT_URL": moto_endpoint,
            "BROKER_ARCHIVE_STREAM": name,
            "BROKER_ARCHIVE_SPOOL_DIR": str(spool),
        },
    )
    [registered] = api.extensions.values()
    assert registered.name == spool_layer.EXTENSION_NAME and registered.events == ["SHUTDOWN"]

    api.shutdown("spindown", int((time.time() + 2.0) * 1000))
    out, err = process.communicate(timeout=DEADLINE)

    assert process.returncode == 0, err
    assert sorted(_archived(moto_endpoint, bucket)) == sorted(
        carried["ingress"] + carried["delivery"]
    )
    assert list(spool.iterdir()) == []
    assert "archive_spool_lost_count" not in out
    assert "47 records archived at shutdown" in out


def test_with_firehose_unreachable_the_loss_is_counted_and_it_exits_before_the_deadline(
    opt: Path, api: LambdaExtensionsApi, tmp_path: Path
) -> None:
    spool = tmp_path / "spool"
    _carry(spool, {"ingress": _records("ingress", 12), "delivery": _records("delivery", 3)})
    process = _start(
        opt,
        api,
        {
            "AWS_ENDPOINT_URL": f"http://127.0.0.1:{free_port()}",  # nothing listens there
            "BROKER_ARCHIVE_STREAM": "archive",
            "BROKER_ARCHIVE_SPOOL_DIR": str(spool),
        },
    )
    deadline = time.time() + 2.0  # Lambda's shutdown budget with external extensions
    api.shutdown("timeout", int(deadline * 1000))
    out, err = process.communicate(timeout=DEADLINE)
    exited = time.time()

    assert process.returncode == 0, err
    assert exited < deadline, f"exited {exited - deadline:.2f} s after the deadline"
    lines = [json.loads(line) for line in out.splitlines()]
    metrics = {d["function"]: d for d in lines if "_aws" in d}
    assert {f: d["archive_spool_lost_count"] for f, d in metrics.items()} == {
        "ingress": [12.0],
        "delivery": [3.0],
    }
    # The broker's own metrics' namespace and dimensions (services/metrics.py, powertools' EMF).
    ours = emf_record({"function": "ingress"}, {"archive_spool_lost_count": ("Count", [12.0])})
    for document in metrics.values():
        assert document["_aws"]["CloudWatchMetrics"] == ours["_aws"]["CloudWatchMetrics"]
        assert document["service"] == ours["service"]
    logged = {d["function"]: d["event_ids"] for d in lines if "event_ids" in d}
    assert logged == {
        "ingress": [f"ingress-{i}" for i in range(12)],
        "delivery": [f"delivery-{i}" for i in range(3)],
    }
    assert list(spool.iterdir()) == []  # counted as lost now: never sent (or counted) twice


def _accepted(event_id: str, at: datetime) -> bytes:
    event = {"specversion": "1.0", "id": event_id, "source": "/s", "type": "t"}
    return archive.encode_line(archive.accepted_record("ns", "b", event, ["t1"], 10, at))


def test_late_records_are_put_under_the_hour_of_their_arrival_and_read_back_by_a_replay(
    opt: Path, api: LambdaExtensionsApi, stream: tuple[str, str], moto_endpoint: str, tmp_path: Path
) -> None:
    """A container idle for two hours: what it carried goes to S3 objects of the hours the
    records arrived in (one per role and hour), not to Firehose (which would file them under
    the hour of the shutdown); the one fresh record still goes to Firehose."""
    now = datetime.now(UTC)
    two_hours_ago = now - timedelta(hours=2)
    hour = two_hours_ago.replace(minute=0, second=0, microsecond=0)
    first, second = hour + timedelta(minutes=1), hour + timedelta(minutes=2)
    next_hour = hour + timedelta(hours=1, minutes=5)
    spool = tmp_path / "spool"
    carried = {
        "ingress": [_accepted("i1", first), _accepted("i2", next_hour), _accepted("i3", now)],
        "delivery": [_accepted("d1", second)],
    }
    _carry(spool, carried)
    name, bucket = stream
    process = _start(
        opt,
        api,
        {
            "AWS_ENDPOINT_URL": moto_endpoint,
            "BROKER_ARCHIVE_STREAM": name,
            "BROKER_ARCHIVE_BUCKET": bucket,
            "BROKER_ARCHIVE_SPOOL_DIR": str(spool),
        },
    )
    api.shutdown("spindown", int((time.time() + 2.0) * 1000))
    out, err = process.communicate(timeout=DEADLINE)

    assert process.returncode == 0, err
    s3 = boto3.client("s3", endpoint_url=moto_endpoint, region_name="us-east-1")
    objects = {
        item["Key"]: s3.get_object(Bucket=bucket, Key=item["Key"])["Body"].read()
        for item in s3.list_objects_v2(Bucket=bucket).get("Contents", [])
    }
    late = {k: v for k, v in objects.items() if "/late-" in k}
    read = {
        (hour_of_key(k), k.split("/")[-1].split("-")[1]): [
            r["event"]["id"] for r in object_records(k, blob).records if r
        ]
        for k, blob in late.items()
    }
    assert read == {
        (hour, "ingress"): ["i1"],
        (hour + timedelta(hours=1), "ingress"): ["i2"],
        (hour, "delivery"): ["d1"],
    }
    assert all(k.endswith(".gz") and v[:2] == b"\x1f\x8b" for k, v in late.items())
    through_firehose = [
        line for k, v in objects.items() if k not in late for line in v.splitlines(keepends=True)
    ]
    assert through_firehose == [carried["ingress"][2]]
    assert list(spool.iterdir()) == []
    lines = [json.loads(line) for line in out.splitlines()]
    counted = {d["function"]: d["archive_late_count"] for d in lines if "archive_late_count" in d}
    assert counted == {"ingress": [2.0], "delivery": [1.0]}
    assert "archive_spool_lost_count" not in out
    assert "4 records archived at shutdown (3 late, in S3)" in out


def test_late_records_that_s3_refuses_go_to_firehose_after_all(
    opt: Path, api: LambdaExtensionsApi, stream: tuple[str, str], moto_endpoint: str, tmp_path: Path
) -> None:
    """S3 refusing (or slow) costs late records their hour, not their archiving: after S3 has had
    half the time left, they go to Firehose; fresh ones went first and are not held up."""
    spool = tmp_path / "spool"
    long_ago = datetime.now(UTC) - timedelta(hours=3)
    late = [_accepted("i1", long_ago), _accepted("i2", long_ago)]
    _carry(spool, {"ingress": late, "delivery": [_accepted("d1", datetime.now(UTC))]})
    name, bucket = stream
    env = {
        "AWS_ENDPOINT_URL": moto_endpoint,
        "BROKER_ARCHIVE_STREAM": name,
        "BROKER_ARCHIVE_BUCKET": f"no-such-bucket-{uuid.uuid4().hex[:8]}",
        "BROKER_ARCHIVE_SPOOL_DIR": str(spool),
    }
    process = _start(opt, api, env)
    deadline = time.time() + 1.5
    api.shutdown("spindown", int(deadline * 1000))
    out, err = process.communicate(timeout=DEADLINE)

    assert process.returncode == 0, err
    assert time.time() < deadline
    s3 = boto3.client("s3", endpoint_url=moto_endpoint, region_name="us-east-1")
    archived = [
        json.loads(line)["event"]["id"]
        for item in s3.list_objects_v2(Bucket=bucket).get("Contents", [])
        for line in s3.get_object(Bucket=bucket, Key=item["Key"])["Body"].read().splitlines()
    ]
    assert sorted(archived) == ["d1", "i1", "i2"]
    assert "archive_spool_lost_count" not in out
    lines = [json.loads(line) for line in out.splitlines()]
    assert any("NoSuchBucket" in d.get("message", "") for d in lines)
    assert any("2 late lines to Firehose" in d.get("message", "") for d in lines)
    assert list(spool.iterdir()) == []


def test_what_neither_s3_nor_firehose_takes_is_counted_lost_with_its_ids(
    opt: Path, api: LambdaExtensionsApi, moto_endpoint: str, tmp_path: Path
) -> None:
    spool = tmp_path / "spool"
    long_ago = datetime.now(UTC) - timedelta(hours=3)
    _carry(spool, {"ingress": [_accepted("i1", long_ago), _accepted("i2", datetime.now(UTC))]})
    missing = f"no-such-{uuid.uuid4().hex[:8]}"
    env = {
        "AWS_ENDPOINT_URL": moto_endpoint,
        "BROKER_ARCHIVE_STREAM": missing,
        "BROKER_ARCHIVE_BUCKET": missing,
        "BROKER_ARCHIVE_SPOOL_DIR": str(spool),
    }
    process = _start(opt, api, env)
    deadline = time.time() + 1.0  # shorter than Lambda's 2 s: the calls fail until it passes
    api.shutdown("spindown", int(deadline * 1000))
    out, err = process.communicate(timeout=DEADLINE)

    assert process.returncode == 0, err
    assert time.time() < deadline
    lines = [json.loads(line) for line in out.splitlines()]
    lost = {d["function"]: d["archive_spool_lost_count"] for d in lines if "_aws" in d}
    assert lost == {"ingress": [2.0]}
    assert [sorted(d["event_ids"]) for d in lines if "event_ids" in d] == [["i1", "i2"]]
    assert list(spool.iterdir()) == []


def test_the_watchdog_counts_what_a_hung_call_holds_before_the_deadline(tmp_path: Path) -> None:
    """A call that hangs past the deadline (a network that never answers) is cut short by the
    watchdog; its lines are counted lost, in time for Lambda's SIGKILL."""
    (tmp_path / "ingress.1.a.1.carry").write_bytes(b"".join(_records("ingress", 2)))

    def hangs(records: list[bytes]) -> list[bool]:
        time.sleep(5)
        return [False] * len(records)

    deadline = time.time() + 0.3
    extension.watchdog(deadline)
    try:
        report = extension.drain(str(tmp_path), lambda: hangs, deadline)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
    assert time.time() < deadline + 0.2
    assert report.lost_count == 2 and report.sent == 0
    assert list(tmp_path.iterdir()) == []
