"""Delivery of packs (docs/replay.md) over the fakes: each event of a pack goes through the same
passes and policy as a single message; a retried event goes back to its queue alone, with its
attempts and its backoff; a pack is done only when each of its events is; a pack the redrive
policy moved to the DLQ is unpacked there, and listed event by event."""

from __future__ import annotations

import base64
import json
import random
import threading
import time
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import pytest

from brokerctl.event_display import EventDisplay, Received, Reply
from chalicelib.config import Settings
from chalicelib.core.cloudevents import codec
from chalicelib.core.cloudevents.json_format import dumps_compact
from chalicelib.core.cloudevents.sqs_message import (
    ATTEMPTS_ATTRIBUTE,
    NOT_BEFORE_ATTRIBUTE,
    PACK_MAX_EVENTS,
    QueuedEvent,
    decode_message,
    encode_message,
    encode_pack,
    pack_head,
)
from chalicelib.ports import HttpResponse, OutgoingMessage
from tests.fakes import MemoryQueues, SentRequest
from tests.functional.harness import Harness
from tests.functional.replay_support import flush_archive, put_replay, window


class ById:
    """An HttpSender answering each event by its id (202 for ids it does not know)."""

    def __init__(self, answers: Mapping[str, HttpResponse]) -> None:
        self.answers = dict(answers)
        self.sent: list[SentRequest] = []
        self._lock = threading.Lock()

    def post(
        self, url: str, headers: Mapping[str, str], body: bytes, timeout: float
    ) -> HttpResponse:
        with self._lock:
            self.sent.append(SentRequest(url, dict(headers), body, timeout))
        return self.answers.get(headers.get("ce-id", ""), HttpResponse(202, {}, b""))

    def ids(self) -> list[str]:
        return [s.headers["ce-id"] for s in self.sent]


def _harness(answers: Mapping[str, HttpResponse], **delivery: Any) -> tuple[Harness, ById]:
    h = Harness()
    sender = ById(answers)
    h.container.sender = sender  # type: ignore[misc]
    h.broker()
    h.trigger("a", filter={"type": "t"}, delivery=delivery)
    return h, sender


def _event(i: str) -> dict[str, Any]:
    return {
        "specversion": "1.0",
        "id": i,
        "source": "/s",
        "type": "t",
        "datacontenttype": "text/plain",
        "data": f"data of {i}",
        "replayname": "r",
    }


def _put_pack(h: Harness, ids: list[str], queue: str | None = None) -> None:
    head = pack_head("ns", "default", "a", {})
    body = encode_pack(head, [dumps_compact(_event(i)) for i in ids])
    assert h.queues.send_batch(queue or h.queue_of("a"), [OutgoingMessage("0", body)]) == []


def _outcomes(h: Harness) -> list[tuple[str, int, str]]:
    """(event id, attempt, outcome) of every delivery record archived."""
    records = [json.loads(line) for line in h.archive.records]
    return [(r["event_id"], r["attempt"], r["outcome"]) for r in records if r["kind"] == "delivery"]


def _queued(h: Harness, queue: str) -> list[Any]:
    return list(h.queues._q(queue)["messages"])


REPLY = HttpResponse(
    200,
    {"ce-specversion": "1.0", "ce-id": "reply-1", "ce-source": "/sub", "ce-type": "reply"},
    b"",
)


