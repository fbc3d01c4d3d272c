"""IntegrationSinks (docs/targets.md) on in-memory fakes: the API through Chalice's test client
(validation, target_arn_patterns, status), triggers that name one by subscriber.ref or
deadLetterSink.ref (resolved, missing, readiness of the target), delivery to SQS, S3 and the log,
and the trigger status' audiences (Knative's subscriberAudience, deadLetterSinkAudience)."""

from __future__ import annotations

import base64
import json
import logging
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest
from chalice.test import Client

from app import app
from chalicelib.config import Settings
from chalicelib.container import use_container
from chalicelib.ports import HttpResponse
from tests.fakes.aws_targets import MemoryTargets
from tests.functional.harness import Harness, call
from tests.functional.test_delivery_audience import bearer, claims_of, with_signer

IS = "/apis/sinks.knative.dev/v1alpha1/namespaces/ns/integrationsinks"
QUEUE = "arn:aws:sqs:us-east-1:123456789012:orders"
BUCKET = "arn:aws:s3:::orders-archive"
OK = HttpResponse(202, {}, b"")


def sink_ref(name: str = "sink") -> dict[str, str]:
    return {"apiVersion": "sinks.knative.dev/v1alpha1", "kind": "IntegrationSink", "name": name}


def setup(settings: Settings | None = None) -> tuple[Harness, MemoryTargets]:
    h = Harness(OK, settings=settings)
    targets = MemoryTargets()
    h.container.aws_targets = targets  # type: ignore[misc]
    h.broker()
    return h, targets


def put_sink(h: Harness, spec: dict[str, Any], name: str = "sink") -> dict[str, Any]:
    doc, _ = h.container.integration_sinks.put(
        "ns", name, {"metadata": {"name": name}, "spec": spec}
    )
    return doc


def ref_trigger(h: Harness, name: str = "tr", **spec: Any) -> dict[str, Any]:
    body = {
        "metadata": {"name": name},
        "spec": {"broker": "default", "subscriber": {"ref": sink_ref()}, **spec},
    }
    doc, _ = h.container.triggers.put("ns", name, body)
    return doc


def conditions(doc: dict[str, Any]) -> dict[str, tuple[str, str | None]]:
    return {c["type"]: (c["status"], c.get("reason")) for c in doc["status"]["conditions"]}


@pytest.fixture
def api() -> Iterator[tuple[Harness, Client]]:
    h, _ = setup()
    use_container(h.container)
    with Client(app) as client:
        yield h, client
    use_container(None)


# ---- the kind ------------------------------------------------------------------------------------


def test_integration_sink_crud_and_its_address(api: tuple[Harness, Client]) -> None:
    h, client = api
    h.container.aws_targets.create(QUEUE)  # type: ignore[attr-defined]
    body = {
        "apiVersion": "sinks.knative.dev/v1alpha1",
        "kind": "IntegrationSink",
        "metadata": {"name": "sink"},
        "spec": {
            "aws": {
                "sqs": {"arn": QUEUE, "region": "us-east-1"},
                "auth": {"secret": {"ref": {"name": "aws-creds"}}},  # Knative's; not used here
            }
        },
    }
    r = call(client, "post", IS, body)
    assert r.status_code == 201, r.body
    doc = r.json_body
    assert doc["spec"] == body["spec"]
    assert doc["status"]["address"] == {"url": QUEUE}
    assert conditions(doc)["Ready"] == ("True", None)
    log = {"metadata": {"name": "sink"}, "spec": {"log": {"level": "WARN", "showHeaders": True}}}
    r = call(client, "put", f"{IS}/sink", log)
    assert r.status_code == 200 and r.json_body["metadata"]["generation"] == 2
    assert r.json_body["status"]["address"]["url"] == (
        "log:log-sink?level=WARN&showHeaders=true&showBody=true&multiline=false&logMask=false"
    )
    assert call(client, "get", IS).json_body["kind"] == "IntegrationSinkList"
    assert call(client, "delete", f"{IS}/sink").status_code == 200
    assert call(client, "get", f"{IS}/sink").status_code == 404


