"""CPU and wall time the embedded AWS endpoint (brokerctl/embedded_aws.py: moto in its own
process, as ``brokerctl dev`` starts it) spends per request, for the calls local mode makes most.

Each operation is called ROUNDS times in a row by one boto3 client with the broker's client
settings, after WARMUP calls left out; the moto process's CPU (user + system, from /proc) and the
caller's wall clock over the ROUNDS calls, divided by ROUNDS, are the figures (ms per request):

- ``sqs_send_batch``: SendMessageBatch of 10 x 50 KiB JSON bodies (replay packs: JSON events
  inside a JSON envelope, so the request's JSON escapes every quote);
- ``sqs_receive``: ReceiveMessage of up to 10 of those, with their attributes (the poller's call);
- ``s3_get``: GetObject of a 500 KB object, body read (an archive object of a replay);
- ``ddb_put_cond``: PutItem with ``attribute_not_exists`` (a dedup claim, a replay checkpoint);
- ``ddb_get``: GetItem; ``ddb_query``: Query of one partition of 10 items by key condition.

The messages received were sent to a queue of their own beforehand, outside the clock (received
messages stay in flight: each receive looks past the ones before it, as moto does).
Measured (2 shared cores, median of 5 alternating runs of 300 requests; moto CPU ms per request,
before -> after the per-request patches of brokerctl/embedded_aws.py): sqs_send_batch 5.33 ->
3.63, sqs_receive (3,000 in flight) 26.97 -> 5.43, s3_get 1.17 -> 1.17, ddb_put_cond 1.23 ->
1.10, ddb_get 1.17 -> 0.87, ddb_query 5.43 -> 3.37. Then with SendMessageBatch answered
directly (``_send_message_batches_directly``: no Flask, setup_class, parser or serializer walk)
and random characters drawn in one loop (``_draw_random_characters_directly``: receipt handles,
request ids), median of 5 runs alternating with the endpoint before them, on the same 2 cores
shared with another job (results/moto_requests.json holds both sets): sqs_send_batch 3.77 ->
2.57, sqs_receive 5.30 -> 4.70, s3_get 1.10 -> 1.10, ddb_put_cond 1.00 -> 1.03, ddb_get 0.90 ->
0.90, ddb_query 3.37 -> 3.47 (the last four: noise). The endpoint's WSGI application alone (no
HTTP server, no socket) spends 2.65 -> 1.75 ms of CPU per such SendMessageBatch, 1.4 ms of which
is msgspec decoding the 550 KB request (0.75) and the ten bodies' MD5s (0.65, computed without
the GIL), and 3.77 -> 2.81 ms per such ReceiveMessage; over HTTP, the server (http.server,
werkzeug) adds about 0.3 ms per request, and system time (the 550 KB read from the socket, fresh
memory for the bodies kept) 0.3-0.4 ms per SendMessageBatch.
Run: .venv/bin/python benchmarks/moto_requests.py  (MOTO_ROUNDS; MOTO_OPS=sqs_send_batch,... for
some operations only; MOTO_RESULT names the result file)
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks._result import print_table, write_result  # noqa: E402
from brokerctl.embedded_aws import EmbeddedAws, free_port  # noqa: E402

ROUNDS = int(os.environ.get("MOTO_ROUNDS", "200"))
WARMUP = 20
RESULT = os.environ.get("MOTO_RESULT", "moto_requests")
ONLY = {name for name in os.environ.get("MOTO_OPS", "").split(",") if name}
MESSAGE_BYTES = 50 * 1024
OBJECT_BYTES = 500_000


def _cpu_s(pid: int) -> float:
    """CPU seconds (user + system) a process has used, from /proc (in clock ticks)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _event(i: int) -> dict[str, Any]:
    return {
        "specversion": "1.0",
        "id": f"evt-{i:08d}",
        "source": "/benchmarks/moto-requests",
        "type": "dev.knative.benchmark.moto",
        "time": "2026-01-31T12:00:00Z",
        "datacontenttype": "application/json",
        "data": {"order": i, "customer": f"c-{i % 97}", "lines": [{"sku": "x", "qty": 2}] * 12},
    }


def _pack(n: int) -> str:
    """A JSON text of about MESSAGE_BYTES: events inside an envelope, as a replay pack."""
    events: list[dict[str, Any]] = []
    while len(json.dumps({"pack": events})) < MESSAGE_BYTES:
        events.append(_event(n * 1000 + len(events)))
    return json.dumps({"pack": events[:-1]}, separators=(",", ":"))


def _archive_object() -> bytes:
    lines: list[str] = []
    size = 0
    while size < OBJECT_BYTES:
        line = json.dumps({"kind": "accepted", "event": _event(len(lines))})
        lines.append(line)
        size += len(line) + 1
    return ("\n".join(lines) + "\n").encode()[:OBJECT_BYTES]


