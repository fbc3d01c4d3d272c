"""Replays over the fakes (docs/replay.md): the API, which triggers receive replayed events, large
events read back by reference, resumption after a crash, time budgets and cancellation."""

from __future__ import annotations

import json
import threading
import time
from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest

from chalicelib.core import names
from chalicelib.core.clock import rfc3339, utcnow
from chalicelib.core.cloudevents.sqs_message import (
    PACK_MAX_BYTES,
    PACK_MAX_EVENTS,
    SQS_MAX_BATCH_BYTES,
    decode_message,
)
from chalicelib.core.delivery import ordering
from chalicelib.core.errors import (
    ConflictError,
    ImmutableFieldError,
    NotFoundError,
    UnavailableError,
    ValidationError,
)
from chalicelib.core.resources.replay import MAX_ACTIVE_PER_NAMESPACE, REPLAYS, store_name
from chalicelib.core.resources.trigger import DELIVERY_ORDER_ANNOTATION
from chalicelib.ports import HttpResponse
from chalicelib.services.ingress import Ingress, send_in_batches
from chalicelib.services.replay_runner import BATCH_EVENTS, SQS_BATCH, ReplayRunner, RunnerOptions
from chalicelib.services.resources import Resources
from chalicelib.services.routing import load_broker_config
from tests.fakes import MemoryQueues, MemoryStore
from tests.functional.harness import Harness
from tests.functional.replay_support import (
    drain,
    drain_bodies,
    flush_archive,
    harness,
    put_replay,
    window,
)

JAN_1 = {"spec": {"from": "2026-01-01T00:00:00Z", "to": "2026-01-02T00:00:00Z"}}


def _setup(triggers: dict[str, dict[str, str] | None] | None = None) -> Harness:
    h = harness()
    h.broker()
    for name, filt in (triggers or {"a": None, "b": {"type": "b"}}).items():
        h.trigger(name, filter=filt)
    return h


def _send(h: Harness, n: int, type_: str = "t", start: int = 0) -> None:
    for i in range(start, start + n):
        assert h.send(type_=type_, id_=f"e{i}").status == 202


def _ids(messages: list[dict[str, Any]]) -> list[str]:
    return [m["event"]["id"] for m in messages]


def _status(h: Harness, name: str) -> dict[str, Any]:
    status: dict[str, Any] = h.container.replays.get("ns", "default", name)["status"]
    return status


def _condition(status: dict[str, Any], type_: str) -> dict[str, Any]:
    return next(c for c in status["conditions"] if c["type"] == type_)


def test_replay_sends_archived_events_to_matching_triggers_only_with_replayname() -> None:
    h = _setup({"a": None, "b": {"type": "b"}, "c": {"type": "t"}})
    start, _ = window()
    _send(h, 12)
    _send(h, 2, type_="b", start=100)
    flush_archive(h)
    for t in "abc":
        drain(h, t)
    _, end = window()
    put_replay(h, "r1", start, end, triggers=["a", "b"])
    assert h.container.replay_runner.run("ns", "default", "r1", 10.0)
    got_a, got_b, got_c = drain(h, "a"), drain(h, "b"), drain(h, "c")
    # A standard queue's SendMessageBatch calls of one replay batch go side by side: any order.
    assert sorted(_ids(got_a)) == sorted([f"e{i}" for i in range(12)] + ["e100", "e101"])
    assert _ids(got_b) == ["e100", "e101"]  # b's own filter still applies
    assert got_c == []  # not chosen: never hit, although its filter matches
    assert {m["event"]["replayname"] for m in got_a + got_b} == {"r1"}
    assert all("knativearrivaltime" in m["event"] for m in got_a)
    status = _status(h, "r1")
    assert _condition(status, "Succeeded")["status"] == "True"
    assert _condition(status, "Ready")["status"] == "True"
    assert status["progress"]["eventsRead"] == 14
    assert status["progress"]["eventsEnqueued"] == 16
    assert status["progress"]["lastArrivalTime"]


def test_default_triggers_are_every_matching_trigger_and_spec_filters_apply_on_top() -> None:
    h = _setup({"a": None, "b": {"type": "b"}})
    start, _ = window()
    _send(h, 3)
    _send(h, 3, type_="b", start=10)
    flush_archive(h, gzip=True)
    drain(h, "a"), drain(h, "b")
    _, end = window()
    put_replay(h, "only-b", start, end, filters=[{"prefix": {"type": "b"}}])
    assert h.container.replay_runner.run("ns", "default", "only-b", 10.0)
    assert _ids(drain(h, "a")) == ["e10", "e11", "e12"]
    assert _ids(drain(h, "b")) == ["e10", "e11", "e12"]


def test_events_outside_the_range_or_of_other_brokers_are_not_replayed() -> None:
    h = _setup({"a": None})
    h.broker(name="other")
    h.trigger("x", broker="other")
    _send(h, 2)
    h.post(
        {"ce-specversion": "1.0", "ce-id": "o1", "ce-source": "/s", "ce-type": "t"},
        b"",
        broker="other",
    )
    flush_archive(h)
    drain(h, "a")
    start, end = window()
    put_replay(h, "early", start - timedelta(minutes=1), start)
    put_replay(h, "all", start, end)
    runner = h.container.replay_runner
    assert runner.run("ns", "default", "early", 1.0)
    assert drain(h, "a") == []
    assert runner.run("ns", "default", "all", 1.0)
    assert _ids(drain(h, "a")) == ["e0", "e1"]


