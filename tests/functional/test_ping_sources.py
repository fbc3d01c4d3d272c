"""PingSource through Chalice's test client on in-memory fakes (docs/sources.md): validation with
every problem and the reason Scheduler cannot run a schedule, the schedule it provisions (and
replaces, and removes), its status, the reconciler's repair, and the firing path of the ``pings``
function to a broker's trigger and to a uri, with Knative's attributes."""

from __future__ import annotations

import base64
import json
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pytest
from chalice.test import Client

from app import pings, reconciler
from brokerctl.dev import scheduled_event
from chalicelib.core.schedules import scheduled_input
from chalicelib.ports import HttpResponse
from tests.functional.harness import Harness, call

PS = "/apis/sources.knative.dev/v1/namespaces/ns/pingsources"
DUE = datetime(2026, 11, 28, 22, 0, tzinfo=UTC)
BROKER_REF = {"ref": {"apiVersion": "eventing.knative.dev/v1", "kind": "Broker", "name": "default"}}


def body(name: str = "hello", **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "sources.knative.dev/v1",
        "kind": "PingSource",
        "metadata": {"name": name},
        "spec": {"schedule": "*/2 * * * *", "sink": BROKER_REF, **spec},
    }


def conditions(doc: dict[str, Any]) -> dict[str, dict[str, str]]:
    return {c["type"]: c for c in doc["status"]["conditions"]}


def the_schedule(h: Harness) -> Any:
    (deployed,) = h.schedules.schedules.values()
    return deployed


def fire(h: Harness, due: datetime = DUE) -> dict[str, Any]:
    """What Scheduler does when the schedule is due: invoke ``pings`` with its input."""
    return pings(scheduled_input(the_schedule(h).input, due), None)


def test_a_ping_source_is_scheduled_and_ready(h: Harness, client: Client) -> None:
    h.broker()
    r = call(client, "put", f"{PS}/hello", body(timezone="Europe/Paris"))
    assert r.status_code == 201, r.body
    doc = json.loads(r.body)
    assert conditions(doc)["Ready"]["status"] == "True"
    assert doc["status"]["sinkUri"] == "http://127.0.0.1:8080/ns/default"
    assert doc["status"]["ceAttributes"] == [
        {"type": "dev.knative.sources.ping", "source": "/apis/v1/namespaces/ns/pingsources/hello"}
    ]
    deployed = the_schedule(h)
    assert (deployed.expression, deployed.timezone) == ("cron(0/2 * * * ? *)", "Europe/Paris")
    assert deployed.name.startswith(h.settings.queue_prefix + "pingsource-ns-hello-")
    listed = json.loads(call(client, "get", PS).body)
    assert listed["kind"] == "PingSourceList" and len(listed["items"]) == 1


def test_every_problem_is_said_with_the_reason(h: Harness, client: Client) -> None:
    bad = body(
        schedule="0 9 1 * MON",
        timezone="Mars/Olympus",
        data="x",
        dataBase64="eA==",
        contentType="not a type",
        sink={"ref": {"kind": "Service", "name": "svc"}},
    )
    r = call(client, "put", f"{PS}/hello", bad)
    assert r.status_code == 400
    errors = {e["field"]: e["message"] for e in json.loads(r.body)["errors"]}
    assert "day of month and the day of week" in errors["spec.schedule"]
    assert "Scheduler cannot express" in errors["spec.schedule"]
    assert "not an IANA time zone" in errors["spec.timezone"]
    assert errors["spec"] == "set data or dataBase64, not both"
    assert "media type" in errors["spec.contentType"]
    assert "Broker" in errors["spec.sink.ref.kind"]
    assert h.schedules.schedules == {}


@pytest.mark.parametrize(
    ("spec", "field", "words"),
    [
        ({"schedule": "*/10 * * * * *"}, "spec.schedule", "seconds field"),
        ({"schedule": "@every 1m"}, "spec.schedule", "@every"),
        ({"schedule": "0 25 * * *"}, "spec.schedule", "outside 0-23"),
        ({"schedule": "CRON_TZ=UTC * * * * *", "timezone": "UTC"}, "spec.schedule", "set one"),
        ({"contentType": "application/json", "data": "[1]"}, "spec.data", "JSON object"),
        ({"dataBase64": "not base64!"}, "spec.dataBase64", "base64"),
        ({"data": "x" * 65_537}, "spec.data", "over 65536"),
        ({"ceOverrides": {"extensions": {"type": "x"}}}, "spec.ceOverrides.extensions.type", ""),
        ({"sink": {"uri": "ftp://example.com/"}}, "spec.sink.uri", "http"),
        ({"schedule": 0}, "spec.schedule", "cron schedule"),
        ({"data": False}, "spec.data", "string"),
    ],
)
def test_refusals(h: Harness, client: Client, spec: dict[str, Any], field: str, words: str) -> None:
    r = call(client, "put", f"{PS}/hello", body(**spec))
    assert r.status_code == 400, r.body
    errors = {e["field"]: e["message"] for e in json.loads(r.body)["errors"]}
    assert words in errors[field]


def test_the_fired_event_reaches_a_trigger_with_knatives_attributes(
    h: Harness, client: Client
) -> None:
    h.broker()
    h.trigger("display", filter={"type": "dev.knative.sources.ping"})
    spec = {"contentType": "application/json", "data": '{"message": "Hello world!"}'}
    spec["ceOverrides"] = {"extensions": {"team": "blue"}}
    assert call(client, "put", f"{PS}/hello", body(**spec)).status_code == 201
    answer = fire(h)
    assert answer["sent"] is True
    h.deliver_once("display")
    (sent,) = h.sender.sent
    headers = sent.headers
    assert headers["ce-type"] == "dev.knative.sources.ping"
    assert headers["ce-source"] == "/apis/v1/namespaces/ns/pingsources/hello"
    assert headers["ce-id"] == answer["id"] and len(answer["id"]) == 36
    assert headers["ce-time"] == "2026-11-28T22:00:00Z"
    assert headers["ce-specversion"] == "1.0" and headers["ce-team"] == "blue"
    assert headers["content-type"] == "application/json"
    assert json.loads(sent.body) == {"message": "Hello world!"}
    again = fire(h)
    assert again["id"] != answer["id"]  # a fresh id each time


