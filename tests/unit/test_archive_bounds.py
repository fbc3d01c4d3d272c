"""An archive record is never over Firehose's 1,000 KiB, whatever the attributes of an event
archived by reference (issue 31, item 6): values cut at 4,096 characters were not enough with
many attributes, escaped characters or long names."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from chalicelib.core import archive
from chalicelib.core.cloudevents.json_format import dumps_utf8

AT = datetime(2030, 1, 1, tzinfo=UTC)
REQUIRED = {"specversion": "1.0", "id": "e1", "source": "/s", "type": "t"}


def _record(event: dict[str, Any]) -> tuple[dict[str, Any], bytes]:
    record = archive.accepted_record("ns", "b", event, ["t1"], 4_000_000, AT, "s3://b/k")
    return record, archive.encode_line(record)


@pytest.mark.parametrize(
    "extra",
    [
        {f"x{i}": "a" * 4000 for i in range(1000)},  # each under 4,096 characters
        {f"x{i}": "\x01" * 4000 for i in range(300)},  # 6 bytes each once escaped
        {f"x{i}": "\U0001f600" * 4000 for i in range(300)},  # 4 bytes each in UTF-8
        {"n" * 2_000_000: "v", "short": "kept"},  # a name nothing else bounds
        {f"{'n' * 5000}{i}": "v" for i in range(400)},  # many long names
    ],
    ids=["many", "escaped", "astral", "huge-name", "long-names"],
)
def test_a_by_reference_record_fits_firehose(extra: dict[str, Any]) -> None:
    record, line = _record({**REQUIRED, **extra, "data": "x"})
    assert len(line) <= archive.MAX_RECORD_BYTES
    assert len(dumps_utf8(record["event"])) <= archive.MAX_REFERENCED_EVENT_BYTES
    assert {k: record["event"][k] for k in REQUIRED} == REQUIRED
    listed = set(record.get("truncated", []))
    for name, value in extra.items():  # what is not whole is named, as far as names fit
        if record["event"].get(name) != value and len(name) < 100:
            assert name in listed


def test_required_attributes_of_a_megabyte_each_are_cut_first_not_dropped() -> None:
    event = {k: "\x01" * 1_000_000 for k in ("id", "source", "type")}
    record, line = _record({"specversion": "1.0", **event, "x": "y"})
    assert len(line) <= archive.MAX_RECORD_BYTES
    for name in ("id", "source", "type"):
        assert record["event"][name] == "\x01" * archive.MAX_REFERENCED_ATTRIBUTE_CHARS
    assert record["event"]["x"] == "y"  # short ones fit beside them
    assert record["truncated"] == ["id", "source", "type"]


def test_a_small_event_keeps_every_attribute_whole() -> None:
    record, _ = _record({**REQUIRED, "knativebrokerttl": 254, "b": "2", "a": "1"})
    assert record["event"] == {**REQUIRED, "knativebrokerttl": 254, "b": "2", "a": "1"}
    assert "truncated" not in record
