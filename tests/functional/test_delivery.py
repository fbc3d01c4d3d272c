"""Delivery behaviour (design.md §2.3) on in-memory fakes, with a scripted subscriber."""

from __future__ import annotations

import base64
import json
import threading
import time
from dataclasses import replace

import pytest

from chalicelib.ports import HttpResponse
from chalicelib.services.delivery import Delivery
from chalicelib.services.delivery_roles import Subscribers
from tests.functional.harness import Harness

OK = HttpResponse(202, {}, b"")
TRACE = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


def setup(*answers: HttpResponse, **delivery: object) -> Harness:
    h = Harness(*answers)
    h.broker()
    spec = {"delivery": delivery} if delivery else {}
    h.trigger("tr", filter={"type": "t"}, **spec)
    return h


def test_success_deletes_and_sends_binary_with_headers() -> None:
    h = setup(OK)
    h.post(
        {
            "ce-specversion": "1.0",
            "ce-id": "1",
            "ce-source": "/s",
            "ce-type": "t",
            "content-type": "text/plain",
            "knative-foo": "bar",
            "traceparent": TRACE,
        },
        b"payload",
    )
    answer = h.deliver_once("tr")
    assert answer["batchItemFailures"] == [] and answer["received"] == 1
    assert h.queues.depth(h.queue_of("tr")) == 0
    sent = h.sender.sent[0]
    assert sent.url == "http://sub.example/"
    assert sent.body == b"payload"
    assert sent.headers["ce-id"] == "1" and sent.headers["content-type"] == "text/plain"
    assert sent.headers["Prefer"] == "reply" and sent.headers["Kn-Namespace"] == "ns"
    assert sent.headers["knative-foo"] == "bar"
    assert "ce-knativebrokerttl" not in sent.headers
    trace_id = TRACE.split("-")[1]
    assert sent.headers["traceparent"].split("-")[1] == trace_id
    assert sent.headers["traceparent"] != TRACE  # a new span for the new hop
    records = [r for r in h.archive.decoded() if r["kind"] == "delivery"]
    assert records[0]["outcome"] == "delivered" and records[0]["attempt"] == 1


def test_structured_format() -> None:
    h = setup(OK, format="json")
    h.send(data=b"x")
    h.deliver_once("tr")
    sent = h.sender.sent[0]
    assert sent.headers["content-type"].startswith("application/cloudevents+json")
    doc = json.loads(sent.body)
    assert doc["id"] == "1" and "knativebrokerttl" not in doc


@pytest.mark.parametrize("status", [404, 408, 409, 429, 500, 503, None])
def test_retryable_answers_set_visibility_and_report_failure(status: int | None) -> None:
    h = setup(
        HttpResponse(status, {}, b"err"), retry=3, backoffPolicy="exponential", backoffDelay="PT2S"
    )
    h.send()
    answer = h.deliver_once("tr")
    assert len(answer["batchItemFailures"]) == 1
    message = h.queues._q(h.queue_of("tr"))["messages"][0]
    assert message.visible_at - h.queues._clock() == pytest.approx(2, abs=0.5)


@pytest.mark.parametrize("status", [100, 301, 400, 401, 403, 422])
def test_non_retryable_answers_dead_letter_at_once(status: int) -> None:
    body = b'{ "message": "catastrophic failure" }'
    h = setup(HttpResponse(status, {}, body), retry=5)
    h.send()
    answer = h.deliver_once("tr")
    assert answer["batchItemFailures"] == []
    assert h.queues.depth(h.queue_of("tr")) == 0
    [dead] = h.messages(h.dlq_of("tr"))
    event = dead["event"]
    assert event["knativeerrordest"] == "http://sub.example/"
    assert event["knativeerrorcode"] == status
    assert base64.b64decode(event["knativeerrordata"]) == body
    assert len(h.sender.sent) == 1


def test_exhausted_retries_dead_letter_after_retry_plus_one_attempts() -> None:
    h = setup(HttpResponse(500, {}, b""), retry=2, backoffPolicy="linear", backoffDelay="PT0S")
    h.send()
    for _ in range(3):
        h.make_visible("tr")
        h.deliver_once("tr")
    assert len(h.sender.sent) == 3
    assert h.queues.depth(h.queue_of("tr")) == 0
    [dead] = h.messages(h.dlq_of("tr"))
    assert dead["event"]["knativeerrorcode"] == 500
    assert dead["event"]["knativeerrordata"] == ""
    outcomes = [r["outcome"] for r in h.archive.decoded() if r["kind"] == "delivery"]
    assert outcomes == ["retry", "retry", "dead_lettered"]


