"""Ingress behaviour (design.md §2.1) on in-memory fakes."""

from __future__ import annotations

import json

import pytest

from chalicelib.core.errors import NotFoundError, ValidationError
from chalicelib.services.ingress import Accepted
from tests.functional.harness import Harness

BINARY = {
    "ce-specversion": "1.0",
    "ce-id": "1",
    "ce-source": "/src",
    "ce-type": "t",
    "content-type": "text/plain",
}


@pytest.fixture
def h() -> Harness:
    h = Harness()
    h.broker()
    h.trigger("match", filter={"type": "t"})
    h.trigger("other", filter={"type": "nope"})
    return h


def test_accepted_event_is_in_every_matching_queue_before_202(h: Harness) -> None:
    h.trigger("all")  # empty filter matches everything
    r = h.post(BINARY, b"hello")
    assert r.status == 202 and r.body == b""
    assert len(h.messages(h.queue_of("match"))) == 1
    assert len(h.messages(h.queue_of("all"))) == 1
    assert h.messages(h.queue_of("other")) == []
    event = h.messages(h.queue_of("match"))[0]["event"]
    assert event["id"] == "1" and event["knativebrokerttl"] == 255
    assert event["knativearrivaltime"].endswith("Z")
    kinds = [r["kind"] for r in h.archive.decoded()]
    assert kinds == ["accepted"]
    assert h.archive.decoded()[0]["triggers"] == ["all", "match"] or set(
        h.archive.decoded()[0]["triggers"]
    ) == {"all", "match"}


def test_invalid_event_is_400_with_every_problem_and_nothing_stored(h: Harness) -> None:
    r = h.post({"ce-specversion": "1.0", "ce-time": "yesterday"}, b"x")
    assert r.status == 400
    doc = json.loads(r.body)
    assert r.headers["Content-Type"] == "application/problem+json"
    fields = {e["field"] for e in doc["errors"]}
    assert {"ce-id", "ce-source", "ce-type", "ce-time"} <= fields
    assert h.messages(h.queue_of("match")) == []
    assert h.archive.decoded()[-1]["kind"] == "rejected"
    assert h.archive.decoded()[-1]["reason"] == "invalid_event"


def test_unknown_broker_is_404_but_malformed_is_400_first(h: Harness) -> None:
    assert h.post(BINARY, b"x", broker="missing").status == 404
    assert h.post({"content-type": "text/plain"}, b"x", broker="missing").status == 400


def test_methods_and_options(h: Harness) -> None:
    r = h.request("GET", {}, b"")
    assert r.status == 405 and r.headers["Allow"] == "POST, OPTIONS"
    r = h.request("OPTIONS", {}, b"")
    assert r.status == 200
    assert r.headers["WebHook-Allowed-Origin"] == "*"
    assert r.headers["WebHook-Allowed-Rate"] == "*"


def test_the_service_answers_in_domain_terms(h: Harness) -> None:
    batch = [{"specversion": "1.0", "id": i, "source": "/s", "type": "t"} for i in ("a", "b")]
    headers = {"content-type": "application/cloudevents-batch+json"}
    accepted = h.container.ingress.accept("ns", "default", headers, json.dumps(batch).encode())
    assert accepted == Accepted(("a", "b"))
    with pytest.raises(NotFoundError):
        h.container.ingress.accept("ns", "missing", BINARY, b"x")
    with pytest.raises(ValidationError):
        h.container.ingress.accept("ns", "default", {}, b"x")
    records = [(r["kind"], r.get("reason")) for r in h.archive.decoded()]
    assert records == [
        ("accepted", None),
        ("accepted", None),
        ("rejected", "unknown_broker"),
        ("rejected", "invalid_event"),
    ]


def test_refusals_at_the_http_layer_are_archived_and_answered(h: Harness) -> None:
    r = h.request("DELETE", {}, b"")
    assert r.status == 405 and json.loads(r.body)["status"] == 405
    assert h.archive.decoded()[-1]["reason"] == "method_not_allowed"
    h.broker(annotations={"serverless-broker/ingress-auth": "token"})
    r = h.post(BINARY, b"x")
    assert r.status == 401 and r.headers["WWW-Authenticate"] == 'Bearer realm="broker"'
    assert r.headers["Allow"] == "POST, OPTIONS"


def test_bad_path_is_400(h: Harness) -> None:
    assert h.post(BINARY, b"x", ns="Bad_NS").status == 400


def test_too_large_is_413_before_anything_is_stored() -> None:
    h = Harness()
    h.broker(annotations={"serverless-broker/max-event-bytes": "1000"})
    h.trigger("all")
    r = h.post(BINARY, b"x" * 1001)
    assert r.status == 413
    assert h.messages(h.queue_of("all")) == []
    assert h.post(BINARY, b"x" * 900).status == 202