@pytest.mark.parametrize(
    ("spec", "field", "words"),
    [
        ({}, "spec", "exactly one sink"),
        ({"log": {}, "aws": {"sqs": {"arn": QUEUE, "region": "us-east-1"}}}, "spec", "exactly one"),
        ({"aws": {"sqs": {"arn": QUEUE}}}, "spec.aws.sqs.region", "is required"),
        ({"aws": {"sqs": {"arn": QUEUE, "region": "eu-west-1"}}}, "spec.aws.sqs.region", "ARN's"),
        ({"aws": {"sns": {"arn": QUEUE, "region": "us-east-1"}}}, "spec.aws.sns.arn", "not the"),
        ({"aws": {"s3": {"arn": "orders", "region": "us-east-1"}}}, "spec.aws.s3.arn", "ARN"),
        ({"aws": {"sqs": {"arn": QUEUE, "region": "us-east-1", "host": "x"}}},
         "spec.aws.sqs.host", "unknown"),
        ({"log": {"level": "LOUD"}}, "spec.log.level", "INFO"),
        ({"log": {"showHeaders": "yes"}}, "spec.log.showHeaders", "true or false"),
        ({"log": {"loggerName": "a b"}}, "spec.log.loggerName", "letters"),
        ({"log": {"showExchangePattern": True}}, "spec.log.showExchangePattern", "unknown"),
    ],
)  # fmt: skip
def test_an_invalid_sink_is_a_400_naming_the_field(
    api: tuple[Harness, Client], spec: dict[str, Any], field: str, words: str
) -> None:
    _, client = api
    r = call(client, "put", f"{IS}/sink", {"metadata": {"name": "sink"}, "spec": spec})
    assert r.status_code == 400, r.body
    assert r.headers["Content-Type"] == "application/problem+json"
    found = [e for e in r.json_body["errors"] if e["field"] == field]
    assert found and words in found[0]["message"], r.json_body["errors"]


def test_an_arn_outside_the_stage_patterns_is_a_400_naming_the_setting() -> None:
    settings = replace(
        Settings(), cache_ttl_seconds=0.0, local_mode=True, target_arn_patterns=("arn:aws:sqs:*",)
    )
    h, _ = setup(settings)
    with pytest.raises(Exception) as raised:
        put_sink(h, {"aws": {"s3": {"arn": BUCKET, "region": "us-east-1"}}})
    assert "target_arn_patterns" in str(raised.value.problems)  # type: ignore[attr-defined]
    put_sink(h, {"aws": {"sqs": {"arn": QUEUE, "region": "us-east-1"}}})


def test_a_sink_whose_target_is_missing_or_refuses_is_not_ready() -> None:
    h, targets = setup()
    targets.create(QUEUE)
    targets.denied.add(QUEUE)
    refused = put_sink(h, {"aws": {"sqs": {"arn": QUEUE, "region": "us-east-1"}}}, name="q")
    assert conditions(refused)["TargetReachable"] == ("False", "SubscriberNotAuthorized")
    doc = put_sink(h, {"aws": {"s3": {"arn": BUCKET, "region": "us-east-1"}}})
    assert conditions(doc)["TargetReachable"] == ("False", "SubscriberNotFound")
    assert conditions(doc)["Ready"][0] == "False"
    trigger = ref_trigger(h)  # the trigger says the same of its subscriber
    assert conditions(trigger)["SubscriberResolved"] == ("False", "SubscriberNotFound")
    assert trigger["status"]["subscriberUri"] == BUCKET


# ---- triggers that name one ----------------------------------------------------------------------


def test_a_trigger_is_not_ready_while_its_sink_is_missing_and_ready_once_it_exists() -> None:
    h, targets = setup()
    targets.create(QUEUE)
    doc = ref_trigger(h)
    assert conditions(doc)["SubscriberResolved"] == ("False", "IntegrationSinkNotFound")
    [ready] = [c for c in doc["status"]["conditions"] if c["type"] == "Ready"]
    assert ready["message"] == 'IntegrationSink "sink" does not exist in namespace "ns".'
    assert doc["spec"]["subscriber"] == {"ref": sink_ref()}
    assert h.send().status == 202
    assert h.queues.depth(h.queue_of("tr")) == 0  # not routed while unresolved
    put_sink(h, {"aws": {"sqs": {"arn": QUEUE, "region": "us-east-1"}}})
    doc = h.container.triggers.get("ns", "tr")
    assert conditions(doc)["SubscriberResolved"] == ("True", None)
    assert doc["status"]["subscriberUri"] == QUEUE
    h.send(id_="2")
    assert h.deliver_once("tr")["batchItemFailures"] == []
    [body] = targets.bodies(QUEUE)
    assert body["id"] == "2" and "knativebrokerttl" not in body