def test_large_events_archived_by_reference_are_replayed_whole() -> None:
    h = _setup({"a": None})
    start, _ = window()
    big = b"x" * (300 * 1024)
    assert h.send(id_="big", data=big).status == 202
    key = flush_archive(h)
    drain(h, "a")
    (record,) = (json.loads(line) for line in h.blobs.get(h.settings.archive_bucket, key).split())
    assert "dataref" in record and "data_base64" not in record["event"]
    # Kept with the archive's lifecycle, not the claim bucket's 14-day expiry (docs/replay.md).
    archive = h.settings.archive_bucket
    assert record["dataref"].startswith(f"s3://{archive}/archive-payloads/ns/default/")
    _, end = window()
    put_replay(h, "big", start, end)
    assert h.container.replay_runner.run("ns", "default", "big", 10.0)
    queued = h.container.claims.load(decode_message(_raw(h, "a")))
    assert queued.id == "big" and queued.data == big
    assert queued.get("replayname") == "big"


def test_replays_to_an_ordered_trigger_keep_each_partitionkey_in_its_fifo_group() -> None:
    h = harness()
    h.broker()
    h.container.triggers.put(
        "ns",
        "o",
        {
            "metadata": {"name": "o", "annotations": {DELIVERY_ORDER_ANNOTATION: "ordered"}},
            "spec": {"broker": "default", "subscriber": {"uri": "http://sub.example/"}},
        },
    )
    start, _ = window()
    for i, key in enumerate(["k1", "k2", None, "k1"]):
        headers = {"ce-specversion": "1.0", "ce-id": f"e{i}", "ce-source": "/s", "ce-type": "t"}
        if key is not None:
            headers["ce-partitionkey"] = key
        assert h.post(headers, b"").status == 202
    flush_archive(h)
    queue = names.queue_name(h.settings.queue_prefix, "ns", "default", "o", fifo=True)
    h.queues._q(queue)["messages"].clear()
    _, end = window()
    put_replay(h, "again", start, end)
    assert h.container.replay_runner.run("ns", "default", "again", 10.0)
    replayed = h.queues._q(queue)["messages"]
    assert [json.loads(m.body)["event"]["id"] for m in replayed] == ["e0", "e1", "e2", "e3"]
    assert [m.group_id for m in replayed] == ["k1", "k2", ordering.UNKEYED_GROUP, "k1"]
    assert all(m.dedup_id for m in replayed)


def _raw(h: Harness, trigger: str) -> str:
    (m,) = h.queues._q(h.queue_of(trigger))["messages"]
    body: str = m.body
    return body


class _CrashingStore(MemoryStore):
    """A store whose ``crash_at``-th replay checkpoint raises, as a Lambda killed mid-run."""

    def __init__(self, crash_at: int) -> None:
        super().__init__()
        self.crash_at = crash_at
        self.checkpoints = 0

    def put(self, kind: str, namespace: str, name: str, doc: Any, expected: Any) -> Any:
        if kind == "replay" and (doc.get("state") or {}).get("key"):
            self.checkpoints += 1
            if self.checkpoints == self.crash_at:
                raise RuntimeError("killed")
        return super().put(kind, namespace, name, doc, expected)


def _runner(
    h: Harness, store: Any, batch: int = 10, queues: Any = None, concurrency: int = 4
) -> ReplayRunner:
    """A runner over ``store``, sending as ingress does to ``queues`` (default: the harness's)."""
    prefix = h.settings.queue_prefix
    c = h.container
    ingress = Ingress(c.cache, queues or h.queues, c.claims, h.archive, c.metrics)
    return ReplayRunner(
        Resources(store, REPLAYS),
        lambda ns, b: load_broker_config(store, prefix, ns, b),
        ingress.send_all,
        h.container.claims,
        h.blobs,
        h.blobs,
        h.container.metrics,
        RunnerOptions(
            archive_bucket=h.settings.archive_bucket,
            settle_seconds=0,
            batch_events=batch,
            send_concurrency=concurrency,
        ),
    )


def test_a_crash_mid_way_loses_nothing_and_resends_at_most_one_batch() -> None:
    h = harness()
    store = _CrashingStore(crash_at=3)
    h.store = store
    h.container.store = store  # type: ignore[misc]
    h.broker()
    h.trigger("a")
    start, _ = window()
    _send(h, 25)
    first = utcnow()
    flush_archive(h, first)
    _send(h, 20, start=25)
    flush_archive(h, first + timedelta(seconds=2))  # a later object: its key sorts after
    drain(h, "a")
    _, end = window()
    put_replay(h, "r", start, end)
    runner = _runner(h, store)
    with pytest.raises(RuntimeError, match="killed"):
        runner.run("ns", "default", "r", 10.0)
    # A new run (the next invocation) waits for the crashed run's lease, then resumes.
    stored = Resources(store, REPLAYS).require("ns", store_name("default", "r"))
    Resources(store, REPLAYS).put(
        stored.resource, {**stored.state, "lease_until": ""}, stored.status, stored.version
    )
    assert _runner(h, store).run("ns", "default", "r", 10.0)
    ids = _ids(drain(h, "a"))
    assert sorted(set(ids)) == sorted(f"e{i}" for i in range(45))  # nothing lost
    duplicates = len(ids) - len(set(ids))
    # Batches 10, 10, then 10 across the two objects (the first's last 5, the second's first
    # 5): its checkpoint crashed, so that one batch is sent again.
    assert duplicates == 10