def test_a_pack_with_mixed_outcomes_is_done_when_each_event_is() -> None:
    answers = {
        "retry": HttpResponse(503, {}, b"busy"),
        "dead": HttpResponse(400, {}, b"refused"),
        "reply": REPLY,
    }
    h, sender = _harness(answers, retry=2, backoffPolicy="linear", backoffDelay="PT2S")
    _put_pack(h, ["ok", "retry", "dead", "reply"])
    before = time.monotonic()
    answer = h.deliver_once("a")
    assert answer["received"] == 1
    assert answer.get("batchItemFailures", []) == []  # the pack is deleted: every event is done
    assert sorted(sender.ids()) == ["dead", "ok", "reply", "retry"]
    assert sorted(_outcomes(h)) == [
        ("dead", 1, "dead_lettered"),
        ("ok", 1, "delivered"),
        ("reply", 1, "reply"),
        ("retry", 1, "retry"),
    ]
    # the retried event is back in the queue alone, after its backoff, with its attempt made
    (back,) = _queued(h, h.queue_of("a"))
    assert decode_message(back.body).event.id == "retry"  # type: ignore[union-attr]
    assert back.message_attributes == {ATTEMPTS_ATTRIBUTE: "1"}
    assert back.visible_at >= before + 2
    # the dead letter is a single event's, with Knative's error extensions
    (dead,) = h.messages(h.dlq_of("a"))
    assert set(dead) == {"v", "namespace", "broker", "trigger", "event", "headers"}
    assert dead["event"]["id"] == "dead" and dead["event"]["knativeerrorcode"] == 400
    assert dead["event"]["knativeerrordest"] == "http://sub.example/"
    assert base64.b64decode(dead["event"]["knativeerrordata"]) == b"refused"
    # the reply was ingested into the broker (type "reply": trigger a's filter leaves it out)
    replies = [json.loads(r) for r in h.archive.records]
    assert any(r["kind"] == "accepted" and r["event"]["id"] == "reply-1" for r in replies)


def test_attempts_count_across_the_pack_and_its_single_message_to_the_dlq() -> None:
    h, sender = _harness({"e": HttpResponse(503, {}, b"down")}, retry=2)  # 3 attempts
    _put_pack(h, ["e", "fine"])
    assert h.deliver_once("a").get("batchItemFailures", []) == []  # attempt 1: sent back
    (back,) = _queued(h, h.queue_of("a"))
    assert back.message_attributes == {ATTEMPTS_ATTRIBUTE: "1"}
    # attempt 2 is the single message's first receive: retried in place (visibility)
    assert len(h.deliver_once("a").get("batchItemFailures", [])) == 1
    h.make_visible("a")
    assert h.deliver_once("a").get("batchItemFailures", []) == []  # attempt 3: the last
    assert sender.ids() == ["e", "fine", "e", "e"]
    assert [o for o in _outcomes(h) if o[0] == "e"] == [
        ("e", 1, "retry"),
        ("e", 2, "retry"),
        ("e", 3, "dead_lettered"),
    ]
    (dead,) = h.messages(h.dlq_of("a"))
    assert dead["event"]["id"] == "e" and dead["event"]["knativeerrorcode"] == 503
    assert h.queues.depth(h.queue_of("a")) == 0


def test_a_failed_send_back_fails_the_whole_pack_and_it_is_received_again() -> None:
    h, sender = _harness({"retry": HttpResponse(503, {}, b"")}, retry=5)
    _put_pack(h, ["ok", "retry"])
    h.queues.fail_next_sends = 1  # SQS refuses the retried event's message
    answer = h.deliver_once("a")
    assert len(answer["batchItemFailures"]) == 1  # the pack stays
    pack = _queued(h, h.queue_of("a"))
    assert len(pack) == 1 and '"pack":[' in pack[0].body
    key = (
        "requeue_failure_count",
        (("broker", "default"), ("namespace", "ns"), ("trigger", "a")),
    )
    h.container.metrics.flush()
    assert h.container.metrics._counters[key] == 1
    h.make_visible("a")
    assert h.deliver_once("a").get("batchItemFailures", []) == []
    assert sender.ids() == ["ok", "retry", "ok", "retry"]  # delivered again: at least once
    (back,) = _queued(h, h.queue_of("a"))
    # the pack's second receive is attempt 2 for each of its events
    assert back.message_attributes == {ATTEMPTS_ATTRIBUTE: "2"}


