"""The Replay kind (parse, admit, status) and reading the archive back (keys, order, gzip)."""

from __future__ import annotations

import gzip
import json
from datetime import UTC, datetime

import pytest

from chalicelib.core import archive_reader as reader
from chalicelib.core.errors import ImmutableFieldError, ValidationError
from chalicelib.core.resources import replay as rp

NOW = datetime(2026, 1, 31, 12, 0, tzinfo=UTC)
SPEC = {"from": "2026-01-31T10:00:00Z", "to": "2026-01-31T12:30:00+01:00"}


def _parse(spec: dict[str, object], path: str = "default/r1", **meta: object) -> rp.Replay:
    return rp.parse_replay("ns", {"metadata": meta, "spec": spec}, path)


def _problems(spec: object, path: str = "default/r1", **meta: object) -> dict[str, str]:
    with pytest.raises(ValidationError) as err:
        rp.parse_replay("ns", {"metadata": meta, "spec": spec}, path)
    return {p.field: p.message for p in err.value.problems}


def test_parse_normalises_times_and_keeps_the_broker_and_short_name() -> None:
    replay = _parse({**SPEC, "triggers": ["a"], "filters": [{"exact": {"type": "t"}}]})
    assert (replay.broker, replay.short_name, replay.name) == ("default", "r1", "default/r1")
    assert (replay.start, replay.end) == ("2026-01-31T10:00:00.000Z", "2026-01-31T11:30:00.000Z")
    assert replay.triggers == ("a",)


@pytest.mark.parametrize(
    ("spec", "field", "words"),
    [
        ({"to": SPEC["to"]}, "spec.from", "required"),
        ({**SPEC, "from": "2026-01-31"}, "spec.from", "RFC 3339"),
        ({**SPEC, "from": "2026-01-31T10:00:00"}, "spec.from", "zone"),
        ({**SPEC, "from": 3}, "spec.from", "string"),
        ({**SPEC, "from": "0001-01-01T00:00:00+01:00"}, "spec.from", "RFC 3339"),
        ({**SPEC, "to": "9999-12-31T23:59:59-01:00"}, "spec.to", "RFC 3339"),
        ({"from": "2026-01-31T10:00:00Z", "to": "2026-01-31T10:00:00Z"}, "spec.to", "after"),
        ({"from": "2026-01-01T00:00:00Z", "to": "2026-06-01T00:00:00Z"}, "spec.to", "at most"),
        ({**SPEC, "triggers": []}, "spec.triggers", "non-empty"),
        ({**SPEC, "triggers": ["a"] * 101}, "spec.triggers", "at most"),
        ({**SPEC, "triggers": ["Bad_Name"]}, "spec.triggers[0]", "name"),
        ({**SPEC, "triggers": ["a", "a"]}, "spec.triggers[1]", "twice"),
        ({**SPEC, "filters": [{"nope": {}}]}, "spec.filters[0].nope", "dialect"),
        ({**SPEC, "filters": {"exact": {}}}, "spec.filters", "list"),
        ({**SPEC, "extra": 1}, "spec.extra", "unknown"),
    ],
)
def test_parse_names_each_problem(spec: dict[str, object], field: str, words: str) -> None:
    problems = _problems(spec)
    assert field in problems, problems
    assert words in problems[field]


def test_parse_reports_every_problem_at_once_including_the_path() -> None:
    problems = _problems({"from": "x", "to": "y"}, path="Bad/Also_bad", name="other")
    assert {"spec.from", "spec.to", "path.broker", "metadata.name"} <= set(problems)


def test_the_spec_is_immutable_and_a_same_put_changes_nothing() -> None:
    first = rp.admit_replay(_parse(SPEC), None, uid="u1", now=NOW)
    assert (first.uid, first.generation) == ("u1", 1)
    again = rp.admit_replay(_parse(SPEC), first, uid="u2", now=NOW)
    assert (again.uid, again.generation) == ("u1", 1)
    with pytest.raises(ImmutableFieldError) as err:
        rp.admit_replay(_parse({**SPEC, "triggers": ["b"]}), first, uid="u3", now=NOW)
    assert [p.field for p in err.value.problems] == ["spec.triggers"]


def test_a_new_replay_cannot_start_in_the_future() -> None:
    with pytest.raises(ValidationError) as err:
        rp.admit_replay(_parse(SPEC), None, uid="u", now=datetime(2026, 1, 31, 9, tzinfo=UTC))
    assert [p.field for p in err.value.problems] == ["spec.from"]


def test_json_and_item_round_trip_under_the_broker() -> None:
    replay = rp.admit_replay(_parse({**SPEC, "triggers": ["a"]}), None, uid="u", now=NOW)
    doc = rp.REPLAYS.to_json(replay, {})
    assert doc["metadata"]["name"] == "r1" and doc["metadata"]["broker"] == "default"
    assert doc["spec"] == {
        "from": "2026-01-31T10:00:00.000Z",
        "to": "2026-01-31T11:30:00.000Z",
        "triggers": ["a"],
    }
    assert rp.REPLAYS.from_item(json.loads(json.dumps(rp.REPLAYS.to_item(replay)))) == replay


def _conditions(status: dict[str, object]) -> dict[str, tuple[str, str]]:
    out = {}
    for c in status["conditions"]:  # type: ignore[attr-defined]
        out[c["type"]] = (c["status"], c.get("reason", ""))
    return out