def test_a_sink_deleted_while_events_are_queued_dead_letters_them_with_the_reason() -> None:
    h, targets = setup()
    targets.create(QUEUE)
    put_sink(h, {"aws": {"sqs": {"arn": QUEUE, "region": "us-east-1"}}})
    ref_trigger(h, delivery={"retry": 0})
    h.send()
    h.container.integration_sinks.delete("ns", "sink")
    h.deliver_once("tr")
    assert targets.sent[QUEUE] == [] and h.sender.sent == []  # sent nowhere
    [dead] = h.messages(h.dlq_of("tr"))
    path = "/apis/sinks.knative.dev/v1alpha1/namespaces/ns/integrationsinks/sink"
    assert dead["event"]["knativeerrordest"] == path
    said = base64.b64decode(dead["event"]["knativeerrordata"]).decode()
    assert said == 'IntegrationSink "sink" does not exist'
    assert [r["outcome"] for r in h.archive.decoded() if r["kind"] == "delivery"] == [
        "dead_lettered"
    ]


def test_s3_sink_writes_one_object_per_event_and_a_retry_rewrites_it() -> None:
    h, targets = setup()
    targets.create(BUCKET)
    put_sink(h, {"aws": {"s3": {"arn": BUCKET, "region": "eu-west-1"}}})
    ref_trigger(h)
    targets.lost.add(BUCKET)  # the first attempt is written, but its answer is lost: retried
    h.send(id_="a")
    assert len(h.deliver_once("tr")["batchItemFailures"]) == 1
    h.make_visible("tr")
    h.send(id_="b")
    assert h.deliver_once("tr")["batchItemFailures"] == []
    keys = sorted(key for (arn, key) in targets.objects if arn == BUCKET)
    assert len(keys) == 2 and all(k.endswith(".json") for k in keys)
    assert sorted(d["id"] for d in targets.bodies(BUCKET)) == ["a", "b"]
    assert len(targets.sent[BUCKET]) == 3  # three PutObjects, two objects


def test_log_sink_writes_the_event_to_the_delivery_log(caplog: pytest.LogCaptureFixture) -> None:
    h, _ = setup()
    put_sink(h, {"log": {"loggerName": "orders", "level": "WARN", "showHeaders": True}})
    ref_trigger(h)
    h.send(data=b"hello log")
    with caplog.at_level(logging.DEBUG, logger="broker.integrationsink"):
        assert h.deliver_once("tr")["batchItemFailures"] == []
    [record] = [r for r in caplog.records if r.name == "broker.integrationsink"]
    assert record.levelno == logging.WARNING
    assert record.sink_logger == "orders" and record.data == "hello log"  # type: ignore[attr-defined]
    assert record.attributes["source"] == "/src"  # type: ignore[attr-defined]
    assert "event 1 of type t from /src" in record.getMessage()
    delivered = [r for r in h.archive.decoded() if r["kind"] == "delivery"]
    assert [r["outcome"] for r in delivered] == ["delivered"]


def test_dead_letter_sink_ref_delivers_dead_letters_to_the_sink() -> None:
    h, targets = setup()
    targets.create(QUEUE)
    dead = "arn:aws:sqs:us-east-1:123456789012:dead"
    targets.create(dead)
    targets.denied.add(QUEUE)  # the subscriber refuses: dead-lettered at once
    put_sink(h, {"aws": {"sqs": {"arn": dead, "region": "us-east-1"}}}, name="dls")
    body = {
        "metadata": {"name": "tr"},
        "spec": {
            "broker": "default",
            "subscriber": {"uri": QUEUE},
            "delivery": {"deadLetterSink": {"ref": sink_ref("dls")}, "retry": 0},
        },
    }
    doc, _ = h.container.triggers.put("ns", "tr", body)
    assert doc["spec"]["delivery"]["deadLetterSink"] == {"ref": sink_ref("dls")}
    assert doc["status"]["deadLetterSinkUri"] == dead
    assert conditions(doc)["DeadLetterSinkResolved"] == ("True", None)
    h.send()
    h.deliver_once("tr")
    assert h.deliver_once("tr", dead_letter=True)["batchItemFailures"] == []
    [letter] = targets.bodies(dead)
    assert letter["id"] == "1" and letter["knativeerrorcode"] == 403
    h.container.integration_sinks.delete("ns", "dls")
    doc = h.container.triggers.get("ns", "tr")
    assert conditions(doc)["DeadLetterSinkResolved"] == ("False", "IntegrationSinkNotFound")


