"""max-rate at delivery (docs/flow-control.md) on fakes: deliveries over the rate are delayed, not
failed; a delay spends no attempt and never dead-letters; each delay is counted."""

from __future__ import annotations

import json
from dataclasses import replace

from chalicelib.core.cloudevents.sqs_message import ATTEMPTS_ATTRIBUTE
from chalicelib.core.reconcile import CRASH_RECEIVE_MARGIN, RATE_RECEIVE_MARGIN
from chalicelib.core.resources.broker import MAX_RATE_ANNOTATION
from chalicelib.ports import HttpResponse
from chalicelib.services.delivery import FAILURE_RETRY_SECONDS
from tests.functional.harness import Harness
from tests.functional.test_ordered_delivery import deliver, fifo_dlq, fifo_queue, send

OK = HttpResponse(202, {}, b"")


def setup(
    rate: str, *answers: HttpResponse, horizon: float, hold: float
) -> tuple[Harness, list[float]]:
    """A trigger with ``rate`` events/s, its delivery waiting on a virtual sleep (the waits are
    recorded, not slept)."""
    h = Harness(*answers)
    c = h.container
    waits: list[float] = []
    c.delivery_parts = replace(  # type: ignore[misc]
        c.delivery_parts, rate_horizon=horizon, rate_hold=hold, sleep=waits.append
    )
    h.broker()
    body = {
        "metadata": {"name": "tr", "annotations": {MAX_RATE_ANNOTATION: rate}},
        "spec": {
            "broker": "default",
            "subscriber": {"uri": "http://sub.example/"},
            "delivery": {"retry": 2, "backoffDelay": "PT1S"},
        },
    }
    c.triggers.put("ns", "tr", body)
    return h, waits


def _delayed(h: Harness) -> float:
    prefix = 'broker_delayed_delivery_count_total{broker="default",namespace="ns",trigger="tr"}'
    for line in h.container.metrics.prometheus_text().splitlines():
        if line.startswith(prefix):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def _attempts(h: Harness) -> list[int]:
    return [r["attempt"] for r in h.archive.decoded() if r["kind"] == "delivery"]


def test_a_batch_within_the_horizon_is_paced_at_the_rate_not_failed() -> None:
    h, waits = setup("5", OK, horizon=2.0, hold=2.0)
    for i in range(10):
        h.send(id_=str(i))
    answer = h.deliver_once("tr")
    assert answer["batchItemFailures"] == [] and answer["received"] == 10
    assert len(h.sender.sent) == 10  # a full bucket (1) and two seconds of tokens ahead (10)
    # each send waited for its token: due one fifth of a second after the previous one
    assert len(waits) == 9 and 1.2 < max(waits) <= 1.8  # (less the time spent before it)
    assert _delayed(h) == 9
    assert h.queues.depth(h.queue_of("tr")) == 0


def test_beyond_the_horizon_never_tried_events_are_requeued_and_stay_first_attempts() -> None:
    h, _ = setup("1", OK, horizon=2.0, hold=2.0)
    for i in range(10):
        h.send(id_=str(i))
    answer = h.deliver_once("tr")
    assert answer["batchItemFailures"] == []  # acknowledged: a delayed copy waits in the queue
    assert len(h.sender.sent) == 3  # one in the bucket, two a second apart ahead
    queue = h.queues._q(h.queue_of("tr"))["messages"]
    assert len(queue) == 7
    delays = sorted(m.visible_at for m in queue)
    assert delays == sorted(set(delays))  # spread one token apart, not all at once
    assert _delayed(h) == 2 + 7
    for _ in range(10):  # let the clock jump: every copy comes back, is delivered or delayed
        if h.queues.depth(h.queue_of("tr")) == 0:
            break
        h.make_visible("tr")
        h.rate._buckets.clear()  # (the tokens came back too, as time passed)
        h.deliver_once("tr")
    assert sorted(s.headers["ce-id"] for s in h.sender.sent) == [str(i) for i in range(10)]
    assert set(_attempts(h)) == {1}  # the delays spent no attempt
    assert h.queues.depth(h.dlq_of("tr")) == 0


def test_a_retried_event_waits_in_the_invocation_then_is_copied_back_with_its_attempts() -> None:
    """A retried event waits up to ``hold`` for its token; past that a copy goes back to the
    queue carrying the attempts made (its receive count restarts), so the delay costs no attempt
    and it is never dead-lettered for waiting."""
    h, waits = setup("1", HttpResponse(503, {}, b""), OK, OK, horizon=0.0, hold=3.0)
    h.send(id_="r")
    assert len(h.deliver_once("tr")["batchItemFailures"]) == 1  # attempt 1: 503, retried
    h.make_visible("tr")
    h.rate.acquire("ns/default/tr", 1.0, 10, _now(), 10.0)  # another invocation took them all
    answer = h.deliver_once("tr")
    assert answer["batchItemFailures"] == []  # acknowledged: its copy waits in the queue
    assert len(h.sender.sent) == 1 and not waits
    [message] = h.queues._q(h.queue_of("tr"))["messages"]
    assert message.visible_at > 0  # delayed until about its token
    assert message.message_attributes[ATTEMPTS_ATTRIBUTE] == "1"
    assert _delayed(h) == 1
    h.make_visible("tr")
    h.rate._buckets.clear()
    assert h.deliver_once("tr")["batchItemFailures"] == []
    assert _attempts(h) == [1, 2]  # the delay spent no attempt
    assert h.queues.depth(h.dlq_of("tr")) == 0
    redrive = json.loads(h.queues._q(h.queue_of("tr"))["attributes"]["RedrivePolicy"])
    assert redrive["maxReceiveCount"] == 2 + 1 + CRASH_RECEIVE_MARGIN + RATE_RECEIVE_MARGIN


