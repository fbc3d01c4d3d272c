"""The writer's record builders against the reader's schema (spark_glue/schema.py): the two sides of
the archive cannot drift apart without this failing."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from chalicelib.core import archive
from spark_glue import schema

AT = datetime(2024, 5, 1, 12, 30, 5, 123456, tzinfo=UTC)
EVENT = {
    "specversion": "1.0",
    "id": "e-1",
    "source": "/orders",
    "type": "com.example.order.created",
    "knativearrivaltime": "2024-05-01T12:30:05.100Z",
    "data": {"n": 1},
}


def _records() -> dict[str, dict]:
    return {
        "accepted": archive.accepted_record("ns", "default", EVENT, ["t1", "t2"], 321, AT),
        "accepted_no_match": archive.accepted_record("ns", "default", EVENT, [], 10, AT),
        "rejected": archive.rejected_record(
            "ns", "default", 400, "invalid_event", "id: missing", AT, "com.x", "/src"
        ),
        "rejected_unknown": archive.rejected_record("ns", "nope", 404, "unknown_broker", "no", AT),
        "delivery": archive.delivery_record(
            "ns",
            "default",
            "t1",
            "e-1",
            "com.x",
            "/src",
            "2024-05-01T12:30:05.100Z",
            1,
            200,
            "delivered",
            12.5,
            AT,
        ),
        "duplicate": archive.duplicate_record("ns", "default", "e-1", "com.x", "/src", AT),
        "delivery_timeout": archive.delivery_record(
            "ns",
            "default",
            "t1",
            "e-1",
            "com.x",
            "/src",
            AT - timedelta(seconds=1),
            3,
            None,
            "retry",
            30000,
            AT,
        ),
    }


@pytest.mark.parametrize("name", list(_records()))
def test_every_builder_validates_against_the_reader_schema(name: str) -> None:
    record = _records()[name]
    assert schema.validate_record(record) == []
    assert set(record) == {f.name for f in schema.fields(record["kind"])}
    # and survives the wire
    decoded = json.loads(archive.encode_line(record))
    assert schema.validate_record(decoded) == []


def test_the_reader_schema_covers_every_writer_field() -> None:
    spark_fields = {f.name for f in schema.spark_schema().fields}
    for record in _records().values():
        assert set(record) <= spark_fields
    event_fields = {f.name for f in schema.spark_schema()["event"].dataType.fields}
    assert {f.name for f in schema.EVENT if not f.nullable} <= set(EVENT) <= event_fields | {"data"}


def test_versions_and_vocabularies_agree() -> None:
    assert archive.SCHEMA_VERSION == schema.SCHEMA_VERSION
    assert archive.KINDS == schema.KINDS
    assert archive.OUTCOMES == schema.OUTCOMES


def test_validator_rejects_what_the_job_counts_as_malformed() -> None:
    good = _records()["delivery"]
    assert schema.validate_record({**good, "v": 2}) == ["v: expected 1"]
    assert schema.validate_record({**good, "kind": "other"}) == ["kind: unknown 'other'"]
    missing = {k: v for k, v in good.items() if k != "trigger"}
    assert schema.validate_record(missing) == ["trigger: missing"]
    assert schema.validate_record({**good, "attempt": "1"}) == ["attempt: not a int"]
    assert schema.validate_record({**good, "at": "yesterday"}) == ["at: not a timestamp"]
    assert schema.validate_record({**good, "extra": 1}) == ["extra: not in the v1 delivery schema"]


def test_timestamps_are_utc_milliseconds_with_z() -> None:
    record = archive.accepted_record("ns", "b", EVENT, [], 1, AT)
    assert record["at"] == "2024-05-01T12:30:05.123Z"
    plus2 = AT.astimezone(timezone(timedelta(hours=2)))
    assert archive.rfc3339(plus2) == "2024-05-01T12:30:05.123Z"
    with pytest.raises(ValueError, match="timezone"):
        archive.rfc3339(datetime(2024, 5, 1))


def test_encode_lines_is_one_json_object_per_line() -> None:
    records = list(_records().values())
    blob = archive.encode_lines(records)
    lines = blob.split(b"\n")
    assert lines[-1] == b""
    assert [json.loads(line) for line in lines[:-1]] == records


def test_archive_key_is_the_utc_hour_prefix() -> None:
    late_evening = datetime(2024, 5, 1, 23, 59, tzinfo=timezone(timedelta(hours=-2)))
    assert archive.archive_key(late_evening, "part-1") == "archive/2024/05/02/01/part-1"
    with pytest.raises(ValueError):
        archive.archive_key(AT, "")


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: archive.rejected_record("n", "b", 400, "nope", "d", AT), "reason"),
        (lambda: archive.rejected_record("n", "b", 200, "bad_path", "d", AT), "4xx or 5xx"),
        (
            lambda: archive.delivery_record(
                "n", "b", "t", "i", "ty", "s", "2024-05-01T00:00:00Z", 0, 200, "delivered", 1, AT
            ),
            "1-based",
        ),
        (
            lambda: archive.delivery_record(
                "n", "b", "t", "i", "ty", "s", "2024-05-01T00:00:00Z", 1, 200, "ok", 1, AT
            ),
            "outcome",
        ),
        (lambda: archive.accepted_record("n", "b", {"id": "x"}, [], 1, AT), "specversion"),
    ],
)
def test_builders_refuse_values_outside_the_schema(call, message) -> None:
    with pytest.raises(ValueError, match=message):
        call()


def test_rejection_detail_is_bounded() -> None:
    record = archive.rejected_record("n", "b", 413, "too_large", "x" * 1000, AT)
    assert len(record["detail"]) == 200


@given(
    st.datetimes(
        min_value=datetime(1970, 1, 1),
        max_value=datetime(9999, 12, 30),
        timezones=st.sampled_from([UTC, timezone(timedelta(hours=5, minutes=30))]),
    ),
    st.datetimes(min_value=datetime(1970, 1, 1), timezones=st.just(UTC)),
)
def test_rfc3339_is_utc_milliseconds_whatever_came_before(a: datetime, b: datetime) -> None:
    for at in (a, b, a, datetime.min.replace(tzinfo=UTC)):
        expected = at.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
        assert archive.rfc3339(at) == expected
