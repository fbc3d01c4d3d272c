"""A small hand-built archive, written with the writer's own builders, and the figures it must give,
worked out by hand below each group of records.

Broker ns/b1, hours 10, 11 (no traffic) and 12 UTC of 2024-05-01; broker ns/b2, hour 12.
"""

from __future__ import annotations

import gzip
from datetime import UTC, datetime
from pathlib import Path

from chalicelib.core import archive


def at(hh: int, mm: int, ss: int = 0, ms: int = 0) -> datetime:
    return datetime(2024, 5, 1, hh, mm, ss, ms * 1000, tzinfo=UTC)


A, B, C = "com.example.a", "com.example.b", "com.example.c"
S1, S2, S3 = "/s1", "/s2", "/s3"


def event(eid: str, etype: str, source: str, arrival: datetime) -> dict:
    return {
        "specversion": "1.0",
        "id": eid,
        "source": source,
        "type": etype,
        "knativearrivaltime": archive.rfc3339(arrival),
        "data": {"nested": [1, {"x": "y"}], "text": "not read by the job"},
    }


def acc(eid: str, etype: str, source: str, triggers: list[str], size: int, when: datetime) -> dict:
    return archive.accepted_record(
        "ns", "b1", event(eid, etype, source, when), triggers, size, when
    )


def dlv(trigger, eid, etype, source, arrival, attempt, status, outcome, latency, when) -> dict:
    return archive.delivery_record(
        "ns", "b1", trigger, eid, etype, source, arrival, attempt, status, outcome, latency, when
    )


T10 = {name: at(10, m) for name, m in (("e1", 0), ("e2", 10), ("e3", 20), ("e6", 40), ("e7", 50))}
E4 = at(12, 5)

HOUR10 = [
    acc("e1", A, S1, ["t1", "t2"], 100, T10["e1"]),
    acc("e2", A, S1, [], 50, T10["e2"]),
    acc("e3", B, S2, ["t1"], 70, T10["e3"]),
    acc("e6", B, S2, ["t1"], 10, T10["e6"]),
    acc("e7", A, S1, ["t1"], 10, T10["e7"]),
    archive.rejected_record("ns", "b1", 400, "invalid_event", "id: missing", at(10, 30)),
    archive.rejected_record("ns", "b1", 400, "invalid_event", "id: missing", at(10, 32)),
    archive.rejected_record("ns", "b1", 404, "unknown_broker", "no broker", at(10, 31)),
    # t1/e1: a 503 then delivered, 400 ms after arrival
    dlv("t1", "e1", A, S1, T10["e1"], 1, 503, "retry", 5.0, at(10, 0, 0, 50)),
    dlv("t1", "e1", A, S1, T10["e1"], 2, 200, "delivered", 7.0, at(10, 0, 0, 400)),
    # t2/e1: answered with a reply event after 30 ms
    dlv("t2", "e1", A, S1, T10["e1"], 1, 200, "reply", 11.0, at(10, 0, 0, 30)),
    # t1/e3: timeout, 500, then 400: dead-lettered
    dlv("t1", "e3", B, S2, T10["e3"], 1, None, "retry", 30.0, at(10, 20, 0, 100)),
    dlv("t1", "e3", B, S2, T10["e3"], 2, 500, "retry", 3.0, at(10, 20, 0, 300)),
    dlv("t1", "e3", B, S2, T10["e3"], 3, 400, "dead_lettered", 2.0, at(10, 20, 1, 0)),
    dlv("t1", "e6", B, S2, T10["e6"], 1, 200, "delivered", 9.0, at(10, 40, 0, 100)),
    dlv("t1", "e7", A, S1, T10["e7"], 1, 202, "delivered", 8.0, at(10, 50, 0, 200)),
]
HOUR10_B = [HOUR10[0]]  # a duplicate of e1's accepted record, in another file
HOUR12 = [
    dlv("t1", "e4", A, S1, E4, 1, 200, "delivered", 4.0, at(12, 5, 0, 20)),
    archive.rejected_record("ns", "b1", 413, "too_large", "too large", at(12, 6)),
]
HOUR12_GZ = [  # gzip, Firehose-style name without extension when staged from S3
    archive.accepted_record("ns", "b2", event("f1", C, S3, at(12, 30)), [], 5, at(12, 30)),
    HOUR12[0],  # a duplicate of t1/e4's delivery
]
HOUR13 = [acc("e4", A, S1, ["t1"], 30, E4)]  # late: at 12:05, filed under hour 13
MALFORMED = [
    b"not json at all",
    b'{"v":2,"kind":"accepted","at":"2024-05-01T10:00:00.000Z","namespace":"ns","broker":"b1"}',
    b'{"v":1,"kind":"weird","at":"2024-05-01T10:00:00.000Z","namespace":"ns","broker":"b1"}',
    archive.encode_line({k: v for k, v in HOUR10[8].items() if k != "trigger"}).strip(),
    archive.encode_line({**HOUR10[1], "at": "yesterday"}).strip(),
    archive.encode_line({**HOUR10[8], "attempt": "first"}).strip(),
]