def test_a_retried_event_within_the_hold_waits_for_its_token_in_the_invocation() -> None:
    h, waits = setup("1", HttpResponse(503, {}, b""), OK, horizon=0.0, hold=5.0)
    h.send(id_="r")
    h.deliver_once("tr")
    h.make_visible("tr")
    answer = h.deliver_once("tr")
    assert answer["batchItemFailures"] == []
    assert len(waits) == 1 and 0.5 < waits[0] <= 1.0  # the next token, a second after the first
    assert _attempts(h) == [1, 2]


def test_an_unreadable_bucket_sends_nothing_and_retries_soon() -> None:
    h, _ = setup("5", OK, horizon=2.0, hold=2.0)
    h.send(id_="a")
    h.send(id_="b")
    h.rate.fail_next = 1
    answer = h.deliver_once("tr")
    assert len(answer["batchItemFailures"]) == 2 and h.sender.sent == []
    hidden = [m.visible_at for m in h.queues._q(h.queue_of("tr"))["messages"]]
    assert all(v > 0 for v in hidden) and len(hidden) == 2
    assert FAILURE_RETRY_SECONDS > 0


def test_triggers_without_a_rate_never_ask_the_bucket() -> None:
    h = Harness(OK)
    h.broker()
    h.trigger("plain")
    h.send()
    assert h.deliver_once("plain")["batchItemFailures"] == []
    assert h.rate.calls == 0


def _now() -> float:
    import time

    return time.time()


def test_an_ordered_trigger_waits_in_the_invocation_and_holds_its_group_when_handed_back() -> None:
    """FIFO: a copy would lose its place in its group, so an ordered trigger's events wait for
    their tokens inside the invocation; past the hold, the event is handed back (its group held
    behind it) and delivered later, in order, never dead-lettered."""
    h = Harness(OK, OK, OK, OK)
    c = h.container
    waits: list[float] = []
    c.delivery_parts = replace(  # type: ignore[misc]
        c.delivery_parts, rate_horizon=0.0, rate_hold=3.0, sleep=waits.append
    )
    h.broker()
    annotations = {MAX_RATE_ANNOTATION: "1", "serverless-broker/delivery-order": "ordered"}
    body = {
        "metadata": {"name": "t", "annotations": annotations},
        "spec": {"broker": "default", "subscriber": {"uri": "http://sub.example/"}},
    }
    c.triggers.put("ns", "t", body)
    for i in range(3):
        send(h, f"k{i}", "key")
    queue = fifo_queue(h)
    for _ in range(3):
        assert deliver(h, queue)["failed"] == []
    assert [s.headers["ce-id"] for s in h.sender.sent] == ["k0", "k1", "k2"]
    # a token a second (the sleep is virtual: the wall clock did not move between invocations)
    assert len(waits) == 2 and 0.5 < waits[0] <= 1.0 and 1.5 < waits[1] <= 2.0
    h.rate.acquire("ns/default/t", 1.0, 10, _now(), 10.0)  # booked far ahead by others
    send(h, "k3", "key")
    assert deliver(h, queue)["failed"] == ["k3"]  # handed back, not sent
    assert len(h.sender.sent) == 3
    for m in h.queues._q(queue)["messages"]:
        m.visible_at = 0
    h.rate._buckets.clear()
    assert deliver(h, queue)["failed"] == []
    assert [s.headers["ce-id"] for s in h.sender.sent][-1] == "k3"
    assert h.queues.depth(fifo_dlq(h)) == 0


def test_copies_sqs_refuses_are_handed_back_instead_never_lost() -> None:
    h, _ = setup("1", OK, horizon=0.0, hold=0.0)
    for i in range(4):
        h.send(id_=str(i))
    h.queues.fail_next_sends = 2  # SQS refuses two entries of the copies' call
    answer = h.deliver_once("tr")
    assert len(h.sender.sent) == 1  # the one token in the bucket
    assert len(answer["batchItemFailures"]) == 2  # refused copies: handed back, kept
    queue = h.queues._q(h.queue_of("tr"))["messages"]
    assert len(queue) == 2 + 1  # the two handed back, the one copy
    assert all(m.visible_at > 0 for m in queue)  # none comes back before its token
    assert _delayed(h) == 3
