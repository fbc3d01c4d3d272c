"""Issue 16's data-path defects, each with the input that showed it (they fail on the code before
the fix): redrive that could spin, the dead-letter function without a sink, a deleted trigger's
queue, and a trigger the delivery cache has not seen yet."""

from __future__ import annotations

import base64
import json
import logging
from collections.abc import Sequence
from dataclasses import replace

import pytest

from chalicelib.container import Container
from chalicelib.core import archive, names
from chalicelib.ports import HttpResponse, OutgoingMessage
from chalicelib.services.claims import Claims
from chalicelib.services.dead_letters import DeadLetters
from tests.fakes import MemoryBlobs, MemoryQueues
from tests.functional.harness import Harness

PREFIX = "sb-t-"


def fill(queues: MemoryQueues, dlq: str, count: int) -> None:
    for start in range(0, count, 10):
        batch = range(start, min(count, start + 10))
        queues.send_batch(dlq, [OutgoingMessage(str(i), f'{{"n": {i}}}') for i in batch])


class BouncingQueues(MemoryQueues):
    """Every message sent to the trigger's queue fails at once and lands in the DLQ again as a
    new message, as a subscriber that is still down makes happen."""

    def __init__(self, queue: str, dlq: str) -> None:
        super().__init__()
        self._queue, self._dlq = queue, dlq

    def send_batch(self, name: str, messages: Sequence[OutgoingMessage]) -> list[str]:
        if name == self._queue:
            return super().send_batch(self._dlq, messages)
        return super().send_batch(name, messages)


def test_redrive_moves_what_was_there_once_and_ends() -> None:
    queue = names.queue_name(PREFIX, "ns", "b", "t")
    dlq = names.dlq_name(PREFIX, "ns", "b", "t")
    queues = BouncingQueues(queue, dlq)
    queues.create(queue, {})
    queues.create(dlq, {})
    fill(queues, dlq, 25)
    ticks = iter(range(10_000))
    dead = DeadLetters(
        queues, Claims(MemoryBlobs(), "claims"), PREFIX, clock=lambda: float(next(ticks))
    )
    # Before the fix this loop never ended: every redriven message came back as a new one.
    answer = dead.redrive("ns", "b", "t")
    assert answer == {"redriven": 25, "remaining": 25}


def test_redrive_of_large_dead_letters_moves_them_in_calls_sqs_takes() -> None:
    """Ten dead letters of 200 KiB (events just under the claim-check size) are 2 MB: more than
    one SendMessageBatch call takes (1 MiB; 256 KiB on older queues). Redrive sends them in
    calls of at most 256 KiB; before, its one call was refused and nothing moved."""
    queue = names.queue_name(PREFIX, "ns", "b", "t")
    dlq = names.dlq_name(PREFIX, "ns", "b", "t")
    queues = MemoryQueues()
    queues.create(queue, {})
    queues.create(dlq, {})
    big = "x" * 200_000
    for i in range(10):
        queues.send_batch(dlq, [OutgoingMessage(str(i), json.dumps({"n": i, "data": big}))])
    dead = DeadLetters(queues, Claims(MemoryBlobs(), "claims"), PREFIX)
    assert dead.redrive("ns", "b", "t") == {"redriven": 10, "remaining": 0}
    got = queues.receive(queue, 10, 0, 30)
    assert sorted(json.loads(m.body)["n"] for m in got) == list(range(10))


def test_redrive_stops_at_its_deadline_and_reports_what_remains() -> None:
    queue = names.queue_name(PREFIX, "ns", "b", "t")
    dlq = names.dlq_name(PREFIX, "ns", "b", "t")
    queues = MemoryQueues()
    queues.create(queue, {})
    queues.create(dlq, {})
    fill(queues, dlq, 30)
    now = [0.0]

    def clock() -> float:
        now[0] += 7.0  # each batch "takes" 7 s of the 20 s budget
        return now[0]

    dead = DeadLetters(queues, Claims(MemoryBlobs(), "claims"), PREFIX, clock=clock)
    answer = dead.redrive("ns", "b", "t")
    assert 0 < answer["redriven"] < 30
    assert answer["redriven"] + answer["remaining"] == 30


