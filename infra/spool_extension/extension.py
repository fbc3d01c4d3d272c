#!/usr/bin/env python3
"""The archive spool's shutdown extension: an external Lambda extension (Lambda Extensions API)
that writes to Firehose the archive records a container still carries when Lambda shuts it down.

A carrying archiver (chalicelib/services/archiver.py) appends every record it carries to a file
under BROKER_ARCHIVE_SPOOL_DIR (chalicelib/adapters/archive_spool.py: one record a line, files
ending ``.carry`` or ``.sending``) and removes the file once it has written those records. This
process registers for SHUTDOWN only (it costs nothing per invocation), waits, and on SHUTDOWN,
whatever its reason (spindown, timeout, failure), sends every line left to the archive stream
(BROKER_ARCHIVE_STREAM) with PutRecordBatch, retrying failed entries until the event's
``deadlineMs`` (less a margin), removes the files, and for what it could not write logs the event
ids and prints a CloudWatch EMF line: ``archive_spool_lost_count`` in the broker's namespace,
dimensions ``function`` (the archiver's role, as ``archive_failure_count``) and ``service``.

A line whose ``at`` is more than LATE_SECONDS old (after an idle container, most of them) does
not go to Firehose, which would file it under the hour of the shutdown, where no replay of its
range looks: it is put, with the others of its role and hour, into one S3 object under its own
hour of the archive bucket (BROKER_ARCHIVE_BUCKET), ``archive/YYYY/MM/DD/HH/late-<role>-<uuid>.gz``,
gzip JSON lines; those are counted in ``archive_late_count``. The same rule as the archiver's
(chalicelib/services/late_archive.py; tests/unit/test_archive_late.py holds the copies together).

Self-contained on purpose: it runs from the layer (/opt), beside the function, with the standard
library and the runtime's own boto3 (imported only when there is something to send, so the
extension adds nothing to a cold start but the interpreter). Run as
``/opt/extensions/broker-archive-spool`` (the launcher) or ``python3 extension.py [name]``.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import signal
import sys
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

NAME = "broker-archive-spool"
SPOOL_DIR = "/tmp/broker-archive-spool"  # chalicelib/config.py SPOOL_DIR
SUFFIXES = (".carry", ".sending")  # chalicelib/adapters/archive_spool.py
METRIC = "archive_spool_lost_count"
LATE_METRIC = "archive_late_count"
# chalicelib/services/late_archive.py: a line written this long after its ``at`` goes to S3.
LATE_SECONDS = 30.0
_AT = re.compile(rb'\{"v":\d{1,4},"kind":"[a-z_]{1,32}","at":"([0-9T:.+\-Z]{10,40})"')
GZIP_LEVEL = 6
NAMESPACE = "ServerlessBroker"  # chalicelib/services/metrics.py (POWERTOOLS_METRICS_NAMESPACE)
SERVICE = "serverless-broker"
MARGIN_SECONDS = 0.25  # exit this long before the deadline: past it Lambda sends SIGKILL
RETRY_PAUSE_SECONDS = 0.05
# One call's longest wait: a hung call is retried, not waited on for the whole budget (and the
# watchdog ends whatever still runs at the deadline).
CALL_TIMEOUT_SECONDS = 0.8
# Firehose's limits (chalicelib/adapters/firehose_archive.py): lines are packed into records of
# ≤ 256 KiB (its 5 KiB billing rounding), ≤ 500 records and ≤ 4 MiB per call.
PACK_BYTES = 256 * 1024
MAX_RECORDS = 500
MAX_CALL_BYTES = 4 * 1024 * 1024 - 64 * 1024
MAX_LOGGED_IDS = 100
_API = "/2020-01-01/extension"


@dataclass
class Report:
    sent: int = 0
    lost: dict[str, list[bytes]] = field(default_factory=dict)  # role -> lines not archived
    late: dict[str, int] = field(default_factory=dict)  # role -> late lines put in S3

    @property
    def lost_count(self) -> int:
        return sum(len(lines) for lines in self.lost.values())


def main(argv: list[str]) -> int:
    env = os.environ
    api = env["AWS_LAMBDA_RUNTIME_API"]
    name = argv[1] if len(argv) > 1 else NAME
    identifier = register(api, name)
    while True:
        event = next_event(api, identifier)
        if event.get("eventType") != "SHUTDOWN":
            continue  # registered for SHUTDOWN only; anything else is not ours to act on
        deadline_ms = event.get("deadlineMs")
        deadline = deadline_ms / 1000 if isinstance(deadline_ms, int | float) else time.time() + 1.5
        return shutdown(env, deadline - MARGIN_SECONDS)


def shutdown(env: dict[str, str] | os._Environ[str], deadline: float) -> int:
    stream = env.get("BROKER_ARCHIVE_STREAM", "")
    bucket = env.get("BROKER_ARCHIVE_BUCKET", "")
    watchdog(deadline)
    report = drain(
        env.get("BROKER_ARCHIVE_SPOOL_DIR") or SPOOL_DIR,
        lambda: firehose_sender(stream, deadline),
        deadline,
        putter=(lambda: s3_putter(bucket, deadline)) if bucket else None,
    )
    signal.setitimer(signal.ITIMER_REAL, 0)  # the count below must not be cut short
    emit(report, env.get("POWERTOOLS_METRICS_NAMESPACE") or NAMESPACE, _print)
    return 0


def register(api: str, name: str) -> str:
    request = urllib.request.Request(
        f"http://{api}{_API}/register",
        data=json.dumps({"events": ["SHUTDOWN"]}).encode(),
        headers={"Lambda-Extension-Name": name, "Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(request) as response:  # Lambda's own local API
        identifier = response.headers.get("Lambda-Extension-Identifier")
    if not identifier:
        raise RuntimeError("register: no Lambda-Extension-Identifier in the answer")
    return str(identifier)


def next_event(api: str, identifier: str) -> dict[str, Any]:
    request = urllib.request.Request(
        f"http://{api}{_API}/event/next",
        headers={"Lambda-Extension-Identifier": identifier},
        method="GET",
    )
    with urllib.request.urlopen(request) as response:  # blocks until an event
        event: dict[str, Any] = json.loads(response.read())
    return event


# A sender writes Firehose records in one call and says, for each, whether Firehose refused it;
# it raises when the call itself failed.
Sender = Callable[[list[bytes]], list[bool]]
# A putter writes one object (key, bytes) to the archive bucket; it raises when it failed.
Putter = Callable[[str, bytes], None]


class OutOfTime(Exception):
    """Raised by the watchdog (SIGALRM) at the deadline: whatever is not archived yet is lost,
    and counted so, before Lambda's SIGKILL."""


