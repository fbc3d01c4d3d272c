"""The registry's event-type sample is bounded in bytes (issue 31, item 7): 250 events with 1 MB
sources held 190 MiB in one broker's sample; every key and every sample now has a byte bound,
in memory and in the store."""

from __future__ import annotations

import gc
import json
import tracemalloc
from datetime import UTC, datetime, timedelta

from chalicelib.core.cloudevents.event import CloudEvent
from chalicelib.services import event_types
from chalicelib.services.event_types import (
    MAX_PART_CHARS,
    MAX_SAMPLE_BYTES,
    MAX_STORED_BYTES,
    MAX_TOTAL_BYTES,
    SAMPLE_KIND,
    EventTypeSample,
    key_bytes,
    merge_sample,
)
from tests.fakes import MemoryStore

T0 = datetime(2030, 1, 1, tzinfo=UTC)


def _event(source: str, t: str = "t", **extra: str) -> CloudEvent:
    return CloudEvent({"specversion": "1.0", "id": "1", "type": t, "source": source, **extra})


def _sample() -> EventTypeSample:
    # a flush every event would keep nothing interesting in memory: never due here
    return EventTypeSample(MemoryStore(), interval_s=1e9, monotonic=lambda: 0.0)


def test_events_with_megabyte_sources_leave_the_sample_small() -> None:
    sample = _sample()
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for i in range(250):
            # each source allocated here and dropped by the caller after observe: what stays is
            # what the sample keeps
            sample.observe("ns", "b", [_event(f"/{i}/" + "s" * 1_000_000)])
        gc.collect()
        retained = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert retained < 1024 * 1024, f"{retained / 2**20:.0f} MiB kept by the sample"


def test_a_brokers_sample_is_bounded_in_bytes_and_the_containers_too() -> None:
    sample = _sample()
    long = "x" * (MAX_PART_CHARS - 8)
    for i in range(2000):  # ~250 bytes a key: more than a broker's budget
        sample.observe("ns", "b", [_event(f"/{i:05d}{long}", t=f"t{i % 7}")])
    sizes = {name: sum(map(key_bytes, buf.seen)) for name, buf in sample._buffers.items()}
    assert 0 < sizes["ns", "b"] <= MAX_SAMPLE_BYTES
    assert sample._total == sum(sizes.values())
    # Many brokers: the container's total stays within its budget.
    brokers = MAX_TOTAL_BYTES // MAX_SAMPLE_BYTES + 20
    for n in range(brokers):
        for i in range(260):
            sample.observe("ns", f"b{n}", [_event(f"/{i:05d}{long}")])
    assert sample._total == sum(sum(map(key_bytes, b.seen)) for b in sample._buffers.values())
    assert sample._total <= MAX_TOTAL_BYTES


def test_flushed_samples_of_other_brokers_make_room() -> None:
    store = MemoryStore()
    now = [0.0]
    sample = EventTypeSample(store, interval_s=10, monotonic=lambda: now[0])
    long = "x" * (MAX_PART_CHARS - 8)
    full = 200 * key_bytes(("t", f"/00000{long}", ""))  # a broker's 200 keys (max_types)
    brokers = MAX_TOTAL_BYTES // full + 5
    for n in range(brokers):
        now[0] += 11  # each broker's first events are flushed at once
        sample.observe("ns", f"b{n}", [_event(f"/{i:05d}{long}") for i in range(200)])
    assert store.get(SAMPLE_KIND, "ns", f"b{brokers - 1}") is not None
    last = sample._buffers["ns", f"b{brokers - 1}"]
    assert len(last.seen) == 200  # room was made: the flushed samples of others were dropped
    assert sample._total <= MAX_TOTAL_BYTES


def test_the_stored_sample_is_bounded_in_bytes_and_drops_old_oversized_rows() -> None:
    long = "y" * (MAX_PART_CHARS - 8)
    seen = {(f"t{i}", f"/{i:05d}{long}", ""): (T0, T0 + timedelta(seconds=i)) for i in range(1000)}
    oversized = {"type": "t", "source": "/" + "z" * 1_000_000, "first_seen": "2029-01-01T00:00:00Z"}
    doc = merge_sample({"types": [{**oversized, "last_seen": "2031-01-01T00:00:00Z"}]}, seen, 500)
    assert len(json.dumps(doc)) < MAX_STORED_BYTES + 200 * len(doc["types"])  # keys + framing
    assert sum(len(r["type"]) + len(r["source"]) for r in doc["types"]) <= MAX_STORED_BYTES
    assert all(len(r["source"]) <= MAX_PART_CHARS for r in doc["types"])
    kept = {r["type"] for r in doc["types"]}
    assert "t999" in kept and "t0" not in kept  # the most recently seen are kept


def test_short_keys_are_still_sampled_as_before() -> None:
    sample = _sample()
    sample.observe("ns", "b", [_event("/a"), _event("/a"), _event("/b", datacontenttype="x/y")])
    assert set(sample._buffers["ns", "b"].seen) == {("t", "/a", ""), ("t", "/b", "x/y")}
    assert event_types.MAX_PART_CHARS == 256