@pytest.mark.parametrize(
    ("state", "broker", "missing", "ready", "succeeded"),
    [
        ({"phase": "Pending"}, True, (), ("True", ""), ("Unknown", "Pending")),
        ({"phase": "Running"}, True, (), ("True", ""), ("Unknown", "Running")),
        ({"phase": "Succeeded"}, True, (), ("True", ""), ("True", "Completed")),
        (
            {"phase": "Failed", "reason": "TriggerNotFound"},
            True,
            (),
            ("True", ""),
            ("False", "TriggerNotFound"),
        ),
        (
            {"phase": "Running"},
            False,
            (),
            ("False", "BrokerDoesNotExist"),
            ("Unknown", "BrokerDoesNotExist"),
        ),
        (
            {"phase": "Pending"},
            True,
            ("x",),
            ("False", "TriggerNotFound"),
            ("Unknown", "TriggerNotFound"),
        ),
    ],
)
def test_status_conditions_follow_the_runner_and_the_broker(
    state: dict[str, str],
    broker: bool,
    missing: tuple[str, ...],
    ready: tuple[str, str],
    succeeded: tuple[str, str],
) -> None:
    replay = _parse(SPEC)
    status = rp.replay_status(
        replay, state, broker_exists=broker, missing_triggers=missing, now=NOW
    )
    got = _conditions(status)
    assert got["Ready"] == ready
    assert got["Succeeded"] == succeeded
    assert status["progress"] == {"eventsRead": 0, "eventsEnqueued": 0}


def test_progress_reports_counters_and_the_last_arrival() -> None:
    state = {"events_read": 5, "events_enqueued": 9, "events_missing": 1, "last_arrival": "T"}
    assert rp.progress_json(state) == {
        "eventsRead": 5,
        "eventsEnqueued": 9,
        "eventsMissing": 1,
        "lastArrivalTime": "T",
    }


# ---- the archive reader ---------------------------------------------------------------------


def test_hour_of_key_reads_firehose_layouts_and_refuses_others() -> None:
    assert reader.hour_of_key("archive/2026/01/31/09/s-1-2026-01-31-09-59-59-x") == datetime(
        2026, 1, 31, 9, tzinfo=UTC
    )
    assert reader.hour_of_key("archive/!{timestamp:yyyy}/x") is None
    assert reader.hour_of_key("archive/2026/13/31/09/x") is None


def test_the_listing_bounds_cover_the_range_and_firehoses_buffer() -> None:
    start = datetime(2026, 1, 31, 9, 59, tzinfo=UTC)
    assert reader.first_key_bound("archive/", start) == "archive/2026/01/31/09/"
    # Firehose files an object under its oldest record's hour: a record received at 10:05 may be
    # in an object of 09:55's hour (its buffer is up to 900 s), so the listing starts there.
    assert reader.first_key_bound("archive/", start.replace(hour=10, minute=5)) == (
        "archive/2026/01/31/09/"
    )
    assert reader.first_key_bound("archive/", start.replace(hour=10, minute=16)) == (
        "archive/2026/01/31/10/"
    )
    assert reader.last_hour(datetime(2026, 1, 31, 10, 50, tzinfo=UTC)) == datetime(
        2026, 1, 31, 11, tzinfo=UTC
    )
    assert reader.last_hour(datetime(2026, 1, 31, 10, 10, tzinfo=UTC)) == datetime(
        2026, 1, 31, 10, tzinfo=UTC
    )


def _line(at: str, **extra: object) -> bytes:
    record = {"v": 1, "kind": "accepted", "at": at, "namespace": "ns", "broker": "b"}
    record["event"] = {"id": at}
    record.update(extra)
    return json.dumps(record).encode() + b"\n"


def test_records_of_an_object_are_sorted_by_time_stably_and_gzip_is_read() -> None:
    blob = (
        _line("2026-01-01T00:00:02.000Z")
        + b"not json\n"
        + _line("2026-01-01T00:00:01.000Z", n=1)
        + b"\n"
        + _line("2026-01-01T00:00:01.000Z", n=2)
    )
    for data in (blob, gzip.compress(blob)):
        records = reader.object_records("k", data).records
        assert records[0] is None  # an unreadable line: kept (it has a position), never replayed
        assert [r["at"][17:19] + str(r.get("n", "")) for r in records[1:]] == ["011", "012", "02"]


def test_a_corrupt_gzip_object_is_an_error() -> None:
    with pytest.raises(ValueError, match="gzip"):
        reader.object_records("k", b"\x1f\x8bnot really")


@pytest.mark.parametrize(
    ("record", "chosen"),
    [
        ({}, True),
        ({"kind": "rejected"}, False),
        ({"kind": "duplicate"}, False),
        ({"v": 2}, False),
        ({"broker": "other"}, False),
        ({"namespace": "other"}, False),
        ({"at": "2026-01-01T00:59:59.999Z"}, False),
        ({"at": "2026-01-01T01:00:00.000Z"}, True),
        ({"at": "2026-01-01T02:00:00.000Z"}, False),
        ({"event": "x"}, False),
    ],
)
def test_only_accepted_records_of_the_broker_in_the_range_are_selected(
    record: dict[str, object], chosen: bool
) -> None:
    base = json.loads(_line("2026-01-01T01:30:00.000Z"))
    full = {**base, **record}
    start, end = "2026-01-01T01:00:00.000Z", "2026-01-01T02:00:00.000Z"
    assert reader.selected(full, "ns", "b", start, end) is chosen


def test_s3_addresses() -> None:
    assert reader.s3_address("s3://bucket/claims/a/b.json") == ("bucket", "claims/a/b.json")
    for bad in ("http://x/y", "s3://bucket", "s3:///key"):
        with pytest.raises(ValueError):
            reader.s3_address(bad)
