"""EventTransforms (docs/transforms.md) on in-memory fakes: the API through Chalice's test client,
and delivery through a trigger whose subscriber refers to a transform, with a scripted sender."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from typing import Any

import pytest
from chalice.test import Client

from app import app
from chalicelib.container import use_container
from chalicelib.ports import HttpResponse
from tests.functional.harness import Harness, call

ET = "/apis/eventing.knative.dev/v1alpha1/namespaces"
REF = {"apiVersion": "eventing.knative.dev/v1alpha1", "kind": "EventTransform", "name": "tx"}
OK = HttpResponse(202, {}, b"")
EXPRESSION = '{"type": "order.summary", "data": {"who": data.user, "total": data.total * 2}}'


def transform(h: Harness, expression: str = EXPRESSION, **spec: Any) -> dict[str, Any]:
    body = {"metadata": {"name": "tx"}, "spec": {"jsonata": {"expression": expression}, **spec}}
    doc, _ = h.container.event_transforms.put("ns", "tx", body)
    return doc


def ref_trigger(h: Harness, name: str = "tr", **spec: Any) -> dict[str, Any]:
    body = {
        "metadata": {"name": name},
        "spec": {
            "broker": "default",
            "filter": {"attributes": {"type": "order"}},
            "subscriber": {"ref": REF},
            **spec,
        },
    }
    doc, _ = h.container.triggers.put("ns", name, body)
    return doc


def send_order(h: Harness, id_: str = "o1") -> None:
    answer = h.post(
        {
            "ce-specversion": "1.0",
            "ce-id": id_,
            "ce-source": "/shop",
            "ce-type": "order",
            "content-type": "application/json",
        },
        json.dumps({"user": "ana", "total": 21}).encode(),
    )
    assert answer.status == 202, answer.body


def conditions(doc: dict[str, Any]) -> dict[str, tuple[str, str | None]]:
    return {c["type"]: (c["status"], c.get("reason")) for c in doc["status"]["conditions"]}


# ---- the API -------------------------------------------------------------------------------------


@pytest.fixture
def api() -> Iterator[tuple[Harness, Client]]:
    h = Harness(OK)
    use_container(h.container)
    with Client(app) as client:
        yield h, client
    use_container(None)


def test_event_transform_crud(api: tuple[Harness, Client]) -> None:
    _, client = api
    body = {
        "apiVersion": "eventing.knative.dev/v1alpha1",
        "kind": "EventTransform",
        "metadata": {"name": "tx"},
        "spec": {"jsonata": {"expression": EXPRESSION}, "sink": {"uri": "http://sink.example/"}},
    }
    r = call(client, "post", f"{ET}/ns/eventtransforms", body)
    assert r.status_code == 201, r.body
    doc = r.json_body
    assert doc["kind"] == "EventTransform" and doc["metadata"]["generation"] == 1
    assert doc["status"]["address"]["url"].endswith(
        "/apis/eventing.knative.dev/v1alpha1/namespaces/ns/eventtransforms/tx"
    )
    assert doc["status"]["sinkUri"] == "http://sink.example/"
    assert conditions(doc)["Ready"] == ("True", None)
    listed = call(client, "get", f"{ET}/ns/eventtransforms").json_body
    assert listed["kind"] == "EventTransformList" and len(listed["items"]) == 1
    body["spec"]["jsonata"]["expression"] = "$"
    r = call(client, "put", f"{ET}/ns/eventtransforms/tx", body)
    assert r.status_code == 200 and r.json_body["metadata"]["generation"] == 2
    assert call(client, "delete", f"{ET}/ns/eventtransforms/tx").status_code == 200
    assert call(client, "get", f"{ET}/ns/eventtransforms/tx").status_code == 404


def test_an_invalid_expression_is_a_400_with_its_position(api: tuple[Harness, Client]) -> None:
    _, client = api
    body = {"metadata": {"name": "tx"}, "spec": {"jsonata": {"expression": '{"a": data.x + }'}}}
    r = call(client, "put", f"{ET}/ns/eventtransforms/tx", body)
    assert r.status_code == 400
    assert r.headers["Content-Type"] == "application/problem+json"
    [error] = r.json_body["errors"]
    assert error["field"] == "spec.jsonata.expression"
    assert "S0211 at position 16" in error["message"]


def test_a_trigger_is_not_ready_while_its_transform_is_missing(
    api: tuple[Harness, Client],
) -> None:
    h, client = api
    h.broker()
    doc = ref_trigger(h)
    assert conditions(doc)["SubscriberResolved"] == ("False", "TransformNotFound")
    assert conditions(doc)["Ready"][0] == "False"
    assert doc["spec"]["subscriber"] == {"ref": REF}
    send_order(h)  # no ready route: nothing is queued
    assert h.queues.depth(h.queue_of("tr")) == 0
    transform(h)
    doc = call(client, "get", "/apis/eventing.knative.dev/v1/namespaces/ns/triggers/tr").json_body
    assert conditions(doc)["SubscriberResolved"] == ("True", None)
    assert conditions(doc)["Ready"] == ("True", None)
    assert doc["status"]["subscriberUri"].endswith("/eventtransforms/tx")
    send_order(h)
    assert h.queues.depth(h.queue_of("tr")) == 1


def test_openapi_lists_the_kind(api: tuple[Harness, Client]) -> None:
    _, client = api
    spec = call(client, "get", "/apis/openapi.json").json_body
    assert f"{ET}/{{namespace}}/eventtransforms/{{name}}" in spec["paths"]
    assert "EventTransform" in spec["components"]["schemas"]


# ---- delivery ------------------------------------------------------------------------------------


def test_transformed_event_goes_to_the_sink() -> None:
    h = Harness(OK)
    h.broker()
    transform(h, sink={"uri": "http://sink.example/"})
    ref_trigger(h)
    send_order(h)
    assert h.deliver_once("tr")["batchItemFailures"] == []
    [sent] = h.sender.sent
    assert sent.url == "http://sink.example/"
    assert sent.headers["ce-type"] == "order.summary"
    assert sent.headers["ce-id"] == "o1" and sent.headers["ce-source"] == "/shop"  # merge rule
    assert json.loads(sent.body) == {"who": "ana", "total": 42}
    assert sent.headers["Prefer"] == "reply"
    assert [r["outcome"] for r in h.archive.decoded() if r["kind"] == "delivery"] == ["delivered"]


def test_a_failing_sink_is_retried_and_dead_letters_the_original() -> None:
    h = Harness(HttpResponse(503, {}, b"down"))
    h.broker()
    transform(h, sink={"uri": "http://sink.example/"})
    ref_trigger(h, delivery={"retry": 1})
    send_order(h)
    assert len(h.deliver_once("tr")["batchItemFailures"]) == 1  # a retry, as for any subscriber
    h.make_visible("tr")
    h.deliver_once("tr")
    [dead] = h.messages(h.dlq_of("tr"))
    assert dead["event"]["type"] == "order"  # the original, as the trigger got it
    assert dead["event"]["knativeerrorcode"] == 503
    assert dead["event"]["knativeerrordest"] == "http://sink.example/"


def test_without_a_sink_the_transformed_event_is_the_reply() -> None:
    h = Harness(OK)
    h.broker()
    transform(h)
    ref_trigger(h)
    h.trigger("summaries", filter={"type": "order.summary"})
    send_order(h)
    assert h.deliver_once("tr")["batchItemFailures"] == []
    assert h.sender.sent == []  # nothing is sent: the transform is the subscriber
    [queued] = h.messages(h.queue_of("summaries"))
    assert queued["event"]["type"] == "order.summary" and queued["event"]["id"] == "o1"
    assert queued["event"]["data"] == {"who": "ana", "total": 42}
    assert queued["event"]["knativebrokerttl"] == 254  # one reply hop
    assert [r["outcome"] for r in h.archive.decoded() if r["kind"] == "delivery"] == ["reply"]


def test_a_runtime_error_dead_letters_at_once_with_the_reason(
    caplog: pytest.LogCaptureFixture,
) -> None:
    h = Harness(OK)
    h.broker()
    transform(h, expression='$error("no total for " & data.user)')
    ref_trigger(h, delivery={"retry": 5})
    send_order(h)
    assert h.deliver_once("tr")["batchItemFailures"] == []  # moved, not retried
    assert h.sender.sent == []
    [dead] = h.messages(h.dlq_of("tr"))
    event = dead["event"]
    reason = base64.b64decode(event["knativeerrordata"]).decode()
    assert "the JSONata expression failed" in reason and "no total for ana" in reason
    assert event["knativeerrordest"].endswith("/eventtransforms/tx")
    assert event["type"] == "order"  # the original event
    outcomes = [r["outcome"] for r in h.archive.decoded() if r["kind"] == "delivery"]
    assert outcomes == ["dead_lettered"]
    [logged] = [r for r in caplog.records if r.getMessage().startswith("transform tx failed")]
    assert "no total for ana" in logged.getMessage() and logged.levelname == "WARNING"


def test_an_invalid_result_dead_letters_with_the_reason() -> None:
    h = Harness(OK)
    h.broker()
    transform(h, expression='{"specversion": "9.9"}', sink={"uri": "http://sink.example/"})
    ref_trigger(h)
    send_order(h)
    h.deliver_once("tr")
    assert h.sender.sent == []
    [dead] = h.messages(h.dlq_of("tr"))
    reason = base64.b64decode(dead["event"]["knativeerrordata"]).decode()
    assert "not a valid CloudEvent" in reason and "specversion" in reason


def reply_from_sink() -> HttpResponse:
    headers = {
        "ce-specversion": "1.0",
        "ce-id": "r1",
        "ce-source": "/sink",
        "ce-type": "sink.reply",
        "content-type": "application/json",
    }
    return HttpResponse(200, headers, b'{"ok": true}')


def test_the_sinks_reply_is_transformed_by_spec_reply() -> None:
    h = Harness(reply_from_sink())
    h.broker()
    transform(
        h,
        sink={"uri": "http://sink.example/"},
        reply={"jsonata": {"expression": '{"type": "reply.transformed", "data": data}'}},
    )
    ref_trigger(h)
    h.trigger("replies", filter={"type": "reply.transformed"})
    send_order(h)
    assert h.deliver_once("tr")["batchItemFailures"] == []
    [queued] = h.messages(h.queue_of("replies"))
    assert queued["event"]["id"] == "r1" and queued["event"]["source"] == "/sink"
    assert queued["event"]["data"] == {"ok": True}


def test_the_sinks_reply_is_dropped_with_discard() -> None:
    h = Harness(reply_from_sink())
    h.broker()
    transform(h, sink={"uri": "http://sink.example/"}, reply={"discard": True})
    ref_trigger(h)
    h.trigger("replies", filter={"type": "sink.reply"})
    send_order(h)
    assert h.deliver_once("tr")["batchItemFailures"] == []
    assert h.messages(h.queue_of("replies")) == []


def test_a_failing_reply_transform_dead_letters_with_the_reason() -> None:
    h = Harness(reply_from_sink())
    h.broker()
    transform(
        h,
        sink={"uri": "http://sink.example/"},
        reply={"jsonata": {"expression": '$error("bad reply")'}},
    )
    ref_trigger(h, delivery={"retry": 3})
    send_order(h)
    assert h.deliver_once("tr")["batchItemFailures"] == []
    [dead] = h.messages(h.dlq_of("tr"))
    assert "bad reply" in base64.b64decode(dead["event"]["knativeerrordata"]).decode()


def test_a_dead_letter_sink_gets_the_original_not_the_transformed_event() -> None:
    h = Harness(HttpResponse(400, {}, b"no"), OK)
    h.broker()
    transform(h, sink={"uri": "http://sink.example/"})
    ref_trigger(h, delivery={"retry": 0, "deadLetterSink": {"uri": "http://dls.example/"}})
    send_order(h)
    h.deliver_once("tr")
    h.deliver_once("tr", dead_letter=True)
    dls = h.sender.sent[-1]
    assert dls.url == "http://dls.example/" and dls.headers["ce-type"] == "order"


def test_changing_the_transform_changes_delivery() -> None:
    h = Harness(OK)
    h.broker()
    transform(h, sink={"uri": "http://sink.example/"})
    ref_trigger(h)
    transform(h, expression='{"type": "v2"}', sink={"uri": "http://sink.example/"})
    send_order(h)
    h.deliver_once("tr")
    assert h.sender.sent[-1].headers["ce-type"] == "v2"


def test_a_transform_deleted_while_events_wait_retries_then_dead_letters_why() -> None:
    h = Harness(OK)
    h.broker()
    transform(h)
    ref_trigger(h, delivery={"retry": 1})
    send_order(h)
    h.container.event_transforms.delete("ns", "tx")
    assert len(h.deliver_once("tr")["batchItemFailures"]) == 1  # retried: it may come back
    h.make_visible("tr")
    h.deliver_once("tr")
    [dead] = h.messages(h.dlq_of("tr"))
    reason = base64.b64decode(dead["event"]["knativeerrordata"]).decode()
    assert reason == 'EventTransform "tx" does not exist'
    assert dead["event"]["knativeerrordest"].endswith("/eventtransforms/tx")
    assert h.sender.sent == []