def test_a_backoff_past_sqs_longest_delay_is_kept_by_a_not_before() -> None:
    h, sender = _harness(
        {"e": HttpResponse(503, {}, b"")}, retry=3, backoffPolicy="linear", backoffDelay="PT20M"
    )
    _put_pack(h, ["e"])
    sent_at = int(time.time())
    h.deliver_once("a")
    (back,) = _queued(h, h.queue_of("a"))
    due = int(back.message_attributes[NOT_BEFORE_ATTRIBUTE])
    assert sent_at + 1200 <= due <= int(time.time()) + 1200
    assert back.message_attributes[ATTEMPTS_ATTRIBUTE] == "1"
    assert back.visible_at - time.monotonic() > 890  # SQS's longest delay: 900 s
    h.make_visible("a")  # 900 s later: received early, sent back for the rest, not tried
    assert h.deliver_once("a").get("batchItemFailures", []) == []
    assert sender.ids() == ["e"]
    (again,) = _queued(h, h.queue_of("a"))
    assert again.message_attributes == back.message_attributes  # the same count and due time
    assert again.receive_count == 0


def test_a_hostile_pack_goes_the_poison_path_untouched() -> None:
    h, sender = _harness({})
    ids = [f"e{i}" for i in range(PACK_MAX_EVENTS + 1)]
    body = pack_head("ns", "default", "a", {}) + ",".join(json.dumps(_event(i)) for i in ids)
    wrong_version = body.replace('"v":1', '"v":9', 1) + "]}"
    for text in (body + "]}", wrong_version):
        h.queues.send_batch(h.queue_of("a"), [OutgoingMessage("0", text)])
        assert h.deliver_once("a").get("batchItemFailures", []) == []
    assert sender.sent == []  # nothing of a pack whose envelope is unsound is delivered
    moved = [m.body for m in _queued(h, h.dlq_of("a"))]
    assert moved == [body + "]}", wrong_version]  # kept whole in the DLQ, for inspection


def test_an_unreadable_event_costs_only_itself_not_its_pack() -> None:
    """An archived event that no longer reads (a damaged archive, a stricter decoder): the rest
    of its pack is delivered; it alone goes to the DLQ, kept there for inspection, never deleted
    unread by the dead-letter function."""
    h, sender = _harness({}, deadLetterSink={"uri": "http://sink.example/"})
    bad = {**_event("x"), "data_base64": 5}
    head = pack_head("ns", "default", "a", {})
    body = encode_pack(
        head,
        [dumps_compact(_event("g1")), json.dumps(bad), '{"id":7}', dumps_compact(_event("g2"))],
    )
    h.queues.send_batch(h.queue_of("a"), [OutgoingMessage("0", body)])
    assert h.deliver_once("a").get("batchItemFailures", []) == []
    assert sender.ids() == ["g1", "g2"]
    dlq = h.dlq_of("a")
    alone = [json.loads(m.body) for m in _queued(h, dlq)]
    assert [m["event"] for m in alone] == [bad, {"id": 7}]
    assert all(m["trigger"] == "a" and "pack" not in m for m in alone)
    listed = h.container.dead_letters.list("ns", "default", "a", 10)["items"]
    assert len(listed) == 2 and all("unreadable" in item for item in listed)
    # The dead-letter function keeps them (hidden, not deleted) and sends nothing to the sink.
    failures = h.deliver_once("a", dead_letter=True).get("batchItemFailures", [])
    assert len(failures) == 2 and h.queues.depth(dlq) == 2
    assert sender.ids() == ["g1", "g2"]


def test_a_failed_move_of_an_unreadable_event_fails_its_pack() -> None:
    h, sender = _harness({})
    body = encode_pack(pack_head("ns", "default", "a", {}), [dumps_compact(_event("g")), "[]"])
    h.queues.send_batch(h.queue_of("a"), [OutgoingMessage("0", body)])
    real = h.queues.send_batch

    def refuse_the_dlq(queue: str, messages: Any) -> list[str]:
        if queue == h.dlq_of("a"):
            raise ConnectionError("DLQ unreachable")
        return real(queue, messages)

    h.queues.send_batch = refuse_the_dlq  # type: ignore[method-assign]
    assert len(h.deliver_once("a").get("batchItemFailures", [])) == 1  # received again
    assert sender.sent == [] and h.queues.depth(h.queue_of("a")) == 1
    h.queues.send_batch = real  # type: ignore[method-assign]
    h.make_visible("a")
    assert h.deliver_once("a").get("batchItemFailures", []) == []
    assert sender.ids() == ["g"] and h.queues.depth(h.dlq_of("a")) == 1