FILES: dict[str, bytes] = {
    "archive/2024/05/01/10/stream-1-2024-05-01-10-00-00-a": archive.encode_lines(HOUR10)
    + b"\n".join(MALFORMED)
    + b"\n",
    "archive/2024/05/01/10/stream-1-2024-05-01-10-59-00-b": archive.encode_lines(HOUR10_B),
    "archive/2024/05/01/12/stream-1-2024-05-01-12-00-00-a": archive.encode_lines(HOUR12),
    "archive/2024/05/01/12/stream-1-2024-05-01-12-30-00-b.gz": gzip.compress(
        archive.encode_lines(HOUR12_GZ)
    ),
    "archive/2024/05/01/13/stream-1-2024-05-01-13-00-00-a": archive.encode_lines(HOUR13),
}

LINES = len(HOUR10) + len(MALFORMED) + len(HOUR10_B) + len(HOUR12) + len(HOUR12_GZ) + len(HOUR13)


def write(root: Path) -> Path:
    for key, body in FILES.items():
        path = root / key
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(body)
    return root


# ---- expected figures, by hand ------------------------------------------------------------------
# b1 hour 10: accepted e1 e2 e3 e6 e7 (the e1 copy counts once) = 5; matched e1 e3 e6 e7 = 4;
# no match e2 = 1; trigger matches 2+0+1+1+1 = 5; bytes 100+50+70+10+10 = 240; rejected 3.
# b1 hour 11: no traffic, a row of zeros. b1 hour 12: e4 (late, filed under 13) and a 413.
# b2 hour 12: f1, no match, 5 bytes.
BROKER_HOURLY = {
    ("b1", 10): dict(accepted=5, rejected=3, matched=4, no_match=1, trigger_matches=5,
                     accepted_bytes=240),
    ("b1", 11): dict(accepted=0, rejected=0, matched=0, no_match=0, trigger_matches=0,
                     accepted_bytes=0),
    ("b1", 12): dict(accepted=1, rejected=1, matched=1, no_match=0, trigger_matches=1,
                     accepted_bytes=30),
    ("b2", 12): dict(accepted=1, rejected=0, matched=0, no_match=1, trigger_matches=0,
                     accepted_bytes=5),
}  # fmt: skip
REJECTIONS = {
    ("b1", 10, "invalid_event", 400): 2,
    ("b1", 10, "unknown_broker", 404): 1,
    ("b1", 12, "too_large", 413): 1,
}
# t1 hour 10: attempts e1×2, e3×3, e6, e7 = 7; delivered e1#2, e6, e7 = 3; retries e1#1, e3#1,
# e3#2 = 3; dead-lettered e3#3; transport error e3#1. Latencies (at - arrival) 400, 100, 200:
# p50 = 200; p95 at rank 0.95×2 = 1.9 -> 200 + 0.9×(400-200) = 380; p99 -> 200 + 0.98×200 = 396.
# Mean attempt duration (5+7+30+3+2+9+8)/7 = 64/7.
TRIGGER_HOURLY = {
    ("t1", 10): dict(attempts=7, delivered=3, replies=0, retries=3, dead_lettered=1,
                     transport_errors=1, latency_p50_ms=200.0, latency_p95_ms=380.0,
                     latency_p99_ms=396.0, attempt_ms_avg=64 / 7),
    ("t1", 11): dict(attempts=0, delivered=0, replies=0, retries=0, dead_lettered=0,
                     transport_errors=0, latency_p50_ms=None, latency_p95_ms=None,
                     latency_p99_ms=None, attempt_ms_avg=None),
    ("t1", 12): dict(attempts=1, delivered=1, replies=0, retries=0, dead_lettered=0,
                     transport_errors=0, latency_p50_ms=20.0, latency_p95_ms=20.0,
                     latency_p99_ms=20.0, attempt_ms_avg=4.0),
    ("t2", 10): dict(attempts=1, delivered=1, replies=1, retries=0, dead_lettered=0,
                     transport_errors=0, latency_p50_ms=30.0, latency_p95_ms=30.0,
                     latency_p99_ms=30.0, attempt_ms_avg=11.0),
}  # fmt: skip
BROKER_EVENT_TYPES = {
    ("b1", 10, A, S1): 3,  # e1 e2 e7
    ("b1", 10, B, S2): 2,  # e3 e6
    ("b1", 12, A, S1): 1,  # e4
    ("b2", 12, C, S3): 1,  # f1
}
EVENT_TYPES = {  # (broker, type, source): (first seen, last seen, events) on 2024-05-01
    ("b1", A, S1): (at(10, 0), at(12, 5), 4),
    ("b1", B, S2): (at(10, 20), at(10, 40), 2),
    ("b2", C, S3): (at(12, 30), at(12, 30), 1),
}
MALFORMED_BY_REASON = {
    "unparsable": 2,  # not JSON; "attempt": "first"
    "unknown_version": 1,
    "unknown_kind": 1,
    "missing_field": 1,  # a delivery without trigger
    "bad_timestamp": 1,  # "at": "yesterday"
}
RECORDS = 7 + 4 + 9  # accepted (b1 6, b2 1), rejected 4, delivery attempts 9
# All successful latencies: 20 30 100 200 400 -> p50 100; p95 rank 3.8 -> 200 + 0.8×200 = 360;
# p99 rank 3.96 -> 200 + 0.96×200 = 392.
DELIVERY = dict(attempts=9, delivered=5, replies=1, retries=3, dead_lettered=1,
                transport_errors=1, latency_p50_ms=100.0, latency_p95_ms=360.0,
                latency_p99_ms=392.0)  # fmt: skip
SUMMARY_INPUT = dict(lines=LINES, records=RECORDS, malformed=6, duplicates=2, late=1)