def test_data_base64_arrives_byte_for_byte(h: Harness, client: Client) -> None:
    h.broker()
    h.trigger("display")
    payload = bytes(range(256))
    spec = {"dataBase64": base64.b64encode(payload).decode(), "contentType": "application/x-raw"}
    assert call(client, "put", f"{PS}/hello", body(**spec)).status_code == 201
    assert fire(h)["sent"] is True
    h.deliver_once("display")
    (sent,) = h.sender.sent
    assert sent.body == payload and sent.headers["content-type"] == "application/x-raw"


def test_a_uri_sink_is_posted_in_binary_mode(h: Harness, client: Client) -> None:
    spec = {"sink": {"uri": "http://display.example/ping"}, "data": "plain"}
    r = call(client, "put", f"{PS}/hello", body(**spec))
    assert r.status_code == 201
    doc = json.loads(r.body)
    assert doc["status"]["sinkUri"] == "http://display.example/ping"
    assert conditions(doc)["Ready"]["status"] == "True"
    assert fire(h)["sent"] is True
    (sent,) = h.sender.sent
    assert sent.url == "http://display.example/ping"
    assert sent.headers["ce-type"] == "dev.knative.sources.ping" and sent.body == b"plain"
    assert "content-type" not in sent.headers  # Knative sets none without contentType


def test_a_uri_sink_that_keeps_failing_fails_the_invocation(h: Harness, client: Client) -> None:
    from chalicelib.core.errors import UnavailableError

    h.sender._answers = [HttpResponse(503, {}, b"")]
    h.container.pings._sleep = lambda s: None
    spec = {"sink": {"uri": "http://display.example/ping"}}
    assert call(client, "put", f"{PS}/hello", body(**spec)).status_code == 201
    with pytest.raises(UnavailableError):
        fire(h)  # Lambda's asynchronous retries take it from here
    assert len(h.sender.sent) == 3
    assert "source_failure_count" in h.container.metrics.prometheus_text()


def test_a_uri_sink_that_refuses_is_not_tried_again(h: Harness, client: Client) -> None:
    h.sender._answers = [HttpResponse(400, {}, b"no")]
    spec = {"sink": {"uri": "http://display.example/ping"}}
    assert call(client, "put", f"{PS}/hello", body(**spec)).status_code == 201
    answer = fire(h)  # not raised: Lambda's retries would meet the same answer
    assert answer["sent"] is False and "answered 400" in answer["reason"]
    assert len(h.sender.sent) == 1
    assert 'reason="refused"' in h.container.metrics.prometheus_text()


def test_a_missing_broker_is_not_ready_and_its_firing_is_counted(
    h: Harness, client: Client
) -> None:
    r = call(client, "put", f"{PS}/hello", body())
    doc = json.loads(r.body)
    ready = conditions(doc)["Ready"]
    assert ready["status"] == "False" and ready["reason"] == "BrokerDoesNotExist"
    assert "sinkUri" not in doc["status"]
    answer = fire(h)
    assert answer["sent"] is False and "does not exist" in answer["reason"]


def test_an_update_replaces_the_schedule_and_a_delete_removes_it(
    h: Harness, client: Client
) -> None:
    h.broker()
    call(client, "put", f"{PS}/hello", body())
    first = the_schedule(h)
    r = call(client, "put", f"{PS}/hello", body(schedule="0 12 * * 1-5", data="new"))
    assert r.status_code == 200
    second = the_schedule(h)
    assert second.name == first.name and second.expression == "cron(0 12 ? * 2-6 *)"
    assert second.input != first.input
    assert json.loads(r.body)["metadata"]["generation"] == 2
    assert call(client, "delete", f"{PS}/hello").status_code == 200
    assert h.schedules.schedules == {}


def test_the_reconciler_repairs_a_missing_schedule_and_removes_orphans(
    h: Harness, client: Client
) -> None:
    h.broker()
    call(client, "put", f"{PS}/hello", body())
    name = the_schedule(h).name
    h.schedules.schedules.clear()
    doc = json.loads(call(client, "get", f"{PS}/hello").body)
    deployed = conditions(doc)["Deployed"]
    assert deployed["status"] == "False" and "reconciler repairs" in deployed["message"]
    orphan = replace(the_schedule_like(h, name), name=f"{h.settings.queue_prefix}pingsource-x-1")
    h.schedules.put(orphan)
    reconciler(scheduled_event("us-east-1"), None)
    assert list(h.schedules.schedules) == [name]
    doc = json.loads(call(client, "get", f"{PS}/hello").body)
    assert conditions(doc)["Ready"]["status"] == "True"


def the_schedule_like(h: Harness, name: str) -> Any:
    from chalicelib.ports import DeployedSchedule

    return DeployedSchedule(name, "rate(1 minute)", "UTC", "{}")


def test_scheduler_unavailable_is_not_ready_with_the_reason(h: Harness, client: Client) -> None:
    h.broker()
    h.schedules.fail = True
    r = call(client, "put", f"{PS}/hello", body())
    assert r.status_code == 201  # stored; the reconciler provisions it later
    deployed = conditions(json.loads(r.body))["Deployed"]
    assert deployed["status"] == "False" and "ServiceUnavailable" in deployed["message"]