def test_a_pack_in_the_dlq_is_listed_event_by_event_and_unpacked_for_the_sink() -> None:
    h, sender = _harness({}, deadLetterSink={"uri": "http://sink.example/"})
    dlq = h.dlq_of("a")
    _put_pack(h, ["d1", "d2", "d3"], queue=dlq)  # what the redrive policy does to a pack
    listed = h.container.dead_letters.list("ns", "default", "a", 10)
    assert [(i["event"]["id"], i.get("packIndex")) for i in listed["items"]] == [
        ("d1", 0),
        ("d2", 1),
        ("d3", 2),
    ]
    assert h.container.dead_letters.list("ns", "default", "a", 2)["count"] == 2
    # the dead-letter function splits it into single dead letters, then sends each to the sink
    assert h.deliver_once("a", dead_letter=True).get("batchItemFailures", []) == []
    assert sender.sent == [] and h.queues.depth(dlq) == 3
    while h.queues.depth(dlq):
        assert h.deliver_once("a", dead_letter=True).get("batchItemFailures", []) == []
    assert sorted(sender.ids()) == ["d1", "d2", "d3"]
    assert {s.url for s in sender.sent} == {"http://sink.example/"}


def test_a_pack_in_the_dlq_is_redriven_whole_and_delivered() -> None:
    h, sender = _harness({})
    _put_pack(h, ["d1", "d2"], queue=h.dlq_of("a"))
    assert h.container.dead_letters.redrive("ns", "default", "a")["redriven"] == 1
    assert h.deliver_once("a").get("batchItemFailures", []) == []
    assert sender.ids() == ["d1", "d2"]


# ---- end to end over real HTTP ------------------------------------------------------------------