def drain(
    directory: str,
    sender: Callable[[], Sender],
    deadline: float,
    clock: Callable[[], float] = time.time,
    putter: Callable[[], Putter] | None = None,
    wall: Callable[[], float] = time.time,
) -> Report:
    """Archives every spooled line, removes the spool files, and reports what was not archived.

    Fresh lines go first, all of them, to Firehose: they are the bulk, and Firehose files them in
    time. Then the late ones go to S3 under their own hours (with half the time left: a slow or
    refusing S3 cannot starve the rest); what S3 did not take goes to Firehose after all (filed
    under a later hour, where a replay of its range does not look, but archived). Without a
    ``putter`` (no bucket named) late lines go to Firehose from the start. A watchdog's
    OutOfTime (``shutdown``) ends it early: everything not confirmed archived is counted lost
    (so an interrupted call's lines may be counted lost and still be archived: never the other
    way round)."""
    report = Report()
    files = _spool_files(directory)
    if not files:
        return report
    now = wall()
    fresh: dict[str, list[bytes]] = {}  # role -> lines not confirmed archived
    late: dict[str, dict[int, list[bytes]]] = {}  # role -> hour -> lines
    read: list[str] = []
    total = torn = 0  # whole lines read; torn ones (counted lost, not in ``total``)
    for path, role in files:
        try:
            with open(path, "rb") as f:
                data = f.read()
        except OSError as exc:
            _log("ERROR", f"archive spool: cannot read {path}: {exc}", role)
            continue  # nothing read, nothing known to count: the log line says which file
        read.append(path)
        lines = data.splitlines(keepends=True)
        if lines and not lines[-1].endswith(b"\n"):  # torn by a crash in the middle of a write
            report.lost.setdefault(role, []).append(lines.pop())
            torn += 1
        total += len(lines)
        on_time, hours = split_late(lines, now)
        if hours and putter is None:
            _log("WARNING", "archive spool: no BROKER_ARCHIVE_BUCKET: late lines to Firehose", role)
            on_time, hours = lines, {}
        fresh.setdefault(role, []).extend(on_time)
        for hour, hour_lines in hours.items():
            late.setdefault(role, {}).setdefault(hour, []).extend(hour_lines)
    clients: dict[str, Any] = {}

    def send_lines(role: str, lines: list[bytes]) -> list[bytes]:
        if "send" not in clients:
            clients["send"] = _client(sender, _failing, "Firehose", role)
        return _send_lines(lines, clients["send"], deadline, clock, role)

    try:
        for role in sorted(fresh):
            if fresh[role]:
                fresh[role] = send_lines(role, fresh[role])
        for role in sorted(late):
            if "put" not in clients:
                clients["put"] = _client(putter or _no_putter, _failing_put, "S3", role)
            count = sum(map(len, late[role].values()))
            s3_deadline = clock() + max(0.0, deadline - clock()) / 2
            not_put = _put_late(late[role], clients["put"], s3_deadline, clock, role)
            report.late[role] = count - len(not_put)
            late[role] = {}
            if not_put:
                _log("WARNING", f"archive spool: {len(not_put)} late lines to Firehose", role)
                fresh.setdefault(role, []).extend(not_put)  # pending until Firehose takes them
                fresh[role] = send_lines(role, fresh[role])
    except OutOfTime:
        _log("ERROR", "archive spool: out of time at shutdown", None)
    for role in sorted(set(fresh) | set(late)):
        unsent = fresh.get(role, []) + [x for lines in late.get(role, {}).values() for x in lines]
        if unsent:
            report.lost.setdefault(role, []).extend(unsent)
    report.sent = total - (report.lost_count - torn)
    for path in read:
        try:
            os.unlink(path)  # the unsent are counted now; a later shutdown must not send them
        except OSError as exc:
            _log("ERROR", f"archive spool: cannot remove {path}: {exc}", None)
    return report