# ---- the dead-letter function without a sink (defect 4) ------------------------------------------


def test_dead_letter_function_without_a_sink_keeps_the_event_in_the_dlq() -> None:
    h = Harness(HttpResponse(500, {}, b"down"))
    h.broker()
    h.trigger("t1", delivery={"retry": 0})
    assert h.send(id_="e1").status == 202
    h.deliver_once("t1")  # fails for good: into the DLQ
    assert len(h.messages(h.dlq_of("t1"))) == 1
    # The DLQ mapping still exists (its removal failed, or is under way): the dead-letter
    # function must not take the event out of the DLQ.
    answer = h.deliver_once("t1", dead_letter=True)
    assert answer["received"] == 1 and len(answer["batchItemFailures"]) == 1
    assert [m["event"]["id"] for m in h.messages(h.dlq_of("t1"))] == ["e1"]


# ---- a trigger newer than the delivery container's cache (defect 9) -------------------------


def test_delivery_reads_the_config_again_for_a_trigger_it_does_not_know() -> None:
    h = Harness(HttpResponse(200, {}, b""))
    h.broker()
    # A second warm container (another delivery Lambda) on the same AWS, with a long cache TTL.
    other = Container(replace(h.settings, cache_ttl_seconds=3600.0))
    for port in ("store", "queues", "mappings", "blobs", "archive", "sender"):
        setattr(other, port, getattr(h.container, port))
    assert other.cache.get("ns", "default") is not None  # cached before the trigger exists
    h.trigger("t1")
    assert h.send(id_="new").status == 202
    h.container = other  # the poller invokes the other container's delivery function
    h.deliver_once("t1")
    assert [r.headers.get("ce-id") for r in h.sender.sent] == ["new"]
    assert h.messages(h.queue_of("t1")) == []


# ---- a deleted trigger's queue (defect 6) -----------------------------------------------


def test_a_deleted_triggers_queue_does_not_fail_the_broker() -> None:
    h = Harness()
    h.broker()
    h.trigger("keep")
    h.trigger("gone")
    ingress = Container(replace(h.settings, cache_ttl_seconds=3600.0))
    for port in ("store", "queues", "mappings", "blobs", "archive", "sender"):
        setattr(ingress, port, getattr(h.container, port))
    assert ingress.cache.get("ns", "default") is not None  # both routes cached
    h.queues.delete(h.queue_of("gone"))  # the trigger's delete removed its queue
    h.container = ingress
    assert h.send(id_="e1").status == 202  # before the fix: NotFoundError, a 500 for every event
    assert [m["event"]["id"] for m in h.messages(h.queue_of("keep"))] == ["e1"]
    assert h.send(id_="e2").status == 202  # the routes were read again
    assert [m["event"]["id"] for m in h.messages(h.queue_of("keep"))] == ["e1", "e2"]


# ---- the archive (defect 7) ----------------------------------------------------------------------


def _structured(event_id: str, data: str) -> bytes:
    event = {"specversion": "1.0", "id": event_id, "source": "/s", "type": "t", "data": data}
    return json.dumps(event).encode()


def test_a_large_event_is_archived_by_reference_and_loses_no_other_record() -> None:
    h = Harness()
    h.broker(annotations={"serverless-broker/max-event-bytes": str(3 * 1024 * 1024)})
    h.trigger("t1", filter={"type": "t"})
    big = "x" * (1200 * 1024)  # over Firehose's 1,000 KiB record limit when embedded
    batch = [json.loads(_structured("big", big)), json.loads(_structured("small", "hi"))]
    answer = h.post(
        {"content-type": "application/cloudevents-batch+json"}, json.dumps(batch).encode()
    )
    assert answer.status == 202
    accepted = {r["event"]["id"]: r for r in h.archive.decoded() if r["kind"] == "accepted"}
    # Before the fix the big record failed the whole put, and the small one was lost with it.
    assert set(accepted) == {"big", "small"}
    assert "dataref" not in accepted["small"] and accepted["small"]["event"]["data"] == "hi"
    record = accepted["big"]
    assert "data" not in record["event"] and record["event"]["type"] == "t"
    assert record["size"] > 1200 * 1024 and record["triggers"] == ["t1"]
    bucket, _, key = record["dataref"].removeprefix("s3://").partition("/")
    assert json.loads(h.blobs.get(bucket, key))["data"] == big  # readable for replay


