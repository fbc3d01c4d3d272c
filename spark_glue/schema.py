"""The archive schema v1 (design.md §3), as the reader sees it: one field list, from which come the
Spark read schema (explicit: the job never infers one) and a plain-Python validator that the
writer's unit test runs against ``chalicelib/core/archive.py``.

Timestamps are read as strings and parsed in the transforms, so a bad one makes a malformed record
instead of failing the read.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

SCHEMA_VERSION = 1
KINDS = ("accepted", "rejected", "delivery", "duplicate")
OUTCOMES = ("delivered", "retry", "dead_lettered", "reply")
CORRUPT_COLUMN = "_corrupt_record"


@dataclass(frozen=True, slots=True)
class Field:
    """``type``: int, long, double, string, timestamp (RFC 3339 string), strings (list of string) or
    event (a CloudEvent in JSON format). ``nullable`` fields must be present but may be null."""

    name: str
    type: str
    nullable: bool = False


COMMON: tuple[Field, ...] = (
    Field("v", "int"),
    Field("kind", "string"),
    Field("at", "timestamp"),
    Field("namespace", "string"),
    Field("broker", "string"),
)
# The event attributes the job reads; the rest of the event (data, extensions) is skipped unparsed.
EVENT: tuple[Field, ...] = (
    Field("specversion", "string"),
    Field("id", "string"),
    Field("source", "string"),
    Field("type", "string"),
    Field("datacontenttype", "string", nullable=True),
    Field("knativearrivaltime", "timestamp", nullable=True),
)
BY_KIND: dict[str, tuple[Field, ...]] = {
    "accepted": (
        Field("event", "event"),
        Field("triggers", "strings"),
        Field("size", "long"),
    ),
    "rejected": (
        Field("status", "int"),
        Field("reason", "string"),
        Field("detail", "string"),
        Field("event_type", "string", nullable=True),
        Field("event_source", "string", nullable=True),
    ),
    "delivery": (
        Field("trigger", "string"),
        Field("event_id", "string"),
        Field("event_type", "string"),
        Field("event_source", "string"),
        Field("arrival", "timestamp"),
        Field("attempt", "int"),
        Field("status", "int", nullable=True),
        Field("outcome", "string"),
        Field("latency_ms", "double"),
    ),
    # A repeat of (source, id) within a broker's dedup window: answered 202, stored nowhere.
    # Valid (not malformed) and counted in the summary's ingress figures; no table reads it.
    "duplicate": (
        Field("event_id", "string"),
        Field("event_type", "string"),
        Field("event_source", "string"),
    ),
}


def fields(kind: str) -> tuple[Field, ...]:
    return COMMON + BY_KIND[kind]


def spark_schema() -> Any:
    """The read schema: the union of every kind's fields, plus the corrupt-record column that
    PERMISSIVE mode fills for lines that are not JSON or have a value of the wrong type."""
    from pyspark.sql import types as T

    def spark_type(f: Field) -> Any:
        if f.type == "event":
            return T.StructType([T.StructField(e.name, spark_type(e)) for e in EVENT])
        return {
            "int": T.IntegerType(),
            "long": T.LongType(),
            "double": T.DoubleType(),
            "string": T.StringType(),
            "timestamp": T.StringType(),
            "strings": T.ArrayType(T.StringType()),
        }[f.type]

    seen: dict[str, Any] = {}
    for kind in KINDS:
        for f in fields(kind):
            seen.setdefault(f.name, T.StructField(f.name, spark_type(f), True))
    return T.StructType([*seen.values(), T.StructField(CORRUPT_COLUMN, T.StringType(), True)])


def validate_record(record: dict[str, Any]) -> list[str]:
    """Problems with one decoded record (empty when it is a valid v1 record): unknown kind or
    version, missing, extra or mistyped fields. The job applies the same rules in Spark."""
    kind = record.get("kind")
    if kind not in BY_KIND:
        return [f"kind: unknown {kind!r}"]
    problems = [p for f in fields(kind) for p in _check(f, record)]
    if record.get("v") != SCHEMA_VERSION:
        problems.append(f"v: expected {SCHEMA_VERSION}")
    known = {f.name for f in fields(kind)}
    problems += [f"{name}: not in the v1 {kind} schema" for name in record if name not in known]
    return problems


def _check(f: Field, record: dict[str, Any], prefix: str = "") -> list[str]:
    where = prefix + f.name
    if f.name not in record:
        return [f"{where}: missing"]
    value = record[f.name]
    if value is None:
        return [] if f.nullable else [f"{where}: null"]
    if f.type == "event":
        if not isinstance(value, dict):
            return [f"{where}: not an object"]
        present = [e for e in EVENT if e.name in value or not e.nullable]
        return [p for e in present for p in _check(e, value, where + ".")]
    ok = _TYPE_CHECKS[f.type](value)
    return [] if ok else [f"{where}: not a {f.type}"]


def _is_int(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


_TYPE_CHECKS: dict[str, Callable[[Any], bool]] = {
    "int": _is_int,
    "long": _is_int,
    "double": lambda x: _is_int(x) or isinstance(x, float),
    "string": lambda x: isinstance(x, str),
    "timestamp": lambda x: _is_rfc3339(x),
    "strings": lambda x: isinstance(x, list) and all(isinstance(s, str) for s in x),
}


def _is_rfc3339(value: Any) -> bool:
    if not isinstance(value, str) or "T" not in value:
        return False
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return False
    return parsed.tzinfo is not None
