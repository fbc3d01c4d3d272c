"""The local runtime's stream poller and bucket events (brokerctl/source_pollers.py) on fakes: a
batch that names a failed record is handed over again from that record, the others not twice;
a bucket's first listing is a baseline and only objects new or changed after it are events."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from brokerctl import source_pollers
from brokerctl.source_pollers import BucketEvents, _StreamMapping, _StreamPoller, stream_record

STREAM = "arn:aws:dynamodb:us-east-1:123456789012:table/orders/stream/2026-11-28T00:00:00.000"


def record(seq: int) -> dict[str, Any]:
    return {
        "eventID": f"e{seq}",
        "eventName": "INSERT",
        "dynamodb": {
            "ApproximateCreationDateTime": datetime(2026, 11, 28, tzinfo=UTC),
            "Keys": {"id": {"S": str(seq)}},
            "SequenceNumber": str(seq),
        },
    }


def test_a_stream_record_is_handed_over_as_lambda_does() -> None:
    out = stream_record(record(1), STREAM, "us-east-1")
    assert out["eventSource"] == "aws:dynamodb" and out["eventSourceARN"] == STREAM
    assert out["dynamodb"]["ApproximateCreationDateTime"] == 1795824000
    json.dumps(out)  # as Lambda's JSON event


def test_a_failed_record_comes_back_with_those_after_it(monkeypatch: Any) -> None:
    monkeypatch.setattr(source_pollers, "STREAM_POLL_SECONDS", 0.0)
    seen: list[list[str]] = []

    def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        ids = [r["dynamodb"]["SequenceNumber"] for r in event["Records"]]
        seen.append(ids)
        if len(seen) == 1:
            return {"batchItemFailures": [{"itemIdentifier": "2"}]}
        return {"batchItemFailures": []}

    mapping = _StreamMapping("u", STREAM, "sources", 10, report_failures=True)
    poller = _StreamPoller(mapping, None, handler, "us-east-1", lambda line: None)
    poller._deliver([stream_record(record(n), STREAM, "us-east-1") for n in (1, 2, 3)])
    assert seen == [["1", "2", "3"], ["2", "3"]]


class FakeClients:
    def __init__(self) -> None:
        self.objects: dict[str, str] = {}
        pattern = {"detail": {"bucket": {"name": ["pics"]}}}
        self.rules = [{"Name": "sb-local-s3-1", "EventPattern": json.dumps(pattern)}]

    def client(self, service: str) -> Any:
        return self

    def list_rules(self, **_: Any) -> dict[str, Any]:
        return {"Rules": self.rules}

    def list_objects_v2(self, **_: Any) -> dict[str, Any]:
        return {"Contents": [{"Key": k, "ETag": f'"{v}"'} for k, v in self.objects.items()]}


def test_only_objects_after_the_first_listing_are_events() -> None:
    clients = FakeClients()
    clients.objects = {"old.png": "a"}
    got: list[dict[str, Any]] = []
    events = BucketEvents(
        clients,  # type: ignore[arg-type]
        "sb-local-",
        lambda event, context: got.append(event),
        "sources",
        "us-east-1",
        lambda line: None,
    )
    events.poke()  # the rule was made: the baseline
    assert events.scan(emit=True) == 0
    clients.objects |= {"new.png": "b"}
    clients.objects["old.png"] = "c"  # overwritten: a new Object Created
    assert events.scan(emit=True) == 2
    assert sorted(e["detail"]["object"]["key"] for e in got) == ["new.png", "old.png"]
    assert all(e["source"] == "aws.s3" and e["detail-type"] == "Object Created" for e in got)
    assert events.scan(emit=True) == 0  # nothing twice
    clients.rules = []
    assert events.scan(emit=True) == 0 and events._seen == {}  # the rule went: forgotten