def test_a_large_event_nobody_matches_is_archived_by_reference_too() -> None:
    h = Harness()
    h.broker(annotations={"serverless-broker/max-event-bytes": str(3 * 1024 * 1024)})
    body = _structured("big", "y" * (1100 * 1024))
    assert h.post({"content-type": "application/cloudevents+json"}, body).status == 202
    [record] = [r for r in h.archive.decoded() if r["kind"] == "accepted"]
    assert record["triggers"] == [] and record["dataref"].startswith("s3://")


def test_archive_failures_are_retried_then_counted_and_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    h = Harness()
    h.broker()
    h.archive.fail_next = 2  # a short outage: the third attempt gets through
    assert h.send(id_="e1").status == 202
    assert [r["event"]["id"] for r in h.archive.decoded() if r["kind"] == "accepted"] == ["e1"]
    h.archive.fail_next = 10  # a long one: the event is still accepted, the loss is not silent
    with caplog.at_level(logging.ERROR):
        assert h.send(id_="e2").status == 202
    assert 'broker_archive_failure_count_total{function="ingress"} 1' in (
        h.container.metrics.prometheus_text()
    )
    assert any("e2" in r.getMessage() for r in caplog.records)


# ---- what ingress accepts, delivery can encode (defect 5) ----------------------------------------


def test_a_map_key_that_cannot_be_a_header_name_is_refused_at_ingress() -> None:
    h = Harness()
    h.broker()
    event = {"specversion": "0.3", "id": "1", "source": "/s", "type": "t", "ext": {"a\r\nb": "x"}}
    answer = h.post({"content-type": "application/cloudevents+json"}, json.dumps(event).encode())
    assert answer.status == 400  # before the fix: 202, then every delivery raised
    assert b"Map key" in answer.body


class RaisingSender:
    def post(self, url: str, headers: object, body: bytes, timeout: float) -> HttpResponse:
        raise ValueError("Invalid header name b'ce-ext-a\\r\\nb'")


def test_a_sender_exception_is_an_attempt_with_a_reason() -> None:
    h = Harness()
    h.container.sender = RaisingSender()  # type: ignore[misc]
    h.broker()
    h.trigger("t1", delivery={"retry": 1})
    assert h.send(id_="e1").status == 202
    first = h.deliver_once("t1")
    assert len(first["batchItemFailures"]) == 1  # a retry, with backoff
    h.make_visible("t1")
    h.deliver_once("t1")  # the last attempt: dead-lettered with the reason
    [dead] = h.messages(h.dlq_of("t1"))
    assert dead["event"]["knativeerrorcode"] == 500
    reason = base64.b64decode(dead["event"]["knativeerrordata"])
    assert b"ValueError: Invalid header name" in reason


def test_a_huge_attribute_is_cut_in_the_archive_record_and_whole_at_its_reference() -> None:
    h = Harness()
    h.broker(annotations={"serverless-broker/max-event-bytes": str(3 * 1024 * 1024)})
    source = "/" + "s" * 2_000_000  # found by the fuzz suite: the record still overflowed
    event = {"specversion": "1.0", "id": "e1", "source": source, "type": "t"}
    answer = h.post({"content-type": "application/cloudevents+json"}, json.dumps(event).encode())
    assert answer.status == 202
    [record] = [r for r in h.archive.decoded() if r["kind"] == "accepted"]
    assert record["truncated"] == ["source"] and len(record["event"]["source"]) == 4096
    assert len(json.dumps(record)) < 1000 * 1024
    bucket, _, key = record["dataref"].removeprefix("s3://").partition("/")
    assert json.loads(h.blobs.get(bucket, key))["source"] == source