class VirtualClock:
    """The fake queues' clock: stands still while work is done, jumps when nothing is visible."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_replayed_packs_reach_a_flaky_subscriber_or_the_dlq_every_event_counted() -> None:
    n = 600
    flaky = random.Random(19)
    lock = threading.Lock()
    answers: dict[str, list[int]] = {}  # event id -> the statuses it got, in order

    def subscriber(got: Received, count: int) -> Reply:
        with lock:
            draw = flaky.random()
            status = 400 if draw < 0.03 else 503 if draw < 0.33 else 202
            answers.setdefault(got.headers["ce-id"], []).append(status)
        return Reply(status, body=f"status {status}".encode())

    clock = VirtualClock()
    with EventDisplay(responder=subscriber, keep=False) as sub:
        settings = replace(
            Settings(), cache_ttl_seconds=0.0, local_mode=True, replay_settle_seconds=0.0
        )
        h = Harness(settings=settings)
        h.queues = MemoryQueues(clock)
        h.container.queues = h.queues  # type: ignore[misc]
        del h.container.sender  # the real urllib3 sender (local mode allows loopback)
        h.broker()
        delivery = {"retry": 2, "backoffPolicy": "linear", "backoffDelay": "PT1S"}
        h.trigger("a", uri=sub.url, delivery=delivery)
        start, _ = window()
        for i in range(n):
            assert h.send(id_=f"e{i:04d}").status == 202
        h.queues.purge(h.queue_of("a"))  # live delivery is not what is counted here
        flush_archive(h)
        _, end = window()
        put_replay(h, "r", start, end, packing=True)
        assert h.container.replay_runner.run("ns", "default", "r", 30.0)
        queue = h.queue_of("a")
        packs = [m for m in _queued(h, queue) if '"pack":[' in m.body]
        assert len(packs) == -(-n // PACK_MAX_EVENTS)  # small events: full packs

        def let_a_backoff_pass() -> None:  # nothing visible
            clock.now += 1.0

        h.deliver_until_empty(queue, let_a_backoff_pass, 10_000)
        assert h.queues.depth(queue) == 0
        dead = {m["event"]["id"]: m["event"] for m in h.messages(h.dlq_of("a"))}

    ids = {f"e{i:04d}" for i in range(n)}
    delivered = {i for i, statuses in answers.items() if statuses[-1] == 202}
    assert set(answers) == ids  # every event reached the subscriber
    assert delivered | set(dead) == ids and not delivered & set(dead)  # each one end, once
    for i, event in dead.items():
        statuses = answers[i]
        # the reason is the last answer; 400 at once, 503 only after retry + 1 attempts
        assert event["knativeerrorcode"] == statuses[-1]
        assert base64.b64decode(event["knativeerrordata"]) == f"status {statuses[-1]}".encode()
        assert event["replayname"] == "r"
        assert statuses[-1] == 400 or statuses == [503, 503, 503]
    for i in delivered:
        assert len(answers[i]) <= 3 and all(s == 503 for s in answers[i][:-1])
    assert sum(1 for i in dead if answers[i][-1] == 503) >= 5  # ~0.3 ** 3 of them: 16 here


def test_attempts_carried_to_the_dlq_by_the_redrive_policy_are_not_the_sinks() -> None:
    h, sender = _harness(
        {"e": HttpResponse(503, {}, b"")}, retry=1, deadLetterSink={"uri": "http://sink.example/"}
    )
    single = encode_message(
        QueuedEvent("ns", "default", "a", codec.from_json(_event("e")), None, {})
    )
    carried = {ATTEMPTS_ATTRIBUTE: "5", NOT_BEFORE_ATTRIBUTE: str(2**40)}
    # a retried event that kept crashing, moved with its attributes by the redrive policy
    h.queues.send_batch(h.dlq_of("a"), [OutgoingMessage("0", single, message_attributes=carried)])
    answer = h.deliver_once("a", dead_letter=True)
    assert sender.ids() == ["e"]  # tried at once, not held by the subscriber's not-before
    assert len(answer["batchItemFailures"]) == 1  # the sink's attempt 1 of 2: retried
    assert _outcomes(h) == [("e", 1, "retry")]


def test_max_rate_copies_a_packs_events_back_alone_with_their_attempts() -> None:
    from chalicelib.core.resources.broker import MAX_RATE_ANNOTATION

    h = Harness()
    sender = ById({})
    c = h.container
    c.sender = sender  # type: ignore[misc]
    waits: list[float] = []
    c.delivery_parts = replace(  # type: ignore[misc]
        c.delivery_parts, rate_horizon=2.0, rate_hold=2.0, sleep=waits.append
    )
    h.broker()
    body = {
        "metadata": {"name": "a", "annotations": {MAX_RATE_ANNOTATION: "1"}},
        "spec": {"broker": "default", "subscriber": {"uri": "http://sub.example/"}},
    }
    c.triggers.put("ns", "a", body)
    ids = [f"e{i}" for i in range(10)]
    _put_pack(h, ids)
    assert len(h.queues.receive(h.queue_of("a"), 10, 0, 30)) == 1  # a receive that crashed
    h.make_visible("a")
    assert h.deliver_once("a").get("batchItemFailures", []) == []  # the second: attempt 2
    sent = sender.ids()
    assert len(sent) == 3  # one token in the bucket, two a second apart within the horizon
    copies = _queued(h, h.queue_of("a"))
    assert sorted(decode_message(m.body).event.id for m in copies) == sorted(  # type: ignore[union-attr]
        set(ids) - set(sent)
    )
    # never tried in that receive: the copy carries the attempts made before it (1)
    assert {tuple(m.message_attributes.items()) for m in copies} == {((ATTEMPTS_ATTRIBUTE, "1"),)}


class _Context:
    """A Lambda context with ``seconds`` left when the invocation starts."""

    def __init__(self, seconds: float) -> None:
        self.until = time.monotonic() + seconds

    def get_remaining_time_in_millis(self) -> int:
        return max(0, int((self.until - time.monotonic()) * 1000))


class _Slow(ById):
    def post(
        self, url: str, headers: Mapping[str, str], body: bytes, timeout: float
    ) -> HttpResponse:
        if headers.get("ce-id") == "slow":
            time.sleep(0.3)
        return super().post(url, headers, body, timeout)


def test_a_packs_events_that_could_outlast_the_invocation_go_back_untried() -> None:
    from chalicelib.services.delivery import PACK_SETTLE_SECONDS

    # One request in flight: the slow event's attempt ends before the others would start.
    one = replace(Settings(), cache_ttl_seconds=0.0, local_mode=True, delivery_in_flight=1)
    h = Harness(settings=one)
    sender = _Slow({})
    h.container.sender = sender  # type: ignore[misc]
    h.broker()
    h.trigger("a", delivery={"timeout": "PT1S"})
    _put_pack(h, ["slow", "b", "c"])
    queue = h.queue_of("a")
    event = h.sqs_event(queue)
    # time for the first attempt (1 s) and the settling, plus 0.2 s: not for any after the slow one
    answer = h.container.delivery.handle_sqs_event(event, _Context(PACK_SETTLE_SECONDS + 1.2))
    assert answer["batchItemFailures"] == []
    h.queues.delete_message(queue, event["Records"][0]["receiptHandle"])
    assert sender.ids() == ["slow"]
    assert _outcomes(h) == [("slow", 1, "delivered")]  # the others made no attempt
    back = _queued(h, queue)
    assert sorted(decode_message(m.body).event.id for m in back) == ["b", "c"]  # type: ignore[union-attr]
    assert all(m.message_attributes == {ATTEMPTS_ATTRIBUTE: "0"} for m in back)
    assert all(m.visible_at <= time.monotonic() for m in back)  # due at once
    h.deliver_once("a")  # with no limit (no context): delivered, as first attempts
    assert sorted(sender.ids()) == ["b", "c", "slow"]
    assert sorted(_outcomes(h))[:2] == [("b", 1, "delivered"), ("c", 1, "delivered")]


@pytest.mark.parametrize("packing", [False, True])
def test_a_replayed_event_reaches_the_subscriber_as_it_did_live(packing: bool) -> None:
    """One event a message (the default) or packs carrying the archived JSON, to a trigger with
    a filter and to one without: the subscriber gets the same request as live, but for
    ``replayname``."""
    h = Harness(settings=replace(Settings(), cache_ttl_seconds=0.0, replay_settle_seconds=0.0))
    sender = ById({})
    h.container.sender = sender  # type: ignore[misc]
    h.broker()
    h.trigger("all")
    h.trigger("some", filter={"type": "t"})
    start, _ = window()
    sent = [
        ({"content-type": "application/octet-stream"}, bytes(range(256))),
        ({"content-type": "application/json"}, b'{"a": [1, 2.5, "\\u00e9"], "b": null}'),
        ({"content-type": "text/plain; charset=utf-8", "ce-exttext": "x%20y"}, "é ☃".encode()),
        ({"ce-dataschema": "https://example.com/s", "ce-time": "2026-01-31T10:00:00Z"}, b""),
    ]
    for i, (extra, data) in enumerate(sent):
        headers = {"ce-specversion": "1.0", "ce-id": f"f{i}", "ce-source": "/s", "ce-type": "t"}
        assert h.post({**headers, **extra}, data).status == 202
    for trigger in ("all", "some"):
        assert h.deliver_once(trigger).get("batchItemFailures", []) == []
    live = list(sender.sent)
    flush_archive(h)
    _, end = window()
    for trigger in ("all", "some"):  # one replay each: a route with a filter decodes
        put_replay(h, trigger, start, end, triggers=[trigger], packing=packing)
        assert h.container.replay_runner.run("ns", "default", trigger, 10.0)
    for trigger in ("all", "some"):
        bodies = [m.body for m in _queued(h, h.queue_of(trigger))]
        assert len(bodies) == (1 if packing else len(sent))
        assert all(('"pack":[' in body) is packing for body in bodies)
        assert h.deliver_once(trigger).get("batchItemFailures", []) == []
    replayed = sender.sent[len(live) :]

    def request(s: SentRequest) -> tuple[str, bytes, dict[str, str]]:
        varying = {"traceparent", "tracestate", "ce-replayname"}
        return s.url, s.body, {k: v for k, v in s.headers.items() if k not in varying}

    assert len(replayed) == len(live) == 2 * len(sent)
    assert sorted(map(request, replayed), key=repr) == sorted(map(request, live), key=repr)
    assert sorted(s.headers["ce-replayname"] for s in replayed) == ["all"] * 4 + ["some"] * 4