def _client(make: Callable[[], Any], failing: Any, what: str, role: str) -> Any:
    try:
        return make()
    except OutOfTime:
        raise
    except Exception as exc:  # no boto3, no credentials: what it would carry is lost
        _log("ERROR", f"archive spool: no {what} client: {exc}", role)
        return failing


def _no_putter() -> Putter:
    raise RuntimeError("no bucket")


def watchdog(deadline: float) -> None:
    """OutOfTime at ``deadline`` wherever this process then is (a hung call, boto3's import)."""

    def fire(signum: int, frame: Any) -> None:
        raise OutOfTime()

    signal.signal(signal.SIGALRM, fire)
    signal.setitimer(signal.ITIMER_REAL, max(0.001, deadline - time.time()))


def _send_lines(
    lines: list[bytes], send: Sender, deadline: float, clock: Callable[[], float], role: str
) -> list[bytes]:
    """The lines not archived by the deadline."""
    records = pack(lines)
    pending = list(range(len(records)))
    error = ""
    while pending and clock() < deadline:
        failed: list[int] = []
        for call in _calls(pending, records):
            if clock() >= deadline:
                failed.extend(call)
                continue
            try:
                rejected = send([records[i][0] for i in call])
            except Exception as exc:  # any failure of the call: retried below
                error = str(exc)
                failed.extend(call)
                continue
            failed.extend(i for i, no in zip(call, rejected, strict=True) if no)
        pending = failed
        if pending and clock() + RETRY_PAUSE_SECONDS < deadline:
            time.sleep(RETRY_PAUSE_SECONDS)
    if pending and error:
        _log("ERROR", f"archive spool: Firehose: {error[:300]}", role)
    return [line for i in pending for line in records[i][1]]