def test_attributes_that_overflow_a_record_are_cut_and_the_batch_is_archived_once() -> None:
    """Issue 31, item 6: an event under the 4 MiB limit whose attributes alone exceed Firehose's
    1,000 KiB (300 extensions of 3,900 characters). Before, its by-reference record was over the
    limit: never archived, and the nine events of its batch were archived three times."""
    h = Harness()
    h.broker()
    h.trigger("t1")
    big = {"specversion": "1.0", "id": "big", "source": "/s", "type": "t"}
    big.update({f"x{i:03d}": chr(97 + i % 26) * 3900 for i in range(300)})
    small = [{"specversion": "1.0", "id": f"s{i}", "source": "/s", "type": "t"} for i in range(9)]
    body = json.dumps([big, *small]).encode()
    assert 1000 * 1024 < len(body) < 4 * 1024 * 1024
    assert h.post({"content-type": "application/cloudevents-batch+json"}, body).status == 202
    accepted = [r for r in h.archive.decoded() if r["kind"] == "accepted"]
    assert sorted(r["event"]["id"] for r in accepted) == ["big"] + [f"s{i}" for i in range(9)]
    [record] = [r for r in accepted if r["event"]["id"] == "big"]
    line = next(r for r in h.archive.records if b'"id":"big"' in r)
    assert len(line) <= archive.MAX_RECORD_BYTES
    whole = {n for n, v in big.items() if record["event"].get(n) == v}
    assert {"specversion", "id", "source", "type"} <= whole and 0 < len(whole) < len(big)
    assert set(record["truncated"]) == set(big) - whole  # cut or left out: each one named
    bucket, _, key = record["dataref"].removeprefix("s3://").partition("/")
    assert json.loads(h.blobs.get(bucket, key))["x299"] == chr(97 + 299 % 26) * 3900
    assert "archive_failure_count_total" not in h.container.metrics.prometheus_text()


def test_a_record_firehose_refuses_is_sent_again_alone() -> None:
    h = Harness()
    h.broker()
    refused: list[bytes] = []

    def once(record: bytes) -> bool:  # Firehose's per-record ErrorCode, for e2's record, once
        if b'"id":"e2"' in record and not refused:
            refused.append(record)
            return True
        return False

    h.archive.refuse = once
    body = json.dumps([json.loads(_structured(f"e{i}", "d")) for i in range(5)]).encode()
    assert h.post({"content-type": "application/cloudevents-batch+json"}, body).status == 202
    ids = [r["event"]["id"] for r in h.archive.decoded() if r["kind"] == "accepted"]
    assert sorted(ids) == [f"e{i}" for i in range(5)] and refused
    assert h.archive.calls == 2


# ---- an unexpected failure waits seconds, not the queue's visibility timeout -------------------


def test_an_unexpected_failure_is_retried_within_seconds(monkeypatch: pytest.MonkeyPatch) -> None:
    from chalicelib.services.delivery import FAILURE_RETRY_SECONDS

    h = Harness(HttpResponse(500, {}, b"down"))
    h.broker()
    h.trigger("t1", delivery={"retry": 0})
    assert h.send(id_="e1").status == 202
    queues = h.container.queues
    dlq = h.dlq_of("t1")
    send_batch, change_visibility = queues.send_batch, queues.change_visibility
    rescheduled: list[tuple[str, int]] = []

    def no_dlq(name: str, messages: Sequence[OutgoingMessage]) -> list[str]:
        if name == dlq:  # the move to the DLQ fails: an AWS outage past botocore's retries
            return [m.id for m in messages]
        return send_batch(name, messages)

    def recording(name: str, receipt_handle: str, timeout: int) -> None:
        rescheduled.append((name, timeout))
        change_visibility(name, receipt_handle, timeout)

    monkeypatch.setattr(queues, "send_batch", no_dlq)
    monkeypatch.setattr(queues, "change_visibility", recording)
    answer = h.deliver_once("t1")
    assert len(answer["batchItemFailures"]) == 1
    assert rescheduled == [(h.queue_of("t1"), FAILURE_RETRY_SECONDS)]
    assert len(h.messages(h.queue_of("t1"))) == 1  # kept, visible again in seconds