def test_batch_is_all_or_nothing(h: Harness) -> None:
    good = {"specversion": "1.0", "id": "a", "source": "/s", "type": "t"}
    bad = {"specversion": "1.0", "id": "", "source": "/s", "type": "t"}
    headers = {"content-type": "application/cloudevents-batch+json"}
    r = h.post(headers, json.dumps([good, bad]).encode())
    assert r.status == 400
    assert h.messages(h.queue_of("match")) == []
    r = h.post(headers, json.dumps([good, {**good, "id": "b"}]).encode())
    assert r.status == 202
    assert [m["event"]["id"] for m in h.messages(h.queue_of("match"))] == ["a", "b"]


def test_fan_out_uses_at_most_ceil_n_over_10_sends_per_trigger(h: Harness) -> None:
    events = [{"specversion": "1.0", "id": str(i), "source": "/s", "type": "t"} for i in range(25)]
    before = h.queues.send_calls
    r = h.post({"content-type": "application/cloudevents-batch+json"}, json.dumps(events).encode())
    assert r.status == 202
    assert h.queues.send_calls - before == 3
    assert len(h.messages(h.queue_of("match"))) == 25


def test_failed_entries_are_retried_and_persistent_failure_is_503(h: Harness) -> None:
    h.queues.fail_next_sends = 2
    assert h.send(id_="retried").status == 202
    assert [m["event"]["id"] for m in h.messages(h.queue_of("match"))] == ["retried"]
    h.queues.fail_next_sends = 100
    r = h.send(id_="lost")
    assert r.status == 503
    assert json.loads(r.body)["status"] == 503


def test_ttl_loop_guard(h: Harness) -> None:
    assert h.send(knativebrokerttl="1").status == 400
    assert h.send(knativebrokerttl="2").status == 202
    assert h.messages(h.queue_of("match"))[-1]["event"]["knativebrokerttl"] == 1


def test_large_event_goes_through_a_claim_check(h: Harness) -> None:
    data = bytes(range(256)) * 1200  # 300 KiB > SQS's 256 KiB
    assert h.send(data=data).status == 202
    message = h.messages(h.queue_of("match"))[0]
    assert "event" not in message and message["claim"]["size"] > len(data)
    # One claim for the queues, and the archive's own copy, kept as long as the archive
    # (docs/replay.md).
    buckets = sorted(bucket for bucket, _ in h.blobs.objects)
    assert buckets == sorted([h.settings.claim_bucket, h.settings.archive_bucket])


def test_passthrough_headers_are_queued(h: Harness) -> None:
    headers = {
        **BINARY,
        "knative-foo": "bar",
        "x-request-id": "r1",
        "foo": "dropped",
        "traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
    }
    assert h.post(headers, b"x").status == 202
    queued = h.messages(h.queue_of("match"))[0]["headers"]
    assert queued["knative-foo"] == "bar" and queued["x-request-id"] == "r1"
    assert "foo" not in queued and queued["traceparent"].startswith("00-0af7")


def test_token_auth() -> None:
    h = Harness()
    h.broker(annotations={"serverless-broker/ingress-auth": "token"})
    h.trigger("all")
    token = h.container.tokens.create("ns", "default")["token"]
    assert h.send().status == 401
    assert h.post({**BINARY, "authorization": "Bearer wrong"}, b"x").status == 401
    assert h.messages(h.queue_of("all")) == []
    assert h.post({**BINARY, "authorization": f"Bearer {token}"}, b"x").status == 202
    stored = [t.doc for t in h.store.list("token", "ns")]
    assert token not in json.dumps(stored)  # only the salted hash is stored


def test_legacy_versions_need_the_annotation() -> None:
    h = Harness()
    h.broker()
    h.trigger("all")
    legacy = {"specversion": "0.1", "id": "1", "source": "/s", "type": "t"}
    headers = {"content-type": "application/cloudevents+json"}
    assert h.post(headers, json.dumps(legacy).encode()).status == 400
    h.broker(annotations={"serverless-broker/legacy-spec-versions": "true"})
    assert h.post(headers, json.dumps(legacy).encode()).status == 202


def test_metrics_count_every_request(h: Harness) -> None:
    h.send()
    h.post({}, b"garbage")
    text = h.container.metrics.prometheus_text()
    assert (
        'broker_event_count_total{broker="default",namespace="ns",response_code_class="2xx"} 1'
        in text
    )
    assert 'response_code_class="4xx"} 1' in text


def test_number_that_overflows_a_double_is_400_and_nothing_stored(h: Harness) -> None:
    body = b'{"specversion":"1.0","id":"1","source":"/s","type":"t","data":{"a":1e400}}'
    r = h.post({"content-type": "application/cloudevents+json"}, body)
    assert r.status == 400
    assert json.loads(r.body)["errors"][0]["field"] == "data"
    assert h.messages(h.queue_of("match")) == []
    assert h.archive.decoded()[-1]["kind"] == "rejected"
