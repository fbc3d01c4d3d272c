"""One event's transform failure never fails its batch neighbours (issue 31, item 3): it is that
event's attempt, dead-lettered with the reason (at once, or after the trigger's retries), and the
other events of the batch, or of the pack, are delivered.

The failing transform is real: JSONata's ``$fromMillis`` on a timestamp past the platform's
range raises the library's own ``OSError``, which is not an expression error the transform
module names; on the code before this test it escaped the read pass and failed its record (and
every event of its pack), unexpectedly, with no reason, until the queue's redrive moved it."""

from __future__ import annotations

import base64
import json
from typing import Any

from chalicelib.core.cloudevents.sqs_message import encode_pack, pack_head
from chalicelib.ports import HttpResponse, OutgoingMessage
from tests.functional.harness import Harness

OK = HttpResponse(202, {}, b"")
REF = {"apiVersion": "eventing.knative.dev/v1alpha1", "kind": "EventTransform", "name": "tx"}
# Fails for an event whose data.when is out of range (the platform's own error), not for others.
EXPRESSION = '{"type": "order.summary", "data": {"when": $fromMillis(data.when)}}'
BAD_WHEN = 10**20


def setup(retry: int) -> Harness:
    h = Harness(OK)
    h.broker()
    body = {
        "metadata": {"name": "tx"},
        "spec": {"jsonata": {"expression": EXPRESSION}, "sink": {"uri": "http://sink.example/"}},
    }
    h.container.event_transforms.put("ns", "tx", body)
    trigger = {
        "metadata": {"name": "tr"},
        "spec": {
            "broker": "default",
            "filter": {"attributes": {"type": "order"}},
            "subscriber": {"ref": REF},
            "delivery": {"retry": retry, "backoffDelay": "PT0S"},
        },
    }
    h.container.triggers.put("ns", "tr", trigger)
    return h


def send(h: Harness, id_: str, when: int) -> None:
    headers = {
        "ce-specversion": "1.0",
        "ce-id": id_,
        "ce-source": "/shop",
        "ce-type": "order",
        "content-type": "application/json",
    }
    assert h.post(headers, json.dumps({"when": when}).encode()).status == 202


def outcomes(h: Harness) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for r in h.archive.decoded():
        if r["kind"] == "delivery":
            found.setdefault(r["event_id"], []).append(r["outcome"])
    return found


def dead_letter(h: Harness) -> dict[str, Any]:
    [dead] = h.messages(h.dlq_of("tr"))
    event: dict[str, Any] = dead["event"]
    return event


def test_one_events_transform_failure_does_not_fail_its_batch_neighbours() -> None:
    h = setup(retry=0)
    send(h, "o1", 0)
    send(h, "bad", BAD_WHEN)
    send(h, "o3", 1000)
    answer = h.deliver_once("tr")
    assert answer["received"] == 3 and answer["batchItemFailures"] == []
    assert sorted(s.headers["ce-id"] for s in h.sender.sent) == ["o1", "o3"]
    assert outcomes(h) == {"o1": ["delivered"], "bad": ["dead_lettered"], "o3": ["delivered"]}
    event = dead_letter(h)
    assert event["id"] == "bad" and event["type"] == "order"  # the original event
    assert event["knativeerrordest"].endswith("/eventtransforms/tx")
    assert base64.b64decode(event["knativeerrordata"])  # the reason it failed
    assert h.queues.depth(h.queue_of("tr")) == 0


def test_a_transform_failure_is_an_attempt_the_trigger_retries_then_dead_letters() -> None:
    h = setup(retry=1)
    send(h, "o1", 0)
    send(h, "bad", BAD_WHEN)
    first = h.deliver_once("tr")
    # Retried per the trigger's policy when the failure is not the expression's own (here the
    # platform's error), dead-lettered at once when it is (an error the transform names):
    # either way an attempt with its reason, never an unexpected failure of the record.
    if first["batchItemFailures"]:
        assert outcomes(h)["bad"] == ["retry"]
        h.make_visible("tr")
        assert h.deliver_once("tr")["batchItemFailures"] == []
    assert outcomes(h)["bad"][-1] == "dead_lettered" and outcomes(h)["o1"] == ["delivered"]
    assert base64.b64decode(dead_letter(h)["knativeerrordata"])
    assert h.queues.depth(h.queue_of("tr")) == 0


def test_one_events_transform_failure_does_not_fail_the_rest_of_its_pack() -> None:
    h = setup(retry=0)
    for id_, when in (("o1", 0), ("bad", BAD_WHEN), ("o3", 1000)):
        send(h, id_, when)
    queue = h.queue_of("tr")
    singles = h.messages(queue)
    h.queues.purge(queue)
    head = pack_head("ns", "default", "tr", {})
    pack = encode_pack(head, [json.dumps(m["event"], separators=(",", ":")) for m in singles])
    assert not h.queues.send_batch(queue, [OutgoingMessage("0", pack)])
    answer = h.deliver_once("tr")
    assert answer["received"] == 1 and answer["batchItemFailures"] == []
    assert sorted(s.headers["ce-id"] for s in h.sender.sent) == ["o1", "o3"]
    assert outcomes(h) == {"o1": ["delivered"], "bad": ["dead_lettered"], "o3": ["delivered"]}
    assert dead_letter(h)["id"] == "bad"
    assert h.queues.depth(queue) == 0