def _clients(url: str) -> dict[str, Any]:
    import boto3
    from botocore.config import Config

    config = Config(retries={"max_attempts": 1}, max_pool_connections=4, read_timeout=30)
    session = boto3.session.Session(
        aws_access_key_id="testing", aws_secret_access_key="testing", region_name="us-east-1"
    )
    services = ("sqs", "s3", "dynamodb")
    return {s: session.client(s, endpoint_url=url, config=config) for s in services}


def _operations(c: dict[str, Any]) -> list[tuple[str, Callable[[int], object], Callable[[], None]]]:
    """(name, call i, set-up before its warm-up) for every operation timed."""
    sqs, s3, ddb = c["sqs"], c["s3"], c["dynamodb"]
    url = sqs.create_queue(QueueName="bench-send")["QueueUrl"]
    inbox = sqs.create_queue(QueueName="bench-receive", Attributes={"VisibilityTimeout": "600"})
    bodies = [_pack(n) for n in range(10)]
    s3.create_bucket(Bucket="bench")
    s3.put_object(Bucket="bench", Key="archive/2026/01/31/12/obj", Body=_archive_object())
    ddb.create_table(
        TableName="bench",
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"},
                   {"AttributeName": "sk", "KeyType": "RANGE"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"},
                              {"AttributeName": "sk", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )  # fmt: skip
    for i in range(10):
        ddb.put_item(TableName="bench", Item=_item("q", i))

    def send(i: int, queue: str = url) -> object:
        entries = [{"Id": str(n), "MessageBody": body} for n, body in enumerate(bodies)]
        failed = sqs.send_message_batch(QueueUrl=queue, Entries=entries).get("Failed")
        assert not failed, failed
        return None

    def fill() -> None:
        for i in range(ROUNDS + WARMUP):
            send(i, inbox["QueueUrl"])

    def receive(i: int) -> object:
        got = sqs.receive_message(
            QueueUrl=inbox["QueueUrl"], MaxNumberOfMessages=10, MessageSystemAttributeNames=["All"],
            MessageAttributeNames=["All"], WaitTimeSeconds=0,
        )  # fmt: skip
        assert len(got["Messages"]) == 10
        return None

    def get_object(i: int) -> object:
        body = s3.get_object(Bucket="bench", Key="archive/2026/01/31/12/obj")["Body"].read()
        assert len(body) == OBJECT_BYTES
        return None

    def put(i: int) -> object:
        ddb.put_item(
            TableName="bench", Item=_item("p", i),
            ConditionExpression="attribute_not_exists(pk)",
        )  # fmt: skip
        return None

    def get(i: int) -> object:
        assert "Item" in ddb.get_item(TableName="bench", Key=_key("q", i % 10))
        return None

    def query(i: int) -> object:
        got = ddb.query(
            TableName="bench", KeyConditionExpression="pk = :p AND begins_with(sk, :s)",
            ExpressionAttributeValues={":p": {"S": "q"}, ":s": {"S": "s"}},
        )  # fmt: skip
        assert got["Count"] == 10
        return None

    def nothing() -> None:
        return None

    return [
        ("sqs_send_batch", send, nothing),
        ("sqs_receive", receive, fill),
        ("s3_get", get_object, nothing),
        ("ddb_put_cond", lambda i: put(i + 1_000_000), nothing),
        ("ddb_get", get, nothing),
        ("ddb_query", query, nothing),
    ]


def _key(pk: str, i: int) -> dict[str, Any]:
    return {"pk": {"S": pk}, "sk": {"S": f"s{i:08d}"}}


def _item(pk: str, i: int) -> dict[str, Any]:
    return {**_key(pk, i), "run": {"S": "r-1"}, "offset": {"N": str(i)}, "done": {"BOOL": False}}


def main() -> None:
    aws = EmbeddedAws(port=free_port())
    url = aws.start()
    try:
        pid = aws._process.pid  # type: ignore[union-attr]
        ops = _operations(_clients(url))
        figures: dict[str, float] = {}
        rows: list[tuple[str, ...]] = []
        for name, call, prepare in ops:
            if ONLY and name not in ONLY:
                continue
            prepare()
            for i in range(WARMUP):
                call(i)
            cpu, wall = _cpu_s(pid), time.perf_counter()
            for i in range(WARMUP, WARMUP + ROUNDS):
                call(i)
            cpu, wall = _cpu_s(pid) - cpu, time.perf_counter() - wall
            figures[f"{name}_cpu_ms"] = cpu * 1000 / ROUNDS
            figures[f"{name}_wall_ms"] = wall * 1000 / ROUNDS
            rows.append((name, f"{cpu * 1000 / ROUNDS:.2f}", f"{wall * 1000 / ROUNDS:.2f}"))
    finally:
        aws.stop()
    print_table(rows, ("operation", "moto cpu ms", "wall ms"))
    write_result(
        RESULT, figures,
        f"moto's CPU and the caller's wall time per request, {ROUNDS} requests each",
        rounds=ROUNDS,
    )  # fmt: skip


if __name__ == "__main__":
    main()