def test_a_crash_re_sends_at_most_one_replay_batch_of_the_default_size() -> None:
    h = harness()
    store = _CrashingStore(crash_at=2)  # batch 1 checkpointed, batch 2 sent, then killed
    h.store = store
    h.container.store = store  # type: ignore[misc]
    h.broker()
    h.trigger("a")
    start, _ = window()
    _send(h, 2 * BATCH_EVENTS + 50)
    flush_archive(h)
    drain(h, "a")
    _, end = window()
    put_replay(h, "r", start, end)
    with pytest.raises(RuntimeError, match="killed"):
        _runner(h, store, batch=BATCH_EVENTS).run("ns", "default", "r", 10.0)
    stored = Resources(store, REPLAYS).require("ns", store_name("default", "r"))
    assert stored.state["offset"] == BATCH_EVENTS
    Resources(store, REPLAYS).put(
        stored.resource, {**stored.state, "lease_until": ""}, stored.status, stored.version
    )
    assert _runner(h, store, batch=BATCH_EVENTS).run("ns", "default", "r", 10.0)
    ids = _ids(drain(h, "a"))
    assert sorted(set(ids)) == sorted(f"e{i}" for i in range(2 * BATCH_EVENTS + 50))  # all
    assert len(ids) - len(set(ids)) == BATCH_EVENTS  # one replay batch, sent again


def test_a_crashed_runs_lease_keeps_other_runs_off_until_it_expires() -> None:
    h = harness()
    store = _CrashingStore(crash_at=1)
    h.store = store
    h.container.store = store  # type: ignore[misc]
    h.broker()
    h.trigger("a")
    start, _ = window()
    _send(h, 5)
    flush_archive(h)
    drain(h, "a")
    _, end = window()
    put_replay(h, "r", start, end)
    with pytest.raises(RuntimeError):
        _runner(h, store).run("ns", "default", "r", 10.0)
    assert not _runner(h, store).run("ns", "default", "r", 10.0)
    assert len(drain(h, "a")) == 5  # only the crashed run's batch
    # It read the archive beside asking for the lease; that reading ended with the run.
    assert not [t for t in threading.enumerate() if t.name == "replay-read"]


def test_a_budget_stops_after_a_batch_and_the_next_run_continues() -> None:
    h = _setup({"a": None})
    start, _ = window()
    _send(h, 35)
    flush_archive(h)
    drain(h, "a")
    _, end = window()
    put_replay(h, "r", start, end)
    runner = _runner(h, h.store)
    runs = 0
    while not runner.run("ns", "default", "r", 0.0):
        runs += 1
        assert runs < 10
        progress = _status(h, "r")["progress"]
        assert progress["eventsRead"] == min(35, 10 * runs)
        assert _condition(_status(h, "r"), "Succeeded")["reason"] == "Running"
    assert runs == 3  # 10, 20, 30; the fourth run reads the last 5 and ends it
    assert _ids(drain(h, "a")) == [f"e{i}" for i in range(35)]


class _CancellingQueues(MemoryQueues):
    """Deletes the replay (DELETE: cancel) while the runner sends its first batch."""

    def __init__(self, inner: MemoryQueues, cancel: Any) -> None:
        self.inner, self.cancel, self.sends = inner, cancel, 0

    def send_batch(self, name: str, messages: Any) -> list[str]:
        self.sends += 1
        if self.sends == 1:
            self.cancel()
        return self.inner.send_batch(name, messages)


def test_delete_cancels_at_the_next_checkpoint() -> None:
    h = _setup({"a": None})
    start, _ = window()
    _send(h, 30)
    flush_archive(h)
    drain(h, "a")
    _, end = window()
    put_replay(h, "r", start, end)
    queues = _CancellingQueues(h.queues, lambda: h.container.replays.delete("ns", "default", "r"))
    assert _runner(h, h.store, queues=queues).run("ns", "default", "r", 10.0)
    assert len(drain(h, "a")) == 10  # the batch in flight; nothing after the cancellation
    with pytest.raises(NotFoundError):
        h.container.replays.get("ns", "default", "r")


def test_a_replay_waits_until_its_range_has_settled_in_the_archive() -> None:
    h = _setup({"a": None})
    h.container.settings  # noqa: B018
    runner = _runner(h, h.store)
    runner._options = replace(runner._options, settle_seconds=3600)
    start, end = window()
    put_replay(h, "r", start, end)
    assert not runner.run("ns", "default", "r", 1.0)
    succeeded = _condition(_status(h, "r"), "Succeeded")
    assert succeeded["status"] == "Unknown" and "Waiting for the archive" in succeeded["message"]


# ---- the API ----------------------------------------------------------------------------------