def test_a_ref_to_another_kind_or_namespace_is_a_400() -> None:
    h, _ = setup()
    for ref, field in [
        ({"apiVersion": "v1", "kind": "Service", "name": "s"}, "spec.subscriber.ref"),
        ({**sink_ref(), "namespace": "other"}, "spec.subscriber.ref.namespace"),
    ]:
        body = {"metadata": {"name": "tr"}, "spec": {"subscriber": {"ref": ref}}}
        with pytest.raises(Exception) as raised:
            h.container.triggers.put("ns", "tr", body)
        fields = [p.field for p in raised.value.problems]  # type: ignore[attr-defined]
        assert field in fields


# ---- audiences in status -------------------------------------------------------------------------


def test_trigger_status_shows_its_audiences() -> None:
    h, _ = setup()
    doc = h.trigger(
        "tr",
        uri="https://sub.example/",
        delivery={"deadLetterSink": {"uri": "https://dead.example/", "audience": "dead-aud"}},
    )
    assert "subscriberAudience" not in doc["status"]
    body = {
        "metadata": {"name": "tr"},
        "spec": {
            "broker": "default",
            "subscriber": {"uri": "https://sub.example/", "audience": "sub-aud"},
            "delivery": {
                "deadLetterSink": {"uri": "https://dead.example/", "audience": "dead-aud"}
            },
        },
    }
    doc, _ = h.container.triggers.put("ns", "tr", body)
    assert doc["status"]["subscriberAudience"] == "sub-aud"
    assert doc["status"]["deadLetterSinkAudience"] == "dead-aud"
    dead = {"deadLetterSink": {"uri": "https://dead.example/", "audience": "broker-aud"}}
    assert h.broker(delivery=dead)["status"]["deadLetterSinkAudience"] == "broker-aud"


def test_an_event_transform_sink_takes_an_audience_and_delivery_carries_its_token() -> None:
    h, _ = setup()
    with_signer(h)
    sink = {"uri": "https://s.example/", "audience": "tx-aud"}
    body = {"metadata": {"name": "tx"}, "spec": {"jsonata": {"expression": "$"}, "sink": sink}}
    doc, _ = h.container.event_transforms.put("ns", "tx", body)
    assert doc["spec"]["sink"] == sink and doc["status"]["sinkAudience"] == "tx-aud"
    ref = {"apiVersion": "eventing.knative.dev/v1alpha1", "kind": "EventTransform", "name": "tx"}
    trigger = {"metadata": {"name": "tr"}, "spec": {"subscriber": {"ref": ref}}}
    h.container.triggers.put("ns", "tr", trigger)
    h.send()
    assert h.deliver_once("tr")["batchItemFailures"] == []
    [sent] = h.sender.sent
    assert sent.url == "https://s.example/"
    assert claims_of(h, bearer(sent.headers), "tx-aud")["sub"] == (
        "system:serviceaccount:ns:trigger-tr"
    )


def test_the_registry_names_the_sinks_a_trigger_refers_to() -> None:
    from chalicelib.core.registry.entities import trigger_definition

    h, _ = setup()
    body = {
        "metadata": {"name": "tr"},
        "spec": {
            "subscriber": {"ref": sink_ref()},
            "delivery": {"deadLetterSink": {"ref": sink_ref("dls")}},
        },
    }
    h.container.triggers.put("ns", "tr", body)
    trigger = h.container.control_plane.triggers.require("ns", "tr").resource
    found = json.dumps(trigger_definition(trigger, None, "http://api.example/").attributes)
    sinks = "http://api.example/apis/sinks.knative.dev/v1alpha1/namespaces/ns/integrationsinks"
    assert f'"{sinks}/sink"' in found and f'"deadlettersink": "{sinks}/dls"' in found
