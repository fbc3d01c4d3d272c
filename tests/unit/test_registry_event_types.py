"""Where the registry's event types come from: the ingress sample (bounded, flushed at most once
per interval, never per event) and the metrics job's ``event_types.json``."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from chalicelib.core.cloudevents.event import CloudEvent
from chalicelib.core.errors import UnavailableError
from chalicelib.services.event_types import (
    SAMPLE_KIND,
    EventTypeSample,
    MetricsEventTypes,
    merge_sample,
    metrics_fetcher,
    parse_metrics,
    sample_types,
)
from tests.fakes import MemoryBlobs, MemoryStore

T0 = datetime(2030, 1, 1, tzinfo=UTC)


class Times:
    def __init__(self) -> None:
        self.mono = 0.0
        self.wall = T0

    def monotonic(self) -> float:
        return self.mono

    def clock(self) -> datetime:
        return self.wall

    def advance(self, seconds: float) -> None:
        self.mono += seconds
        self.wall += timedelta(seconds=seconds)


def event(t: str, source: str = "/s", **extra: str) -> CloudEvent:
    return CloudEvent({"specversion": "1.0", "id": "1", "type": t, "source": source, **extra})


def sample(store: Any, times: Times, **kw: Any) -> EventTypeSample:
    return EventTypeSample(store, monotonic=times.monotonic, clock=times.clock, **kw)


def stored(store: MemoryStore) -> list[tuple[str, str, str | None]]:
    item = store.get(SAMPLE_KIND, "ns", "b")
    assert item is not None
    return [(o.type, o.source, o.datacontenttype) for o in sample_types("ns", "b", item.doc)]


def test_first_types_are_written_at_once_later_ones_after_the_interval() -> None:
    store, times = MemoryStore(), Times()
    s = sample(store, times, interval_s=60)
    s.observe("ns", "b", [event("a", datacontenttype="application/json"), event("a")])
    assert stored(store) == [("a", "/s", None), ("a", "/s", "application/json")]
    calls = store.calls
    for _ in range(100):
        s.observe("ns", "b", [event("a")])  # known types: no store call at all
    assert store.calls == calls
    times.advance(30)
    s.observe("ns", "b", [event("b")])
    assert [t for t, _, _ in stored(store)] == ["a", "a"]  # not yet: within the interval
    times.advance(30)
    s.observe("ns", "b", [event("a")])  # the next request after the interval writes "b"
    assert [t for t, _, _ in stored(store)] == ["a", "a", "b"]


def test_last_seen_is_refreshed_only_every_ten_intervals() -> None:
    store, times = MemoryStore(), Times()
    s = sample(store, times, interval_s=60)
    s.observe("ns", "b", [event("a")])
    first = store.get(SAMPLE_KIND, "ns", "b")
    times.advance(61)
    s.observe("ns", "b", [event("a")])
    assert store.get(SAMPLE_KIND, "ns", "b") == first
    times.advance(600)
    s.observe("ns", "b", [event("a")])
    item = store.get(SAMPLE_KIND, "ns", "b")
    assert item is not None and item.version == 2
    assert item.doc["types"][0]["last_seen"] == "2030-01-01T00:11:01.000Z"
    assert item.doc["types"][0]["first_seen"] == "2030-01-01T00:00:00.000Z"


def test_the_sample_is_bounded_per_broker() -> None:
    store, times = MemoryStore(), Times()
    s = sample(store, times, interval_s=0, max_types=3)
    s.observe("ns", "b", [event(f"t{i}") for i in range(10)])
    assert len(stored(store)) == 3


def test_brokers_are_sampled_separately() -> None:
    store, times = MemoryStore(), Times()
    s = sample(store, times)
    s.observe("ns", "b", [event("a")])
    s.observe("ns", "c", [event("z")])
    assert stored(store) == [("a", "/s", None)]
    other = store.get(SAMPLE_KIND, "ns", "c")
    assert other is not None and other.doc["types"][0]["type"] == "z"


class FailingStore(MemoryStore):
    def __init__(self) -> None:
        super().__init__()
        self.fail = 1

    def put(self, *args: Any, **kw: Any) -> Any:
        if self.fail:
            self.fail -= 1
            raise UnavailableError("throttled")
        return super().put(*args, **kw)


def test_a_failed_flush_never_raises_and_is_retried_later() -> None:
    store, times = FailingStore(), Times()
    s = sample(store, times, interval_s=60)
    s.observe("ns", "b", [event("a")])  # the store fails: no exception in the ingress path
    assert store.get(SAMPLE_KIND, "ns", "b") is None
    times.advance(60)
    s.observe("ns", "b", [])
    assert stored(store) == [("a", "/s", None)]


def test_an_unreadable_stored_sample_is_replaced() -> None:
    store, times = MemoryStore(), Times()
    store.put(SAMPLE_KIND, "ns", "b", {"types": [{"type": "x"}]}, None)
    sample(store, times).observe("ns", "b", [event("a")])
    assert stored(store) == [("a", "/s", None)]


def test_instances_merge_their_samples() -> None:
    store, times = MemoryStore(), Times()
    one, two = sample(store, times), sample(store, times)
    one.observe("ns", "b", [event("a")])
    times.advance(5)
    two.observe("ns", "b", [event("a", "/other"), event("c")])
    assert stored(store) == [("a", "/other", None), ("a", "/s", None), ("c", "/s", None)]


def test_merge_keeps_the_most_recent_entries() -> None:
    seen = {(f"t{i}", "/s", ""): (T0, T0 + timedelta(minutes=i)) for i in range(5)}
    doc = merge_sample(None, seen, limit=2)
    assert [r["type"] for r in doc["types"]] == ["t3", "t4"]
    again = merge_sample(doc, {("t3", "/s", ""): (T0 - timedelta(days=1), T0)}, limit=10)
    assert again["types"][0]["first_seen"] == "2029-12-31T00:00:00.000Z"
    assert again["types"][0]["last_seen"] == "2030-01-01T00:03:00.000Z"


# ---- event_types.json ---------------------------------------------------------------------------

ROW = {
    "namespace": "ns",
    "broker": "b",
    "event_type": "t",
    "event_source": "/s",
    "date": "2030-01-01",
    "first_seen": "2030-01-01T00:00:00.000Z",
    "last_seen": "2030-01-01T01:00:00.000Z",
    "events": 7,
}


@pytest.mark.parametrize(
    "doc",
    [
        {"schema_version": 1, "event_types": [ROW]},
        [ROW],
        [{**{k: v for k, v in ROW.items() if k not in ("event_type", "event_source", "events")},
          "type": "t", "source": "/s", "count": 7}],
    ],
)  # fmt: skip
def test_parse_metrics(doc: Any) -> None:
    (o,) = parse_metrics(json.dumps(doc).encode())
    assert (o.namespace, o.broker, o.type, o.source, o.count) == ("ns", "b", "t", "/s", 7)
    assert o.first_seen == T0 and o.last_seen == T0 + timedelta(hours=1)
    assert o.datacontenttype is None


def test_fetch_from_s3_or_a_directory(tmp_path: Path) -> None:
    blobs = MemoryBlobs()
    assert metrics_fetcher("s3://bucket/metrics/", blobs)() is None  # not written yet
    blobs.put("bucket", "metrics/event_types.json", b"[]")
    assert metrics_fetcher("s3://bucket/metrics/", blobs)() == b"[]"
    assert metrics_fetcher(str(tmp_path), blobs)() is None
    (tmp_path / "event_types.json").write_bytes(b"{}")
    assert metrics_fetcher(str(tmp_path), blobs)() == b"{}"
    assert metrics_fetcher(f"file://{tmp_path}", blobs)() == b"{}"
    assert metrics_fetcher(None, blobs)() is None


def test_metrics_are_cached_and_a_bad_file_keeps_the_last_good_one() -> None:
    answers = [json.dumps([ROW]).encode(), b"not json"]
    fetched: list[bytes] = []

    def fetch() -> bytes:
        fetched.append(answers[len(fetched)])
        return fetched[-1]

    mono = [0.0]
    metrics = MetricsEventTypes(fetch, ttl_s=60, monotonic=lambda: mono[0])
    assert [o.type for o in metrics()] == ["t"]
    assert [o.type for o in metrics()] == ["t"] and len(fetched) == 1
    mono[0] = 61
    assert [o.type for o in metrics()] == ["t"] and len(fetched) == 2