def test_put_validates_every_field_at_once() -> None:
    h = _setup()
    with pytest.raises(ValidationError) as err:
        h.container.replays.put(
            "ns",
            "default",
            "r",
            {
                "spec": {
                    "from": "yesterday",
                    "triggers": ["NO", "a", "a"],
                    "filters": [{"exact": {"type": ""}}],
                    "extra": 1,
                }
            },
        )
    fields = {p.field for p in err.value.problems}
    assert {
        "spec.from",
        "spec.to",
        "spec.triggers[0]",
        "spec.triggers[2]",
        "spec.extra",
    } <= fields
    assert any(f.startswith("spec.filters[0]") for f in fields)


def test_put_refuses_unknown_brokers_and_triggers_and_spec_changes() -> None:
    h = _setup()
    start, end = window()
    with pytest.raises(NotFoundError):
        h.container.replays.put(
            "ns",
            "nope",
            "r",
            JAN_1,
        )
    with pytest.raises(ValidationError) as err:
        put_replay(h, "r", start, end, triggers=["a", "ghost"])
    assert [p.field for p in err.value.problems] == ["spec.triggers[1]"]
    put_replay(h, "r", start, end)
    put_replay(h, "r", start, end)  # the same spec again: fine
    with pytest.raises(ImmutableFieldError):
        put_replay(h, "r", start, end + timedelta(seconds=1))


def test_replays_are_listed_per_broker_and_named_by_their_short_name() -> None:
    h = _setup()
    h.broker(name="other")
    start, end = window()
    put_replay(h, "r1", start, end)
    h.container.replays.put(
        "ns",
        "other",
        "r1",
        JAN_1,
    )
    listed = h.container.replays.list("ns", "default")
    assert listed["kind"] == "ReplayList"
    assert [(i["metadata"]["name"], i["metadata"]["broker"]) for i in listed["items"]] == [
        ("r1", "default")
    ]
    doc = h.container.replays.get("ns", "default", "r1")
    assert doc["apiVersion"] == "eventing.knative.dev/v1" and doc["kind"] == "Replay"
    assert doc["spec"]["from"].endswith("Z")
    assert _condition(doc["status"], "Succeeded")["status"] == "Unknown"


class _ReadingQueues(MemoryQueues):
    """Reads the replay through the API during every send: the read remembers the status's
    transitions (Pending -> Running), a write that races the runner's checkpoint."""

    def __init__(self, inner: MemoryQueues, read: Any) -> None:
        self.inner, self.read = inner, read

    def send_batch(self, name: str, messages: Any) -> list[str]:
        self.read()
        return self.inner.send_batch(name, messages)


def test_reading_a_replay_while_it_runs_neither_stops_it_nor_resends() -> None:
    h = _setup({"a": None})
    start, _ = window()
    _send(h, 25)
    flush_archive(h)
    drain(h, "a")
    _, end = window()
    put_replay(h, "r", start, end)
    seen: list[str] = []

    def read() -> None:
        seen.append(_condition(_status(h, "r"), "Succeeded")["reason"])

    queues = _ReadingQueues(h.queues, read)
    assert _runner(h, h.store, queues=queues).run("ns", "default", "r", 10.0)
    assert seen == ["Running"] * 3
    assert _ids(drain(h, "a")) == [f"e{i}" for i in range(25)]
    assert _condition(_status(h, "r"), "Succeeded")["status"] == "True"


def test_replayed_events_follow_the_triggers_delivery_policy_into_its_dlq() -> None:
    ok, refused = HttpResponse(202, {}, b""), HttpResponse(400, {}, b"no")
    h = harness(ok, refused)
    h.broker()
    h.trigger("a", delivery={"retry": 0})
    start, _ = window()
    _send(h, 1)
    assert h.deliver_once("a")["received"] == 1  # delivered live (202)
    flush_archive(h)
    _, end = window()
    put_replay(h, "again", start, end)
    assert h.container.replay_runner.run("ns", "default", "again", 10.0)
    answer = h.deliver_once("a")  # the replayed copy: 400, not retried, dead-lettered
    assert answer["received"] == 1 and answer.get("batchItemFailures", []) == []
    (dead,) = h.messages(h.dlq_of("a"))
    assert dead["event"]["id"] == "e0" and dead["event"]["replayname"] == "again"
    assert dead["event"]["knativeerrorcode"] == 400
    assert [s.headers.get("ce-replayname") for s in h.sender.sent] == [None, "again"]


class _FailingQueues(MemoryQueues):
    """Refuses every call carrying ``poison`` (after ingress's retries: UnavailableError) until
    ``heal``; counts the calls in flight per queue, each call waiting (bounded) for another one
    to start, so that calls which may overlap do."""

    def __init__(self, inner: MemoryQueues, poison: str = "") -> None:
        self.inner, self.poison = inner, poison
        self.lock = threading.Condition()
        self.in_flight: dict[str, int] = {}
        self.most: dict[str, int] = {}
        self.calls = 0

    def send_batch(self, name: str, messages: Any) -> list[str]:
        with self.lock:
            self.calls += 1
            self.in_flight[name] = self.in_flight.get(name, 0) + 1
            self.most[name] = max(self.most.get(name, 0), self.in_flight[name])
            self.lock.notify_all()
            deadline = time.monotonic() + 0.2
            while sum(self.in_flight.values()) < 2 and time.monotonic() < deadline:
                self.lock.wait(deadline - time.monotonic())
        try:
            if self.poison and any(f'"id":"{self.poison}"' in m.body for m in messages):
                raise UnavailableError("throttled")
            return self.inner.send_batch(name, messages)
        finally:
            with self.lock:
                self.in_flight[name] -= 1