def _put_late(
    late: dict[int, list[bytes]],
    put: Putter,
    deadline: float,
    clock: Callable[[], float],
    role: str,
) -> list[bytes]:
    """One object per hour, each retried (with the same key) until the deadline; the lines not
    archived by then."""
    pending = {late_key(hour, role): lines for hour, lines in sorted(late.items())}
    bodies = {key: object_body(lines) for key, lines in pending.items()}
    error = ""
    while pending and clock() < deadline:
        for key in list(pending):
            if clock() >= deadline:
                break
            try:
                put(key, bodies[key])
            except Exception as exc:  # any failure of the call: retried below
                error = str(exc)
                continue
            del pending[key]
        if pending and clock() + RETRY_PAUSE_SECONDS < deadline:
            time.sleep(RETRY_PAUSE_SECONDS)
    if pending and error:
        _log("ERROR", f"archive spool: S3: {error[:300]}", role)
    return [line for lines in pending.values() for line in lines]


def arrival(line: bytes) -> float | None:
    """A line's ``at`` as a POSIX time, or None when it has none the archive writer gives."""
    found = _AT.match(line)
    if found is None:
        return None
    try:
        at = datetime.fromisoformat(found.group(1).decode())
    except ValueError:
        return None
    return at.timestamp() if at.tzinfo is not None else None