def test_transport_error_dead_letters_with_500() -> None:
    h = setup(HttpResponse(None, {}, b"dispatch error: refused", error="ConnectError"), retry=0)
    h.send()
    h.deliver_once("tr")
    [dead] = h.messages(h.dlq_of("tr"))
    assert dead["event"]["knativeerrorcode"] == 500


def test_retry_after_is_honoured_up_to_retry_after_max() -> None:
    h = setup(
        HttpResponse(429, {"retry-after": "120"}, b""),
        retry=3,
        backoffPolicy="linear",
        backoffDelay="PT1S",
        retryAfterMax="PT60S",
    )
    h.send()
    h.deliver_once("tr")
    message = h.queues._q(h.queue_of("tr"))["messages"][0]
    assert message.visible_at - h.queues._clock() == pytest.approx(60, abs=1)


def reply_response(status: int = 200, **attrs: str) -> HttpResponse:
    headers = {
        "ce-specversion": "1.0",
        "ce-id": "r1",
        "ce-source": "/sub",
        "ce-type": "reply",
        "content-type": "text/plain",
    }
    headers.update({f"ce-{k}": v for k, v in attrs.items()})
    return HttpResponse(status, headers, b"reply-data")


def test_reply_is_ingested_into_the_same_broker() -> None:
    h = setup(reply_response())
    h.trigger("replies", filter={"type": "reply"})
    h.send()
    h.deliver_once("tr")
    [queued] = h.messages(h.queue_of("replies"))
    assert queued["event"]["id"] == "r1"
    assert queued["event"]["knativebrokerttl"] == 254  # one reply hop
    assert [r["outcome"] for r in h.archive.decoded() if r["kind"] == "delivery"] == ["reply"]


def test_202_with_an_event_is_not_a_reply() -> None:
    h = setup(reply_response(202))
    h.trigger("replies", filter={"type": "reply"})
    h.send()
    h.deliver_once("tr")
    assert h.messages(h.queue_of("replies")) == []


def test_invalid_reply_is_a_failure() -> None:
    h = setup(HttpResponse(200, {"ce-specversion": "1.0", "ce-id": "x"}, b""), retry=1)
    h.send()
    assert len(h.deliver_once("tr")["batchItemFailures"]) == 1


def test_reply_that_cannot_be_stored_retries_the_original() -> None:
    h = setup(reply_response(), retry=3)
    h.trigger("replies", filter={"type": "reply"})
    h.send()
    h.queues.fail_next_sends = 100
    assert len(h.deliver_once("tr")["batchItemFailures"]) == 1
    h.queues.fail_next_sends = 0
    h.make_visible("tr")
    assert h.deliver_once("tr")["batchItemFailures"] == []
    assert len(h.messages(h.queue_of("replies"))) == 1


def test_reply_loop_ends() -> None:
    h = setup(reply_response(type="t"))  # the reply matches the same trigger again
    h.send()
    hops = 0
    while h.queues.depth(h.queue_of("tr")) and hops < 400:
        h.deliver_once("tr")
        hops += 1
    # Stored TTLs run 255, 254, ..., 1: 255 deliveries; the reply to the last is refused.
    assert hops == 255


def test_dead_letter_sink_receives_without_prefer_reply() -> None:
    h = setup(HttpResponse(400, {}, b"bad"), OK, retry=0, deadLetterSink={"uri": "http://dls/"})
    h.send()
    h.deliver_once("tr")
    h.deliver_once("tr", dead_letter=True)
    dls = h.sender.sent[-1]
    assert dls.url == "http://dls/"
    assert "Prefer" not in dls.headers
    assert dls.headers["ce-knativeerrorcode"] == "400"
    assert h.queues.depth(h.dlq_of("tr")) == 0


def test_large_event_is_rehydrated_byte_identical() -> None:
    h = setup(OK)
    data = bytes(range(256)) * 4096  # 1 MiB
    assert h.send(data=data).status == 202
    h.deliver_once("tr")
    assert h.sender.sent[0].body == data


def test_deleted_trigger_drops_its_pending_events() -> None:
    h = setup(OK)
    h.send()
    queue = h.queue_of("tr")
    received = h.queues.receive(queue, 10, 0, None)
    h.container.triggers.delete("ns", "tr")
    assert h.queues.get(queue) is None
    assert received  # they were in flight; delivery drops them on purpose (Knative allows it)


# ---- deliveries in flight (DeliveryParts.in_flight) ---------------------------------------------