@pytest.mark.parametrize("packing", [False, True])
def test_a_failed_call_among_concurrent_ones_is_not_checkpointed_past_and_is_sent_again(
    packing: bool,
) -> None:
    assert BATCH_EVENTS == 1000  # the replay batch docs/replay.md promises
    # One event a message, or small events in full packs: ten messages to a call.
    per_call = SQS_BATCH * (PACK_MAX_EVENTS if packing else 1)
    h = _setup({"a": None})
    start, _ = window()
    total = 2 * BATCH_EVENTS + 500
    _send(h, total)
    flush_archive(h)
    drain(h, "a")
    _, end = window()
    put_replay(h, "r", start, end, packing=packing)
    # The second call of the second batch
    queues = _FailingQueues(h.queues, poison=f"e{BATCH_EVENTS + per_call}")
    runner = _runner(h, h.store, batch=BATCH_EVENTS, queues=queues)
    with pytest.raises(UnavailableError):
        runner.run("ns", "default", "r", 10.0)
    assert queues.most[h.queue_of("a")] > 1  # the calls did overlap
    progress = _status(h, "r")["progress"]
    assert progress["eventsRead"] == BATCH_EVENTS == progress["eventsEnqueued"]  # batch 1 only
    queues.poison = ""  # the throttling ends; the next run resumes at the checkpoint
    assert runner.run("ns", "default", "r", 10.0)
    ids = _ids(drain(h, "a"))
    assert sorted(set(ids)) == sorted(f"e{i}" for i in range(total))  # nothing lost
    assert len(ids) - len(set(ids)) == BATCH_EVENTS - per_call  # batch 2's other call, again
    assert _status(h, "r")["progress"]["eventsEnqueued"] == total


def test_a_fifo_queue_gets_its_calls_one_at_a_time_in_order_beside_a_standard_queue() -> None:
    h = harness()
    h.broker()
    h.trigger("a")
    h.container.triggers.put(
        "ns",
        "o",
        {
            "metadata": {"name": "o", "annotations": {DELIVERY_ORDER_ANNOTATION: "ordered"}},
            "spec": {"broker": "default", "subscriber": {"uri": "http://sub.example/"}},
        },
    )
    start, _ = window()
    for i in range(45):
        headers = {"ce-specversion": "1.0", "ce-id": f"e{i}", "ce-source": "/s", "ce-type": "t"}
        headers["ce-partitionkey"] = f"k{i % 2}"
        headers["content-type"] = "text/plain"
        # 60 KB: the standard queue gets several calls
        assert h.post(headers, b"x" * 60_000).status == 202
    flush_archive(h)
    fifo = names.queue_name(h.settings.queue_prefix, "ns", "default", "o", fifo=True)
    h.queues._q(fifo)["messages"].clear()
    drain(h, "a")
    _, end = window()
    put_replay(h, "r", start, end)
    queues = _FailingQueues(h.queues)
    assert _runner(h, h.store, batch=BATCH_EVENTS, queues=queues).run("ns", "default", "r", 10.0)
    assert queues.most[fifo] == 1  # never two calls to the FIFO queue at once
    assert queues.most[h.queue_of("a")] > 1  # the standard queue's calls overlapped
    replayed = h.queues._q(fifo)["messages"]
    assert [json.loads(m.body)["event"]["id"] for m in replayed] == [f"e{i}" for i in range(45)]
    assert sorted(_ids(drain(h, "a"))) == sorted(f"e{i}" for i in range(45))


def _position(h: Harness, name: str) -> tuple[str, int, int]:
    state = Resources(h.store, REPLAYS).require("ns", store_name("default", name)).state
    return state["key"], state["offset"], state["events_read"]


def _archived_in_objects(h: Harness, objects: int, per_object: int) -> list[str]:
    """``objects`` archive objects of ``per_object`` events each (e0, e1, ...), two seconds
    apart, delivered live and drained; a replay "r" of their range; the objects' keys."""
    start, _ = window()
    first = utcnow()
    keys = []
    for k in range(objects):
        _send(h, per_object, start=per_object * k)
        keys.append(flush_archive(h, first + timedelta(seconds=2 * k)))
    drain(h, "a")
    _, end = window()
    put_replay(h, "r", start, end)
    return keys


def test_a_batch_spans_archive_objects_up_to_the_batch_size() -> None:
    h = _setup({"a": None})
    keys = _archived_in_objects(h, 3, 6)
    runner = _runner(h, h.store)  # batches of 10
    assert not runner.run("ns", "default", "r", 0.0)  # one batch, then the budget is spent
    assert _position(h, "r") == (keys[1], 4, 10)  # the first object's 6, the second's first 4
    assert runner.run("ns", "default", "r", 0.0)  # the last 8
    assert sorted(_ids(drain(h, "a"))) == sorted(f"e{i}" for i in range(18))


