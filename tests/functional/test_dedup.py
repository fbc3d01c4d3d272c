"""Deduplication at ingress (docs/dedup.md) on in-memory fakes: a repeat of (source, id) within a
broker's dedup window is answered 202, stored nowhere, counted and archived as ``duplicate``."""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from chalicelib.core.errors import ValidationError
from chalicelib.ports import OutgoingMessage
from chalicelib.services.ingress import Ingress
from tests.fakes import MemoryQueues
from tests.functional.harness import Harness

WINDOW = "serverless-broker/dedup-window"
BATCH = {"content-type": "application/cloudevents-batch+json"}


@pytest.fixture
def h() -> Harness:
    h = Harness()
    h.broker(annotations={WINDOW: "PT5M"})
    h.trigger("all")
    return h


def _batch(*keys: tuple[str, str]) -> bytes:
    events = [{"specversion": "1.0", "id": i, "source": s, "type": "t"} for s, i in keys]
    return json.dumps(events).encode()


def _stored(h: Harness, trigger: str = "all", broker: str = "default") -> list[tuple[str, str]]:
    return [
        (m["event"]["source"], m["event"]["id"])
        for m in h.messages(h.queue_of(trigger, broker=broker))
    ]


def _metric(h: Harness, name: str, broker: str = "default") -> str:
    for line in h.container.metrics.prometheus_text().splitlines():
        if line.startswith(f'broker_{name}_total{{broker="{broker}",namespace="ns"}}'):
            return line.rsplit(" ", 1)[1]
    return "0"


def test_a_repeat_is_answered_202_and_stored_nowhere(h: Harness) -> None:
    assert h.send(id_="e1").status == 202
    assert h.send(id_="e1", data=b"other bytes, same key").status == 202
    assert _stored(h) == [("/src", "e1")]
    assert [r["kind"] for r in h.archive.decoded()] == ["accepted", "duplicate"]
    duplicate = h.archive.decoded()[1]
    assert (duplicate["event_id"], duplicate["event_source"], duplicate["event_type"]) == (
        "e1",
        "/src",
        "t",
    )
    assert _metric(h, "duplicate_count") == "1"
    assert h.seen.calls == 3  # a claim per request, and a confirm for what was stored


def test_the_key_is_source_and_id(h: Harness) -> None:
    h.send(id_="e1")
    h.post({"ce-specversion": "1.0", "ce-id": "e1", "ce-source": "/elsewhere", "ce-type": "t"}, b"")
    assert sorted(_stored(h)) == [("/elsewhere", "e1"), ("/src", "e1")]
    assert _metric(h, "duplicate_count") == "0"


def test_repeats_inside_a_batch_are_collapsed_in_one_claim(h: Harness) -> None:
    r = h.post(BATCH, _batch(("/s", "a"), ("/s", "b"), ("/s", "a"), ("/s", "a")))
    assert r.status == 202
    assert _stored(h) == [("/s", "a"), ("/s", "b")]
    assert h.seen.calls == 2  # one claim, one confirm
    assert h.post(BATCH, _batch(("/s", "b"), ("/s", "c"))).status == 202
    assert _stored(h) == [("/s", "a"), ("/s", "b"), ("/s", "c")]
    assert h.seen.calls == 4
    assert _metric(h, "duplicate_count") == "3"
    kinds = [r["kind"] for r in h.archive.decoded()]
    assert kinds.count("accepted") == 3 and kinds.count("duplicate") == 3


def test_the_window_is_per_broker_and_off_by_default(h: Harness) -> None:
    h.broker(name="plain")
    h.trigger("p", broker="plain")
    h.broker(name="other", annotations={WINDOW: "PT1H"})
    h.trigger("o", broker="other")
    body = _batch(("/s", "x"))
    for broker in ("plain", "plain", "other", "default"):
        assert h.post(BATCH, body, broker=broker).status == 202
    assert _stored(h, "p", "plain") == [("/s", "x"), ("/s", "x")]  # no window: both stored
    assert _stored(h, "o", "other") == [("/s", "x")]
    assert _stored(h) == [("/s", "x")]  # another broker's copy is no duplicate here
    assert h.seen.calls == 4  # a claim and a confirm each; the broker without a window never asks