class InFlight:
    """A subscriber that records how many posts overlap. ``gate``: each post waits until that many
    are in flight together (a barrier, so the test fails rather than passes if they never are);
    ``delay``: seconds each post takes, waiting (not on the CPU)."""

    def __init__(
        self, failing: frozenset[str] = frozenset(), gate: int = 0, delay: float = 0.0
    ) -> None:
        self._lock = threading.Lock()
        self._now = 0
        self.most = 0
        self.ids: list[str] = []
        self._failing = failing
        self._gate = threading.Barrier(gate, timeout=10) if gate else None
        self._delay = delay

    def post(self, url: str, headers: dict[str, str], body: bytes, timeout: float) -> HttpResponse:
        with self._lock:
            self._now += 1
            self.most = max(self.most, self._now)
            self.ids.append(headers["ce-id"])
        try:
            if self._gate is not None:
                self._gate.wait()
            if self._delay:
                time.sleep(self._delay)
            return HttpResponse(500 if headers["ce-id"] in self._failing else 202, {}, b"")
        finally:
            with self._lock:
                self._now -= 1


def in_flight(h: Harness, sender: InFlight, lanes: int) -> None:
    """Deliver through ``sender`` with ``lanes`` requests in flight at most."""
    c = h.container
    c.sender = sender  # type: ignore[misc]
    parts = replace(c.delivery_parts, sender=sender, in_flight=lanes)
    c.delivery = Delivery(parts, Subscribers(parts, c.ingress))  # type: ignore[misc]


def test_a_batch_runs_with_as_many_requests_in_flight_as_configured() -> None:
    h = setup(OK)
    sender = InFlight(gate=3)
    in_flight(h, sender, 3)
    for i in range(9):
        h.send(id_=str(i))
    answer = h.deliver_once("tr")
    assert answer["received"] == 9 and answer["batchItemFailures"] == []
    assert sender.most == 3 and sorted(sender.ids) == [str(i) for i in range(9)]
    assert h.queues.depth(h.queue_of("tr")) == 0


def test_failures_in_lanes_are_reported_for_their_own_records() -> None:
    h = setup(OK)
    sender = InFlight(failing=frozenset({"2", "5"}))
    in_flight(h, sender, 4)
    for i in range(10):
        h.send(id_=str(i))
    answer = h.deliver_once("tr")
    assert len(answer["batchItemFailures"]) == 2
    outcomes = {r["event_id"]: r["outcome"] for r in h.archive.decoded() if r["kind"] == "delivery"}
    assert outcomes == {str(i): "retry" if i in (2, 5) else "delivered" for i in range(10)}
    assert h.queues.depth(h.queue_of("tr")) == 2  # only the failed two stay, invisible for now


def test_one_in_flight_delivers_one_at_a_time_in_queue_order() -> None:
    h = setup(OK)
    sender = InFlight()
    in_flight(h, sender, 1)
    for i in range(10):
        h.send(id_=str(i))
    assert h.deliver_once("tr")["batchItemFailures"] == []
    assert sender.most == 1 and sender.ids == [str(i) for i in range(10)]  # in queue order


def test_the_default_sends_a_whole_batch_at_once() -> None:
    h = setup(OK)
    assert h.container.delivery_parts.in_flight == 10
    sender = InFlight(gate=10)  # each post waits until all ten are in flight
    c = h.container
    c.sender = sender  # type: ignore[misc]
    parts = replace(c.delivery_parts, sender=sender)
    c.delivery = Delivery(parts, Subscribers(parts, c.ingress))  # type: ignore[misc]
    for i in range(10):
        h.send(id_=str(i))
    assert h.deliver_once("tr")["batchItemFailures"] == []
    assert sender.most == 10


def test_claim_checks_are_read_when_sending_and_a_lost_one_fails_only_its_record() -> None:
    h = setup(OK)
    big = bytes(range(256)) * 1200  # 300 KiB: claim-checked in S3
    assert h.send(id_="big-1", data=big).status == 202
    assert h.send(id_="small", data=b"s").status == 202
    assert h.send(id_="big-2", data=big).status == 202
    # A queue's claim (not the archive's copy of the event, docs/replay.md).
    lost = sorted(k for k in h.blobs.objects if k[0] == h.settings.claim_bucket)[0]
    lost_id = json.loads(h.blobs.objects[lost])["id"]
    del h.blobs.objects[lost]
    answer = h.deliver_once("tr")
    assert len(answer["batchItemFailures"]) == 1
    delivered = {s.headers["ce-id"]: s.body for s in h.sender.sent}
    kept = "big-2" if lost_id == "big-1" else "big-1"
    assert delivered == {"small": b"s", kept: big}
    assert h.queues.depth(h.queue_of("tr")) == 1  # the lost one stays for SQS to redeliver