def split_late(lines: list[bytes], now: float) -> tuple[list[bytes], dict[int, list[bytes]]]:
    """``(fresh, late)``: the lines Firehose still files in time, and the late ones by the hour
    of their ``at`` (the hour's POSIX time)."""
    fresh: list[bytes] = []
    late: dict[int, list[bytes]] = {}
    for line in lines:
        at = arrival(line)
        if at is None or at >= now - LATE_SECONDS:
            fresh.append(line)
        else:
            late.setdefault(int(at // 3600) * 3600, []).append(line)
    return fresh, late


def late_key(hour: int, role: str, unique: str | None = None) -> str:
    stamp = datetime.fromtimestamp(hour, UTC)
    return f"archive/{stamp:%Y/%m/%d/%H}/late-{role}-{unique or uuid.uuid4().hex}.gz"


def object_body(lines: list[bytes]) -> bytes:
    data = b"".join(r if r.endswith(b"\n") else r + b"\n" for r in lines)
    return gzip.compress(data, compresslevel=GZIP_LEVEL, mtime=0)


def pack(lines: list[bytes]) -> list[tuple[bytes, list[bytes]]]:
    """Lines joined into Firehose records of ≤ PACK_BYTES (a longer line alone), with the lines
    each holds."""
    out: list[tuple[bytes, list[bytes]]] = []
    current: list[bytes] = []
    size = 0
    for line in lines:
        if current and size + len(line) > PACK_BYTES:
            out.append((b"".join(current), current))
            current, size = [], 0
        current.append(line)
        size += len(line)
    if current:
        out.append((b"".join(current), current))
    return out


def _calls(pending: list[int], records: list[tuple[bytes, list[bytes]]]) -> Iterable[list[int]]:
    call: list[int] = []
    size = 0
    for i in pending:
        record = records[i][0]
        if call and (len(call) == MAX_RECORDS or size + len(record) > MAX_CALL_BYTES):
            yield call
            call, size = [], 0
        call.append(i)
        size += len(record)
    if call:
        yield call


def _boto3_client(service: str, deadline: float) -> Any:
    """A client of the runtime's own boto3 whose calls each wait at most CALL_TIMEOUT_SECONDS
    (and never past ``deadline``), retried here rather than by botocore."""
    runtime_dir = os.environ.get("LAMBDA_RUNTIME_DIR")  # where older runtimes keep boto3
    if runtime_dir and runtime_dir not in sys.path:
        sys.path.append(runtime_dir)
    import boto3
    from botocore.config import Config

    budget = max(0.1, min(CALL_TIMEOUT_SECONDS, deadline - time.time()))
    return boto3.client(
        service,
        config=Config(
            connect_timeout=budget,
            read_timeout=budget,
            retries={"max_attempts": 1},  # retried here, within the deadline
        ),
    )


def firehose_sender(stream: str, deadline: float) -> Sender:
    client = _boto3_client("firehose", deadline)

    def send(records: list[bytes]) -> list[bool]:
        out = client.put_record_batch(
            DeliveryStreamName=stream, Records=[{"Data": r} for r in records]
        )
        if not out.get("FailedPutCount"):
            return [False] * len(records)
        return [bool(res.get("ErrorCode")) for res in out["RequestResponses"]]

    return send


def s3_putter(bucket: str, deadline: float) -> Putter:
    client = _boto3_client("s3", deadline)

    def put(key: str, body: bytes) -> None:
        client.put_object(Bucket=bucket, Key=key, Body=body)

    return put


def _failing(records: list[bytes]) -> list[bool]:
    raise RuntimeError("no Firehose client")


def _failing_put(key: str, body: bytes) -> None:
    raise RuntimeError("no S3 client")


def emit(report: Report, namespace: str, out: Callable[[str], None]) -> None:
    """One EMF line per role with losses (none when everything was written) and one per role
    with late lines put in S3, and the log lines naming the lost events."""
    for role, lines in sorted(report.lost.items()):
        ids = event_ids(lines)
        _log(
            "ERROR",
            f"archive spool: {len(lines)} records not archived at shutdown (event ids {ids})",
            role,
            event_ids=ids,
        )
        out(json.dumps(emf(namespace, role, len(lines)), separators=(",", ":")))
    for role, count in sorted(report.late.items()):
        if count:
            line = emf(namespace, role, count, LATE_METRIC)
            out(json.dumps(line, separators=(",", ":")))
    if report.sent:
        late = sum(report.late.values())
        _log(
            "INFO",
            f"archive spool: {report.sent} records archived at shutdown ({late} late, in S3)",
            None,
        )


def emf(namespace: str, role: str, count: int, metric: str = METRIC) -> dict[str, Any]:
    return {
        "_aws": {
            "Timestamp": int(time.time() * 1000),
            "CloudWatchMetrics": [
                {
                    "Namespace": namespace,
                    "Dimensions": [["function", "service"]],
                    "Metrics": [{"Name": metric, "Unit": "Count"}],
                }
            ],
        },
        "function": role,
        "service": SERVICE,
        metric: [float(count)],
    }


def event_ids(lines: list[bytes]) -> list[str]:
    ids: list[str] = []
    for line in lines:
        if len(ids) == MAX_LOGGED_IDS:
            break
        try:
            record = json.loads(line)
        except ValueError:
            continue
        event = record.get("event") if isinstance(record, dict) else None
        event_id = event.get("id") if isinstance(event, dict) else None
        if event_id is None and isinstance(record, dict):
            event_id = record.get("event_id")
        if isinstance(event_id, str):
            ids.append(event_id)
    return ids


def _spool_files(directory: str) -> list[tuple[str, str]]:
    try:
        names = sorted(os.listdir(directory))
    except FileNotFoundError:
        return []
    return [(os.path.join(directory, n), n.split(".", 1)[0]) for n in names if n.endswith(SUFFIXES)]


def _log(level: str, message: str, role: str | None, **extra: Any) -> None:
    line = {"level": level, "message": message, "extension": NAME, **extra}
    if role is not None:
        line["function"] = role
    _print(json.dumps(line))


def _print(line: str) -> None:
    # One write of the line with its newline: the watchdog's OutOfTime may come between two
    # bytecodes, and ``print`` writes the newline separately (a line glued to the next one is
    # no log line, and no EMF metric).
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    code = main(sys.argv)
    sys.stdout.flush()
    # No interpreter teardown (boto3's modules, its connection pools): tens of milliseconds of
    # CPU a loaded sandbox may not have before Lambda's SIGKILL; everything is written already.
    os._exit(code)