def test_dedup_store_down_fails_closed_with_503_and_nothing_stored(h: Harness) -> None:
    h.seen.fail_next = 1
    r = h.send(id_="e1")
    assert r.status == 503
    assert json.loads(r.body)["status"] == 503
    assert _stored(h) == []
    assert h.archive.decoded()[-1]["reason"] == "unavailable"
    assert h.send(id_="e1").status == 202  # the producer's retry is no duplicate
    assert _stored(h) == [("/src", "e1")]


def test_a_claim_is_released_when_the_events_could_not_be_stored(h: Harness) -> None:
    h.queues.fail_next_sends = 6  # every attempt (3) of the send fails, for both events
    assert h.post(BATCH, _batch(("/s", "a"), ("/s", "b"))).status == 503
    assert _stored(h) == []
    assert h.post(BATCH, _batch(("/s", "a"), ("/s", "b"))).status == 202  # not duplicates
    assert _stored(h) == [("/s", "a"), ("/s", "b")]
    assert _metric(h, "duplicate_count") == "0"


def test_a_release_that_fails_is_counted_and_logged_and_costs_a_wait_not_the_event(
    caplog: pytest.LogCaptureFixture,
) -> None:
    h, clock = _timed()
    h.queues.fail_next_sends = 3
    h.seen.fail_releases = True
    with caplog.at_level(logging.WARNING):
        assert h.send(id_="e1").status == 503
    assert _metric(h, "dedup_release_failure_count") == "1"
    assert any("could not release 1 claim" in r.getMessage() for r in caplog.records)
    assert any("/src e1" in r.getMessage() for r in caplog.records)
    held = h.send(id_="e1")  # the key stays pending: never taken for a duplicate
    assert (held.status, held.headers["Retry-After"]) == (503, "1")
    clock.advance(HOLD + 1)
    assert h.send(id_="e1").status == 202
    assert _stored(h) == [("/src", "e1")]


# ---- pending claims (issue 31, item 5): a 202 always means stored ------------------------------

HOLD = 90.0


