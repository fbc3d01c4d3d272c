"""Deduplication at ingress (docs/dedup.md) on in-memory fakes: a repeat of (source, id) within a
broker's dedup window is answered 202, stored nowhere, counted and archived as ``duplicate``."""

from __future__ import annotations

import json
import logging

import pytest

from chalicelib.core.errors import ValidationError
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
    assert h.seen.calls == 2  # one claim per request


def test_the_key_is_source_and_id(h: Harness) -> None:
    h.send(id_="e1")
    h.post({"ce-specversion": "1.0", "ce-id": "e1", "ce-source": "/elsewhere", "ce-type": "t"}, b"")
    assert sorted(_stored(h)) == [("/elsewhere", "e1"), ("/src", "e1")]
    assert _metric(h, "duplicate_count") == "0"


def test_repeats_inside_a_batch_are_collapsed_in_one_claim(h: Harness) -> None:
    r = h.post(BATCH, _batch(("/s", "a"), ("/s", "b"), ("/s", "a"), ("/s", "a")))
    assert r.status == 202
    assert _stored(h) == [("/s", "a"), ("/s", "b")]
    assert h.seen.calls == 1
    assert h.post(BATCH, _batch(("/s", "b"), ("/s", "c"))).status == 202
    assert _stored(h) == [("/s", "a"), ("/s", "b"), ("/s", "c")]
    assert h.seen.calls == 2
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
    assert h.seen.calls == 2  # the broker without a window never asks


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


def test_a_release_that_fails_is_counted_and_logged(
    h: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    h.queues.fail_next_sends = 3
    h.seen.fail_releases = True
    with caplog.at_level(logging.WARNING):
        assert h.send(id_="e1").status == 503
    assert _metric(h, "dedup_release_failure_count") == "1"
    assert any("could not release 1 claim" in r.getMessage() for r in caplog.records)
    assert any("/src e1" in r.getMessage() for r in caplog.records)
    assert h.send(id_="e1").status == 202  # the documented cost: taken for a duplicate
    assert _stored(h) == []


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
