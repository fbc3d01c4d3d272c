"""IntegrationSource through Chalice's test client on in-memory fakes (docs/sources.md): every
problem of a bad body named, a timer's schedule (a seconds rate in local mode, refused on a
deployed stage unless whole minutes), its firing as Knative's timer event with the source's
sender identity, its status, removal and the reconciler's repair; and the ``sources`` function
end to end: an SQS batch with a bad record reaches the trigger but that record, named alone."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pytest
from chalice.test import Client

from app import app, pings, reconciler, sources
from brokerctl.dev import scheduled_event
from chalicelib.config import Settings
from chalicelib.container import use_container
from chalicelib.core.schedules import scheduled_input
from chalicelib.ports import HttpResponse
from tests.functional.harness import Harness, call

IS = "/apis/sources.knative.dev/v1alpha1/namespaces/ns/integrationsources"
DUE = datetime(2026, 11, 28, 22, 0, tzinfo=UTC)
BROKER_REF = {"ref": {"apiVersion": "eventing.knative.dev/v1", "kind": "Broker", "name": "default"}}
QUEUE = "arn:aws:sqs:us-east-1:123456789012:orders"
TIMER_TYPE = "dev.knative.connector.event.timer"


def body(name: str = "tick", **spec: Any) -> dict[str, Any]:
    spec = spec or {"timer": {"period": 2000, "message": "hello", "contentType": "text/plain"}}
    return {
        "apiVersion": "sources.knative.dev/v1alpha1",
        "kind": "IntegrationSource",
        "metadata": {"name": name},
        "spec": {"sink": BROKER_REF, **spec},
    }


def conditions(doc: dict[str, Any]) -> dict[str, dict[str, str]]:
    return {c["type"]: c for c in doc["status"]["conditions"]}


def the_schedule(h: Harness) -> Any:
    (deployed,) = h.schedules.schedules.values()
    return deployed


def test_a_timer_is_a_seconds_schedule_locally_and_ready(h: Harness, client: Client) -> None:
    h.broker()
    r = call(client, "put", f"{IS}/tick", body())
    assert r.status_code == 201, r.body
    doc = json.loads(r.body)
    assert conditions(doc)["Ready"]["status"] == "True"
    assert doc["status"]["sinkUri"] == "http://127.0.0.1:8080/ns/default"
    assert doc["status"]["ceAttributes"] == [
        {"type": TIMER_TYPE, "source": "dev.knative.eventing.timer-source"}
    ]
    deployed = the_schedule(h)
    assert deployed.expression == "rate(2 seconds)"
    assert deployed.name.startswith(h.settings.queue_prefix + "integrationsource-ns-tick-")
    listed = json.loads(call(client, "get", IS).body)
    assert listed["kind"] == "IntegrationSourceList" and len(listed["items"]) == 1


def test_the_fired_timer_reaches_a_trigger_as_knatives_timer_event(
    h: Harness, client: Client
) -> None:
    h.broker()
    h.trigger("display", filter={"type": TIMER_TYPE})
    assert call(client, "put", f"{IS}/tick", body()).status_code == 201
    answer = pings(scheduled_input(the_schedule(h).input, DUE), None)
    assert answer["sent"] is True
    h.deliver_once("display")
    (sent,) = h.sender.sent
    assert sent.headers["ce-type"] == TIMER_TYPE
    assert sent.headers["ce-source"] == "dev.knative.eventing.timer-source"
    assert sent.headers["ce-subject"] == "timer-source"
    assert sent.headers["ce-time"] == "2026-11-28T22:00:00Z"
    assert sent.headers["content-type"] == "text/plain"
    assert sent.body == b"hello"


def test_a_policy_that_admits_only_another_source_refuses_the_timer(
    h: Harness, client: Client
) -> None:
    """The firing carries the source's identity: an EventPolicy naming another source refuses
    it, as docs/security.md says, and the firing says why."""
    h.broker()
    policy = {
        "metadata": {"name": "only-other"},
        "spec": {
            "to": [
                {
                    "ref": {
                        "apiVersion": "eventing.knative.dev/v1",
                        "kind": "Broker",
                        "name": "default",
                    }
                }
            ],
            "from": [{"sub": "source:ns:IntegrationSource:other"}],
        },
    }
    ep = "/apis/eventing.knative.dev/v1alpha1/namespaces/ns/eventpolicies"
    r = call(client, "post", ep, policy)
    assert r.status_code == 201, r.body
    assert call(client, "put", f"{IS}/tick", body()).status_code == 201
    answer = pings(scheduled_input(the_schedule(h).input, DUE), None)
    assert answer["sent"] is False and "Forbidden" in answer["reason"]


def test_every_problem_is_named(h: Harness, client: Client) -> None:
    bad = body(
        timer={"period": 1500, "message": 7, "contentType": "not a type", "x": 1},
        aws={"sqs": {"arn": "arn:aws:sqs:nowhere"}, "auth": {}},
        sink={"ref": {"kind": "Service", "name": "svc"}},
    )
    r = call(client, "put", f"{IS}/tick", bad)
    assert r.status_code == 400, r.body
    errors = {e["field"]: e["message"] for e in json.loads(r.body)["errors"]}
    assert "whole seconds" in errors["spec.timer.period"]
    assert "string" in errors["spec.timer.message"]
    assert "media type" in errors["spec.timer.contentType"]
    assert "spec.timer.x" in errors
    assert "queue ARN" in errors["spec.aws.sqs.arn"]
    assert "BROKER_SOURCE_ARN_PATTERNS" in errors["spec.aws.auth"]
    assert "not both" in errors["spec"]
    assert "Broker" in errors["spec.sink.ref.kind"]
    assert h.schedules.schedules == {}


@pytest.mark.parametrize(
    ("spec", "field", "words"),
    [
        ({}, "spec", "needs one of timer"),
        ({"timer": {"period": True, "message": ""}}, "spec.timer.period", "milliseconds"),
        ({"timer": {"period": 999, "message": ""}}, "spec.timer.period", "1000"),
        ({"aws": {"sqs": {"arn": QUEUE}, "s3": {"arn": "arn:aws:s3:::b"}}}, "spec.aws", "one"),
        ({"aws": {"s3": {"arn": "arn:aws:s3:::Bad_Bucket"}}}, "spec.aws.s3.arn", "bucket"),
        ({"aws": {"ddbStreams": {"table": "t"}}}, "spec.aws.ddbStreams.table", "table name"),
        ({"aws": {"sqs": {"arn": QUEUE, "region": "eu-west-1"}}}, "spec.aws.sqs.region", "ARN"),
        ({"aws": {"sqs": {"arn": QUEUE, "region": "mars"}}}, "spec.aws.sqs.region", "region"),
    ],
)
def test_refusals(h: Harness, client: Client, spec: dict[str, Any], field: str, words: str) -> None:
    doc = body(**spec) if spec else body() | {"spec": {"sink": BROKER_REF}}
    r = call(client, "put", f"{IS}/tick", doc)
    assert r.status_code == 400, r.body
    errors = {e["field"]: e["message"] for e in json.loads(r.body)["errors"]}
    assert words in errors[field]


def test_a_deployed_stage_refuses_a_period_scheduler_cannot_run() -> None:
    settings = replace(Settings(), cache_ttl_seconds=0.0, local_mode=False)
    h = Harness(HttpResponse(202, {}, b""), settings=settings)
    use_container(h.container)
    try:
        with Client(app) as client:
            h.broker()
            r = call(client, "put", f"{IS}/tick", body())
            assert r.status_code == 400, r.body
            (error,) = json.loads(r.body)["errors"]
            assert error["field"] == "spec.timer.period"
            assert "whole minutes" in error["message"]
            assert h.schedules.schedules == {}
            minute = body(timer={"period": 120_000, "message": "m"})
            assert call(client, "put", f"{IS}/tick", minute).status_code == 201
            assert the_schedule(h).expression == "rate(2 minutes)"
    finally:
        use_container(None)


def test_a_delete_removes_the_schedule(h: Harness, client: Client) -> None:
    h.broker()
    assert call(client, "put", f"{IS}/tick", body()).status_code == 201
    assert len(h.schedules.schedules) == 1
    assert call(client, "delete", f"{IS}/tick").status_code == 200
    assert h.schedules.schedules == {}


def test_the_reconciler_repairs_a_missing_schedule(h: Harness, client: Client) -> None:
    h.broker()
    call(client, "put", f"{IS}/tick", body())
    name = the_schedule(h).name
    h.schedules.schedules.clear()
    reconciler(scheduled_event("us-east-1"), None)
    assert list(h.schedules.schedules) == [name]
    doc = json.loads(call(client, "get", f"{IS}/tick").body)
    assert conditions(doc)["Ready"]["status"] == "True"


def test_a_missing_broker_is_not_ready(h: Harness, client: Client) -> None:
    r = call(client, "put", f"{IS}/tick", body())
    assert r.status_code == 201
    sink = conditions(json.loads(r.body))["SinkProvided"]
    assert sink["status"] == "False" and "does not exist" in sink["message"]


def test_a_seconds_rate_reads_back_for_the_local_runtime_and_scheduler_refuses_it() -> None:
    from chalicelib.core.cron import Rate, from_scheduler

    assert Rate(2).scheduler(seconds=True) == ("rate(2 seconds)", "UTC")
    assert from_scheduler("rate(2 seconds)", "UTC") == Rate(2)
    assert Rate(120).scheduler(seconds=True) == ("rate(2 minutes)", "UTC")
    with pytest.raises(ValueError, match="whole minutes"):
        Rate(2).scheduler()


def test_the_sources_function_sends_the_good_records_and_names_the_bad_one(
    h: Harness, client: Client
) -> None:
    """Through app.sources and the container: the source's queue is missing here (its plumbing
    a fake: no AWS call), but records handed over still reach its broker's trigger."""
    from tests.fuzz.test_integrationsource_fuzz import MissingEverything

    h.container.integration_source_hooks._plumbing = MissingEverything()
    h.broker()
    h.trigger("display", filter={"type": "dev.knative.connector.event.aws-sqs"})
    r = call(client, "put", f"{IS}/orders", body("orders", aws={"sqs": {"arn": QUEUE}}))
    assert r.status_code == 201, r.body
    assert conditions(json.loads(r.body))["Ready"]["reason"] == "QueueDoesNotExist"
    good = {
        "messageId": "m-1",
        "body": '{"order": 7}',
        "attributes": {"SentTimestamp": "1545082649183"},
        "eventSource": "aws:sqs",
        "eventSourceARN": QUEUE,
    }
    bad = good | {"messageId": "m-2", "body": None}
    answer = sources({"Records": [good, bad]}, None)
    assert answer == {"batchItemFailures": [{"itemIdentifier": "m-2"}]}
    h.deliver_once("display")
    (sent,) = h.sender.sent
    assert sent.headers["ce-id"] == "m-1"
    assert sent.headers["ce-source"] == "dev.knative.eventing.aws-sqs-source"
    assert json.loads(sent.body) == {"order": 7}