class _Clock:
    def __init__(self) -> None:
        self.now = datetime(2030, 1, 1, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


class _Killed(BaseException):
    """What ends a Lambda invocation that reached its timeout or its memory: nothing after the
    point where it stopped runs (here: nothing until the test lets it, long after the retry)."""


class _HungQueues:
    """The harness's queues, except that the first send hangs until ``go`` is set, then dies."""

    def __init__(self, queues: MemoryQueues) -> None:
        self._queues = queues
        self.entered = threading.Event()
        self.go = threading.Event()

    def send_batch(self, name: str, messages: Sequence[OutgoingMessage]) -> list[str]:
        if not self.entered.is_set():
            self.entered.set()
            self.go.wait(30)
            raise _Killed()
        return self._queues.send_batch(name, messages)


def _timed(queues: Any = None) -> tuple[Harness, _Clock]:
    """A harness whose ingress runs on a clock the test moves (and on ``queues`` if given)."""
    h = Harness()
    h.broker(annotations={WINDOW: "PT5M"})
    h.trigger("all")
    clock = _Clock()
    c = h.container
    c.ingress = Ingress(  # type: ignore[misc]
        c.cache,
        queues or h.queues,
        c.claims,
        c.archive,
        c.metrics,
        clock=clock,
        log=logging.getLogger("test").warning,
        seen=h.seen,
    )
    return h, clock


def test_a_claimant_that_dies_before_storing_does_not_make_the_retry_a_duplicate() -> None:
    """The first request claims the key, then its send hangs and its invocation is killed (no
    handler runs). The producer's retry, meanwhile, must not be answered 202 with nothing
    stored: it is told to come back (503, Retry-After), and once the dead claim's hold ends the
    retry stores the event."""
    hung = _HungQueues(MemoryQueues())
    h, clock = _timed(hung)
    hung._queues = h.queues
    died: list[BaseException] = []

    def first() -> None:
        try:
            h.send(id_="e1")
        except _Killed as exc:
            died.append(exc)

    thread = threading.Thread(target=first)
    thread.start()
    try:
        assert hung.entered.wait(10)
        retry = h.send(id_="e1")
        assert _stored(h) == []
        assert retry.status == 503, "a 202 for an event that was never stored"
        assert retry.headers["Retry-After"] == "1"  # the claim is young: its owner may be storing
        assert json.loads(retry.body)["status"] == 503
        clock.advance(30)
        assert h.send(id_="e1").headers["Retry-After"] == "30"  # older: wait as long again
        clock.advance(HOLD)
        assert h.send(id_="e1").status == 202
        assert _stored(h) == [("/src", "e1")]
        assert h.send(id_="e1").status == 202  # now a duplicate: stored once
        assert _stored(h) == [("/src", "e1")]
    finally:
        hung.go.set()
        thread.join(10)
    assert died and not thread.is_alive()


def test_copies_of_a_batch_stored_by_another_request_are_refused_the_rest_stored() -> None:
    h, clock = _timed()
    h.seen.claim("ns/default", [("/s", "b")], HOLD, clock.now.timestamp())  # another request's
    r = h.post(BATCH, _batch(("/s", "a"), ("/s", "b")))
    assert (r.status, r.headers["Retry-After"]) == (503, "1")
    assert "1 event(s)" in json.loads(r.body)["detail"]
    assert _stored(h) == [("/s", "a")]
    h.seen.confirm("ns/default", [("/s", "b")], clock.now.timestamp() + 300)  # it stored "b"
    assert h.post(BATCH, _batch(("/s", "a"), ("/s", "b"))).status == 202  # both repeats now
    assert _stored(h) == [("/s", "a")]
    assert _metric(h, "duplicate_count") == "2"


def test_a_confirm_that_fails_still_answers_202_and_is_counted(
    caplog: pytest.LogCaptureFixture,
) -> None:
    h, clock = _timed()
    h.seen.fail_confirms = True
    with caplog.at_level(logging.WARNING):
        assert h.send(id_="e1").status == 202  # stored: the answer is the truth
    assert _stored(h) == [("/src", "e1")]
    assert _metric(h, "dedup_confirm_failure_count") == "1"
    assert any("could not confirm 1 claim" in r.getMessage() for r in caplog.records)
    assert h.send(id_="e1").status == 503  # pending until the hold ends
    clock.advance(HOLD + 1)
    assert h.send(id_="e1").status == 202  # then stored again: a duplicate, never a loss
    assert _stored(h) == [("/src", "e1"), ("/src", "e1")]


@pytest.mark.parametrize("value", ["5m", "PT0S", "PT25H", "P2D", "-PT5M", "PT" + "1" * 80 + "S"])
def test_a_bad_window_is_refused_naming_the_field(h: Harness, value: str) -> None:
    with pytest.raises(ValidationError) as caught:
        h.broker(name="bad", annotations={WINDOW: value})
    assert [p.field for p in caught.value.problems] == [f"metadata.annotations[{WINDOW}]"]
    assert "PT24H" in caught.value.problems[0].message


def test_the_window_is_accepted_up_to_a_day(h: Harness) -> None:
    doc = h.broker(name="day", annotations={WINDOW: "PT24H"})
    assert doc["metadata"]["annotations"][WINDOW] == "PT24H"


def test_a_kafka_record_read_twice_is_stored_once() -> None:
    """Kafka records enter through the same ingest path (at-least-once consumers re-read)."""
    from chalicelib.ports import HttpResponse
    from tests.functional import test_kafka_ingress as kafka

    h = Harness(HttpResponse(202, {}, b""))
    h.broker(annotations={WINDOW: "PT5M"})
    h.trigger("all")
    kafka.msk(h)
    for _ in range(2):
        assert h.container.kafka_ingress.handle(kafka.fixture("msk_event.json"))["ingested"] == 2
    assert sorted(e for _, e in _stored(h)) == ["bin-1", "json-1"]
    assert _metric(h, "duplicate_count") == "2"