def test_a_stretch_of_other_brokers_records_still_ends_a_batch_at_an_objects_end() -> None:
    h = _setup({"a": None})
    h.broker(name="other")
    h.trigger("x", broker="other")
    start, _ = window()
    first = utcnow()
    keys = []
    for k in range(2):
        for i in range(12):
            headers = {"ce-specversion": "1.0", "ce-id": f"o{i}", "ce-source": "/s", "ce-type": "t"}
            assert h.post(headers, b"", broker="other").status == 202
        keys.append(flush_archive(h, first + timedelta(seconds=2 * k)))
    _send(h, 3)
    flush_archive(h, first + timedelta(seconds=4))
    drain(h, "a")
    _, end = window()
    put_replay(h, "r", start, end)
    runner = _runner(h, h.store)  # batches of 10 events, or 10 records read at an object's end
    assert not runner.run("ns", "default", "r", 0.0)
    assert _position(h, "r") == (keys[0], 12, 0)  # not read again after a crash
    assert not runner.run("ns", "default", "r", 0.0)
    assert _position(h, "r") == (keys[1], 12, 0)
    assert runner.run("ns", "default", "r", 0.0)
    assert _ids(drain(h, "a")) == ["e0", "e1", "e2"]


def test_no_call_outlives_a_run_whose_next_batch_cannot_be_read(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The next batch is read while this one's calls are in flight: when that read fails, the run
    still waits for those calls before it ends (else a next run would send the batch again beside
    calls still running), checkpoints the batch they sent and nothing past it, and the next run
    goes on from there without sending it again."""
    h = _setup({"a": None})
    keys = _archived_in_objects(h, 2, 10)
    read = h.blobs.get

    def unreadable_second_object(bucket: str, key: str) -> bytes:
        if key == keys[1]:
            raise UnavailableError("S3 is down")
        return read(bucket, key)

    monkeypatch.setattr(h.blobs, "get", unreadable_second_object)
    queues = _FailingQueues(h.queues)  # each call stays in flight ~0.2 s, waiting for company
    runner = _runner(h, h.store, queues=queues)  # batches of 10: the first object is one
    with pytest.raises(UnavailableError):
        runner.run("ns", "default", "r", 10.0)
    assert queues.calls == 1 and sum(queues.in_flight.values()) == 0  # ended with the run
    assert _status(h, "r")["progress"]["eventsEnqueued"] == 10  # that batch, checkpointed
    assert _position(h, "r")[:2] == (keys[0], 10)
    assert sorted(_ids(drain(h, "a"))) == [f"e{i}" for i in range(10)]
    monkeypatch.setattr(h.blobs, "get", read)  # S3 is back: its next run (same lease) goes on
    assert runner.run("ns", "default", "r", 10.0)
    assert sorted(_ids(drain(h, "a"))) == [f"e{i}" for i in range(10, 20)]  # none sent again


def test_packs_of_text_sqs_refuses_stay_within_their_bound() -> None:
    """An event with a character SQS refuses is escaped (every non-ASCII character of it, CJK
    text too: up to twice its UTF-8 size) before it is measured into a pack, so no pack passes
    PACK_MAX_BYTES and ten still share one call."""
    h = _setup({"a": None})
    start, _ = window()
    text = "漢字のテキスト" * 50  # ~1 KiB of 3-byte characters
    for i in range(60):
        data = text + ("\uffff" if i % 7 == 0 else "")
        assert h.send(id_=f"e{i}", data=data.encode()).status == 202
    flush_archive(h)
    drain(h, "a")
    _, end = window()
    put_replay(h, "r", start, end, packing=True)
    assert _runner(h, h.store, batch=100).run("ns", "default", "r", 10.0)
    bodies = [m.body for m in h.queues._q(h.queue_of("a"))["messages"]]
    assert len(bodies) > 1 and all(len(b.encode()) <= PACK_MAX_BYTES for b in bodies)
    assert all("\uffff" not in b for b in bodies)
    assert sorted(_ids(drain(h, "a"))) == sorted(f"e{i}" for i in range(60))


def test_a_queue_refusing_one_mib_calls_gets_them_split_and_every_event_once() -> None:
    """A queue made before SQS took 1 MiB calls refuses a call of ten packs as too long: the
    runner's send splits it into calls of at most 256 KiB; nothing is lost or sent twice."""
    h = _setup({"a": None})
    start, _ = window()
    for i in range(300):
        assert h.send(id_=f"e{i}", data=b"x" * 2000).status == 202
    flush_archive(h)
    drain(h, "a")
    _, end = window()
    put_replay(h, "r", start, end, packing=True)
    h.queues.max_batch_bytes = 256 * 1024
    calls = h.queues.send_calls
    assert h.container.replay_runner.run("ns", "default", "r", 10.0)
    bodies = drain_bodies(h, "a")
    assert len(bodies) > 4 and all(len(json.dumps(b)) > 64 * 1024 for b in bodies[:-1])
    assert h.queues.send_calls - calls >= 3  # ~96 KiB packs, two to a 256 KiB call
    ids = [e["id"] for b in bodies for e in b["pack"]]
    assert sorted(ids) == sorted(f"e{i}" for i in range(300))


def test_a_call_refused_as_too_long_within_256_kib_fails_after_its_attempts() -> None:
    """Splitting stops at SQS's 256 KiB: a queue refusing even that fails the send (the replay
    batch is not checkpointed and is sent again), after the usual attempts, not in a loop."""
    queues = MemoryQueues()
    queues.create("q", {})
    queues.max_batch_bytes = 1000
    items: list[tuple[str, str | None]] = [("x" * 90_000, None) for _ in range(10)]
    with pytest.raises(UnavailableError):
        send_in_batches(queues, "q", items, SQS_MAX_BATCH_BYTES)
    assert queues.depth("q") == 0
    assert queues.send_calls == 0  # every call was refused before it stored anything
    queues.max_batch_bytes = 256 * 1024  # one entry alone over it: nothing left to split
    with pytest.raises(UnavailableError):
        send_in_batches(queues, "q", [("x" * 300_000, None)], SQS_MAX_BATCH_BYTES)


def test_unreadable_lines_and_objects_are_counted_skipped_and_never_stop_the_replay() -> None:
    """A line that is not JSON, a corrupt GZIP object and an empty object among the archive's
    objects: each is skipped and counted; every readable event is replayed once, and the replay
    ends at the last object's end."""
    h = _setup({"a": None})
    start, _ = window()
    first = utcnow()
    _send(h, 3)
    h.archive.records.insert(1, b"not json at all\n")
    good = flush_archive(h, first)
    bucket = h.settings.archive_bucket
    h.blobs.put(bucket, good.replace("-archive-1-", "-archive-2-"), b"\x1f\x8bnot gzip")
    h.blobs.put(bucket, good.replace("-archive-1-", "-archive-3-"), b"")
    _send(h, 2, start=3)
    last = flush_archive(h, first + timedelta(seconds=2))
    drain(h, "a")
    _, end = window()
    put_replay(h, "r", start, end)
    assert _runner(h, h.store).run("ns", "default", "r", 10.0)
    assert sorted(_ids(drain(h, "a"))) == [f"e{i}" for i in range(5)]
    assert _position(h, "r") == (last, 2, 5)
    metrics = h.container.metrics
    metrics.flush()
    assert metrics._counters["replay_unreadable_record_count", ()] == 1
    assert metrics._counters["replay_unreadable_object_count", ()] == 1


class _SendsAfterTheReaderEnds(MemoryQueues):
    """Sends the events of ``last`` only once the run's reading thread has read to the range's
    end and exited (a deadline of 5 s), so that the run sees that end before it checkpoints."""

    def __init__(self, inner: MemoryQueues, last: str) -> None:
        self.inner, self.last = inner, last

    def send_batch(self, name: str, messages: Any) -> list[str]:
        if any(self.last in m.body for m in messages):
            deadline = time.monotonic() + 5.0
            while any(t.name == "replay-read" for t in threading.enumerate()):
                assert time.monotonic() < deadline, "the reading thread did not end"
                time.sleep(0.005)
        return self.inner.send_batch(name, messages)


def test_a_range_ending_with_a_full_batch_is_finished_by_that_batchs_checkpoint() -> None:
    """Read ahead, the batch after the last full one is empty and ends the range: the last full
    batch's checkpoint finishes the replay (no write of an empty batch after it)."""
    h = harness()
    store = _CrashingStore(crash_at=0)  # counts the checkpoints, never crashes
    h.store = store
    h.container.store = store  # type: ignore[misc]
    h.broker()
    h.trigger("a")
    keys = _archived_in_objects(h, 2, 10)
    queues = _SendsAfterTheReaderEnds(h.queues, '"id":"e19"')
    assert _runner(h, store, queues=queues).run("ns", "default", "r", 10.0)
    assert store.checkpoints == 2  # the first object's batch; the second's, the last
    assert _position(h, "r") == (keys[1], 10, 20)
    assert _condition(_status(h, "r"), "Succeeded")["status"] == "True"
    assert sorted(_ids(drain(h, "a"))) == sorted(f"e{i}" for i in range(20))


# ---- packing: an option, off by default ---------------------------------------------------------


def test_packing_is_off_by_default_one_event_a_message_ten_to_a_call() -> None:
    h = _setup({"a": None})
    start, _ = window()
    _send(h, 25)
    flush_archive(h)
    drain(h, "a")
    _, end = window()
    doc = put_replay(h, "plain", start, end)
    assert "packing" not in doc["spec"]
    calls = h.queues.send_calls
    assert h.container.replay_runner.run("ns", "default", "plain", 10.0)
    assert h.queues.send_calls - calls == 3  # 10 + 10 + 5 messages
    bodies = drain_bodies(h, "a")
    assert len(bodies) == 25 and not [b for b in bodies if "pack" in b]
    assert sorted(b["event"]["id"] for b in bodies) == sorted(f"e{i}" for i in range(25))
    doc = put_replay(h, "packed", start, end, packing=True)
    assert doc["spec"]["packing"] is True
    calls = h.queues.send_calls
    assert h.container.replay_runner.run("ns", "default", "packed", 10.0)
    assert h.queues.send_calls - calls == 1
    (body,) = drain_bodies(h, "a")
    assert sorted(e["id"] for e in body["pack"]) == sorted(f"e{i}" for i in range(25))
    assert _status(h, "packed")["progress"]["eventsEnqueued"] == 25


def test_spec_packing_is_a_boolean_and_cannot_change() -> None:
    h = _setup({"a": None})
    start, end = window()
    with pytest.raises(ValidationError) as err:
        put_replay(h, "r", start, end, packing="yes")
    assert [p.field for p in err.value.problems] == ["spec.packing"]
    put_replay(h, "r", start, end, packing=False)  # the default, said
    assert "packing" not in h.container.replays.get("ns", "default", "r")["spec"]
    put_replay(h, "r", start, end)  # the same spec
    with pytest.raises(ImmutableFieldError):
        put_replay(h, "r", start, end, packing=True)


# ---- fairness: a quota per namespace, round-robin across namespaces ------------------------------


def test_a_namespace_has_at_most_its_quota_of_unfinished_replays() -> None:
    h = _setup({"a": None})
    h.broker(ns="other")
    start, end = window()
    for i in range(MAX_ACTIVE_PER_NAMESPACE):
        put_replay(h, f"r{i}", start, end)
    with pytest.raises(ConflictError, match="unfinished replays"):
        put_replay(h, "one-more", start, end)
    put_replay(h, "r0", start, end)  # the same spec again: no new replay, no quota
    body = {"spec": {"from": rfc3339(start), "to": rfc3339(end)}}
    h.container.replays.put("other", "default", "theirs", body)  # another namespace's own quota
    assert h.container.replay_runner.run("ns", "default", "r0", 10.0)  # finished: room again
    put_replay(h, "one-more", start, end)
    h.container.replays.delete("ns", "default", "r1")  # cancelled: room again
    put_replay(h, "and-another", start, end)


def test_a_put_beyond_the_quota_is_a_409_problem() -> None:
    from chalice.test import Client

    from app import app
    from chalicelib.container import use_container

    h = _setup({"a": None})
    start, end = window()
    for i in range(MAX_ACTIVE_PER_NAMESPACE):
        put_replay(h, f"r{i}", start, end)
    path = "/apis/eventing.knative.dev/v1/namespaces/ns/brokers/default/replays/one-more"
    body = json.dumps({"spec": {"from": rfc3339(start), "to": rfc3339(end)}})
    use_container(h.container)
    try:
        with Client(app) as client:
            headers = {"content-type": "application/json"}
            r = client.http.put(path, headers=headers, body=body)
    finally:
        use_container(None)
    assert r.status_code == 409 and r.headers["Content-Type"] == "application/problem+json"
    assert r.json_body["status"] == 409
    assert f"({MAX_ACTIVE_PER_NAMESPACE})" in r.json_body["detail"]


class _SlowQueues(MemoryQueues):
    """Each SendMessageBatch call takes a virtual second."""

    def __init__(self, inner: MemoryQueues, clock: list[float]) -> None:
        self.inner, self.clock = inner, clock

    def send_batch(self, name: str, messages: Any) -> list[str]:
        self.clock[0] += 1.0
        return self.inner.send_batch(name, messages)


def test_replays_run_round_robin_across_namespaces_each_with_a_share_of_the_budget() -> None:
    """Three replays of one namespace created before one of another: the runner takes one of
    each namespace in turn, the oldest first within one, and gives each a share of its budget,
    so that the first namespace's long replays do not take all of it."""
    h = harness()
    for ns in ("busy", "quiet"):
        h.broker(ns=ns)
        h.trigger("a", ns=ns)
    start, _ = window()
    for ns in ("busy", "quiet"):
        for i in range(30):
            headers = {"ce-specversion": "1.0", "ce-id": f"e{i}", "ce-source": "/s", "ce-type": "t"}
            assert h.post(headers, b"", ns=ns).status == 202
    flush_archive(h)
    _, end = window()
    body = {"spec": {"from": rfc3339(start), "to": rfc3339(end)}}
    base = utcnow()
    created = [("busy", "r1"), ("busy", "r2"), ("busy", "r3"), ("quiet", "r1")]
    for i, (ns, name) in enumerate(created):
        service = h.container.replay_resources
        service._clock = lambda i=i: base + timedelta(seconds=i)  # type: ignore[misc]
        h.container.replays.put(ns, "default", name, body)
    virtual = [0.0]
    queues = _SlowQueues(h.queues, virtual)
    runner = _runner(h, h.store, queues=queues)  # batches of 10: 3 calls (seconds) a replay
    runner._clock = lambda: base + timedelta(minutes=1, seconds=virtual[0])
    runner._monotonic = lambda: virtual[0]
    assert runner.run_pending(4.0) == []  # a second each: one batch each, none finished
    started = {}
    for ns, name in created:
        status = h.container.replays.get(ns, "default", name)["status"]
        assert status["progress"]["eventsRead"] == 10, (ns, name)
        started[status["startTime"]] = (ns, name)
    assert [started[t] for t in sorted(started)] == [
        ("busy", "r1"),
        ("quiet", "r1"),
        ("busy", "r2"),
        ("busy", "r3"),
    ]
