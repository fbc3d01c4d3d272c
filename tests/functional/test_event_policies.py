"""EventPolicy (docs/security.md) on the fakes: the kind through the API, each sender identity
(ingress token, IAM principal, a source, a trigger's reply), each default mode, filters per
sender, batches all or nothing, the refusal's answer, archive record and metric, and the test
call."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from chalice.test import Client

from app import app
from brokerctl.lambda_context import LocalLambdaContext
from chalicelib.config import Settings
from chalicelib.container import use_container
from chalicelib.ports import HttpResponse
from tests.functional.harness import CP, Answer, Harness, call

EP = "/apis/eventing.knative.dev/v1alpha1/namespaces"
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
ROLE = "arn:aws:sts::123456789012:assumed-role/producer/session-1"
OTHER_ROLE = "arn:aws:sts::123456789012:assumed-role/intruder/session-1"


def harness(mode: str | None = None, *answers: HttpResponse, ttl: float = 0.0) -> Harness:
    settings = replace(Settings(), cache_ttl_seconds=ttl, local_mode=True)
    if mode is not None:
        settings = replace(settings, authorization_default_mode=mode)
    return Harness(*(answers or (HttpResponse(202, {}, b""),)), settings=settings)


def policy(h: Harness, name: str, ns: str = "ns", **spec: Any) -> dict[str, Any]:
    if "from_" in spec:
        spec["from"] = spec.pop("from_")
    doc, _ = h.container.event_policies.put(ns, name, {"metadata": {"name": name}, "spec": spec})
    return doc


def token(h: Harness, broker: str = "default") -> tuple[str, str]:
    """(identity, secret) of a new ingress token of the broker."""
    created = h.container.tokens.create("ns", broker)
    assert created["identity"] == f"token:ns:{created['id']}"
    return created["identity"], created["token"]


def post(
    h: Harness, type_: str = "order.created", secret: str | None = None, id_: str = "1"
) -> Answer:
    headers = {
        "ce-specversion": "1.0",
        "ce-id": id_,
        "ce-source": "/shop",
        "ce-type": type_,
        "content-type": "text/plain",
    }
    if secret is not None:
        headers["authorization"] = f"Bearer {secret}"
    return h.post(headers, b"x")


def problem(answer: Answer) -> dict[str, Any]:
    assert answer.headers.get("Content-Type") == "application/problem+json", answer
    doc: dict[str, Any] = json.loads(answer.body)
    return doc


def rejections(h: Harness) -> list[dict[str, Any]]:
    return [r for r in h.archive.decoded() if r["kind"] == "rejected"]


def unauthorized_count(h: Harness) -> float:
    text = h.container.metrics.prometheus_text()
    prefix = 'broker_unauthorized_count_total{broker="default",namespace="ns"} '
    values = [float(line[len(prefix) :]) for line in text.splitlines() if line.startswith(prefix)]
    return values[0] if values else 0.0


# ---- the kind ----------------------------------------------------------------------------------


@pytest.fixture
def api() -> Iterator[tuple[Harness, Client]]:
    h = harness()
    use_container(h.container)
    with Client(app) as client:
        yield h, client
    use_container(None)


def test_crud_status_and_the_brokers_status_policies(api: tuple[Harness, Client]) -> None:
    h, client = api
    h.broker()
    body = {
        "apiVersion": "eventing.knative.dev/v1alpha1",
        "kind": "EventPolicy",
        "metadata": {"name": "shop"},
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
            "from": [
                {"sub": "token:ns:*"},
                {
                    "ref": {
                        "apiVersion": "sources.knative.dev/v1",
                        "kind": "PingSource",
                        "name": "tick",
                    }
                },
            ],
            "filters": [{"prefix": {"type": "order."}}],
        },
    }
    created = call(client, "put", f"{EP}/ns/eventpolicies/shop", body)
    assert created.status_code == 201, created.body
    doc = json.loads(created.body)
    assert doc["spec"] == body["spec"]
    assert doc["status"]["from"] == ["token:ns:*", "source:ns:PingSource:tick"]
    assert {c["type"]: c["status"] for c in doc["status"]["conditions"]} == {
        "Ready": "True",
        "AuthenticationEnabled": "True",
        "SubjectsResolved": "True",
        "Applied": "True",  # the harness's cache TTL is 0
    }
    listed = json.loads(call(client, "get", f"{EP}/ns/eventpolicies").body)
    assert listed["kind"] == "EventPolicyList" and [
        i["metadata"]["name"] for i in listed["items"]
    ] == ["shop"]
    broker = json.loads(call(client, "get", f"{CP}/ns/brokers/default").body)
    assert broker["status"]["policies"] == [
        {"apiVersion": "eventing.knative.dev/v1alpha1", "name": "shop"}
    ]
    assert call(client, "delete", f"{EP}/ns/eventpolicies/shop").status_code == 200
    broker = json.loads(call(client, "get", f"{CP}/ns/brokers/default").body)
    assert "policies" not in broker["status"]


def test_a_bad_policy_is_a_400_naming_every_problem(api: tuple[Harness, Client]) -> None:
    _, client = api
    body = {
        "metadata": {"name": "bad"},
        "spec": {
            "to": [
                {"ref": {"apiVersion": "v1", "kind": "Channel", "name": "x"}, "selector": {}},
                {"selector": {"matchExpressions": [{"key": "team", "operator": "Near"}]}},
                None,
            ],
            "from": [
                {"sub": "token:*:abc"},
                {"ref": {"apiVersion": "sources.knative.dev/v1", "kind": "Pod", "name": "p"}},
                {"sub": "a", "ref": {}},
            ],
            "filters": [{"exact": {"type": ""}}, {"nope": {}}],
            "extra": 1,
        },
    }
    answer = call(client, "put", f"{EP}/ns/eventpolicies/bad", body)
    assert answer.status_code == 400
    fields = {e["field"] for e in json.loads(answer.body)["errors"]}
    assert {
        "spec.extra",
        "spec.to[0]",
        "spec.to[1].selector.matchExpressions[0].operator",
        "spec.to[2]",
        "spec.from[0].sub",
        "spec.from[1].ref.kind",
        "spec.from[2]",
    } <= fields, fields
    assert any(f.startswith("spec.filters[0]") for f in fields), fields
    assert any(f.startswith("spec.filters[1]") for f in fields), fields


# ---- a broker with no policy -------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["allow-same-namespace", "allow-all", "deny-all"])
def test_a_broker_without_ingress_auth_or_policy_accepts_anonymous_events(mode: str) -> None:
    h = harness(mode)
    h.broker()
    h.trigger("t1")
    assert post(h).status == 202
    assert len(h.messages(h.queue_of("t1"))) == 1
    config = h.container.cache.get("ns", "default")
    assert config is not None and config.policies == () and config.tokens == ()


def iam_event(arn: str | None, type_: str = "order.created") -> dict[str, Any]:
    """A Function URL request (AuthType AWS_IAM when ``arn`` is given) posting one event."""
    event: dict[str, Any] = json.loads((FIXTURES / "function_url" / "request.json").read_text())
    event["headers"]["ce-type"] = type_
    if arn is not None:
        event["requestContext"]["authorizer"] = {
            "iam": {"accountId": "123456789012", "userArn": arn, "callerId": "AROAEXAMPLE:s"}
        }
    return event


def via_url(h: Harness, event: dict[str, Any]) -> dict[str, Any]:
    use_container(h.container)
    try:
        answer: dict[str, Any] = app(
            copy.deepcopy(event), LocalLambdaContext("serverless-broker-prod")
        )
    finally:
        use_container(None)
    return answer


@pytest.mark.parametrize(
    ("mode", "token_status", "iam_status", "decision"),
    [
        ("allow-same-namespace", 202, 403, "default-allow-same-namespace"),
        ("allow-all", 202, 202, None),
        ("deny-all", 403, 403, "default-deny-all"),
    ],
)
def test_the_default_mode_decides_for_an_authenticating_broker_with_no_policy(
    mode: str, token_status: int, iam_status: int, decision: str | None
) -> None:
    h = harness(mode)
    h.broker(annotations={"serverless-broker/ingress-auth": "token"})
    h.trigger("t1")
    _, secret = token(h)
    answer = post(h, secret=secret)
    assert answer.status == token_status, answer
    url_answer = via_url(h, iam_event(ROLE))
    assert url_answer["statusCode"] == iam_status, url_answer
    if decision is not None:
        refused = answer if token_status == 403 else None
        body = json.loads(url_answer["body"])
        assert body["status"] == 403 and body["decision"] == decision
        if refused is not None:
            assert problem(refused)["decision"] == decision
    # Without an identity, such a broker still answers 401, whatever the mode.
    assert post(h).status == 401
    assert via_url(h, iam_event(None))["statusCode"] == 401


# ---- identities --------------------------------------------------------------------------------


def test_a_token_admitted_by_a_policy_posts_and_every_other_sender_is_refused() -> None:
    h = harness()
    h.broker()  # no ingress-auth: the policy alone decides
    h.trigger("t1")
    admitted, secret = token(h)
    _, other_secret = token(h)
    policy(h, "producer", from_=[{"sub": admitted}])
    assert post(h, secret=secret).status == 202
    other = post(h, secret=other_secret, id_="2")
    assert other.status == 403
    assert problem(other)["decision"] == "sender-not-admitted"
    assert admitted not in problem(other)["detail"]  # the policy's contents stay hidden
    anonymous = post(h, id_="3")
    assert anonymous.status == 403 and problem(anonymous)["decision"] == "anonymous-sender"
    forged = post(h, secret="sbt_not-a-token", id_="4")
    assert forged.status == 401 and forged.headers["WWW-Authenticate"] == 'Bearer realm="broker"'
    assert [m["event"]["id"] for m in h.messages(h.queue_of("t1"))] == ["1"]
    refused = rejections(h)
    assert [(r["status"], r["reason"]) for r in refused] == [
        (403, "unauthorized"),
        (403, "unauthorized"),
        (401, "unauthorized"),
    ]
    assert unauthorized_count(h) == 3


def test_an_iam_principal_through_an_iam_function_url_is_matched_by_a_prefix() -> None:
    h = harness()
    h.broker()
    h.trigger("t1")
    policy(h, "producers", from_=[{"sub": "arn:aws:sts::123456789012:assumed-role/producer/*"}])
    assert via_url(h, iam_event(ROLE))["statusCode"] == 202
    refused = via_url(h, iam_event(OTHER_ROLE))
    assert refused["statusCode"] == 403
    assert json.loads(refused["body"])["decision"] == "sender-not-admitted"
    # The same request through a URL without IAM auth carries no principal: anonymous.
    anonymous = via_url(h, iam_event(None))
    assert json.loads(anonymous["body"])["decision"] == "anonymous-sender"
    assert len(h.messages(h.queue_of("t1"))) == 1


def kafka_harness(*admit: dict[str, Any]) -> Harness:
    from tests.functional.test_kafka_ingress import MSK_ARN, source

    h = harness()
    h.broker()
    h.trigger("all")
    source(h, "orders", "orders", mskClusterArn=MSK_ARN)
    policy(h, "kafka", from_=list(admit))
    return h


def test_a_kafka_source_is_a_sender_by_reference() -> None:
    from tests.functional.test_kafka_ingress import fixture

    ref = {
        "ref": {
            "apiVersion": "sources.knative.dev/v1beta1",
            "kind": "KafkaSource",
            "name": "orders",
        }
    }
    h = kafka_harness(ref)
    answer = h.container.kafka_ingress.handle(fixture("msk_event.json"))
    assert answer["ingested"] == 2  # the fixture's two valid records


def test_a_kafka_source_not_admitted_has_its_records_rejected_as_unauthorized() -> None:
    from tests.functional.test_kafka_ingress import failures, fixture

    h = kafka_harness({"sub": "source:ns:KafkaSource:payments"})
    answer = h.container.kafka_ingress.handle(fixture("msk_event.json"))
    assert answer["ingested"] == 0
    reasons = sorted(i["reason"] for i in answer["invalid"])
    assert reasons == ["invalid_event", "invalid_event", "unauthorized", "unauthorized"]
    assert sum(1 for f in failures(h, "orders") if f["reason"] == "unauthorized") == 2
    assert h.queues.depth(h.queue_of("all")) == 0
    assert [r["status"] for r in rejections(h) if r["reason"] == "unauthorized"] == [403, 403]
    assert unauthorized_count(h) == 2


REPLY = HttpResponse(
    200,
    {
        "ce-specversion": "1.0",
        "ce-id": "r-1",
        "ce-source": "/replier",
        "ce-type": "order.confirmed",
        "content-type": "text/plain",
    },
    b"ok",
)


@pytest.mark.parametrize("admitted", [True, False])
def test_a_triggers_reply_is_a_sender_of_its_own(admitted: bool) -> None:
    h = harness(None, REPLY)
    h.broker()
    h.trigger("confirm", filter={"type": "order.created"})
    h.trigger("confirmed", filter={"type": "order.confirmed"})
    identity, secret = token(h)
    senders = [{"sub": identity}]
    if admitted:
        senders.append(
            {"ref": {"apiVersion": "eventing.knative.dev/v1", "kind": "Trigger", "name": "confirm"}}
        )
    policy(h, "shop", from_=senders)
    assert post(h, secret=secret).status == 202
    answer = h.deliver_once("confirm")
    assert answer.get("batchItemFailures") == [] and answer["received"] == 1
    replies = [m["event"]["id"] for m in h.messages(h.queue_of("confirmed"))]
    if admitted:
        assert replies == ["r-1"]
        assert rejections(h) == []
    else:
        assert replies == []  # dropped, not retried: the original was delivered
        [refused] = rejections(h)
        assert (refused["status"], refused["reason"], refused["event_type"]) == (
            403,
            "unauthorized",
            "order.confirmed",
        )
        assert unauthorized_count(h) == 1


# ---- filters, batches --------------------------------------------------------------------------


def test_a_filter_admits_one_type_from_one_sender_and_not_another() -> None:
    h = harness()
    h.broker()
    h.trigger("t1")
    orders, orders_secret = token(h)
    billing, billing_secret = token(h)
    policy(
        h, "orders-only", from_=[{"sub": orders}], filters=[{"exact": {"type": "order.created"}}]
    )
    policy(h, "billing", from_=[{"sub": billing}])
    assert post(h, "order.created", orders_secret, "1").status == 202
    refused = post(h, "invoice.paid", orders_secret, "2")
    assert refused.status == 403 and problem(refused)["decision"] == "event-not-admitted"
    assert "order.created" not in problem(refused)["detail"]  # not the filter's contents
    assert post(h, "invoice.paid", billing_secret, "3").status == 202  # policies add up
    assert [m["event"]["id"] for m in h.messages(h.queue_of("t1"))] == ["1", "3"]


def test_a_batch_is_refused_whole_by_the_first_event_refused() -> None:
    h = harness()
    h.broker()
    h.trigger("t1")
    identity, secret = token(h)
    policy(h, "orders", from_=[{"sub": identity}], filters=[{"prefix": {"type": "order."}}])
    batch = [
        {"specversion": "1.0", "id": "1", "source": "/s", "type": "order.created"},
        {"specversion": "1.0", "id": "2", "source": "/s", "type": "invoice.paid"},
        {"specversion": "1.0", "id": "3", "source": "/s", "type": "order.paid"},
    ]
    headers = {
        "content-type": "application/cloudevents-batch+json",
        "authorization": f"Bearer {secret}",
    }
    refused = h.post(headers, json.dumps(batch).encode())
    assert refused.status == 403
    assert problem(refused)["detail"].startswith("event [1] (type invoice.paid)")
    assert h.queues.depth(h.queue_of("t1")) == 0
    assert unauthorized_count(h) == 3  # the request's events
    del batch[1]
    assert h.post(headers, json.dumps(batch).encode()).status == 202
    assert h.queues.depth(h.queue_of("t1")) == 2


# ---- which brokers a policy applies to ---------------------------------------------------------


def labelled_broker(h: Harness, name: str, **labels: str) -> None:
    h.container.brokers.put("ns", name, {"metadata": {"name": name, "labels": labels}})


def test_selectors_and_refs_pick_brokers_and_no_to_picks_every_broker() -> None:
    h = harness()
    labelled_broker(h, "a", team="shop", tier="gold")
    labelled_broker(h, "b", team="shop")
    labelled_broker(h, "c", team="billing")
    policy(
        h,
        "gold",
        to=[
            {
                "selector": {
                    "matchLabels": {"team": "shop"},
                    "matchExpressions": [
                        {"key": "tier", "operator": "In", "values": ["gold", "silver"]}
                    ],
                }
            }
        ],
    )
    policy(
        h,
        "not-billing",
        to=[
            {
                "selector": {
                    "matchExpressions": [
                        {"key": "team", "operator": "NotIn", "values": ["billing"]}
                    ]
                }
            }
        ],
    )
    policy(
        h,
        "c-only",
        to=[{"ref": {"apiVersion": "eventing.knative.dev/v1", "kind": "Broker", "name": "c"}}],
    )
    policy(h, "everyone")

    def applied(name: str) -> list[str]:
        doc = h.container.brokers.get("ns", name)
        return [p["name"] for p in doc["status"].get("policies", [])]

    assert applied("a") == ["everyone", "gold", "not-billing"]
    assert applied("b") == ["everyone", "not-billing"]
    assert applied("c") == ["c-only", "everyone"]
    # Relabelled, a broker leaves one selector's policy and meets another's.
    labelled_broker(h, "b", team="billing")
    assert applied("b") == ["everyone"]
    config = h.container.cache.get("ns", "b")
    assert config is not None and [r.policy for r in config.policies] == ["everyone"]


# ---- the test call -----------------------------------------------------------------------------


def test_call_says_who_may_post_what(api: tuple[Harness, Client]) -> None:
    h, client = api
    h.broker()
    identity, _ = token(h)
    policy(h, "orders", from_=[{"sub": identity}], filters=[{"exact": {"type": "order.created"}}])
    event = {"specversion": "1.0", "id": "1", "source": "/s", "type": "order.created"}
    path = f"{EP}/ns/eventpolicies-test"

    def verdict(body: dict[str, Any]) -> dict[str, Any]:
        answer = call(client, "post", path, body)
        assert answer.status_code == 200, answer.body
        doc: dict[str, Any] = json.loads(answer.body)
        return doc

    yes = verdict({"identity": identity, "event": event})
    assert yes == {
        "allowed": True,
        "policy": "orders",
        "decision": "admitted",
        "reason": "admitted by policy orders",
        "policies": ["orders"],
    }
    no = verdict({"identity": identity, "event": {**event, "type": "order.deleted"}})
    assert (no["allowed"], no["policy"], no["decision"]) == (False, None, "event-not-admitted")
    assert verdict({"identity": None, "event": event})["decision"] == "anonymous-sender"
    assert (
        verdict({"identity": "token:ns:other", "event": event})["decision"] == "sender-not-admitted"
    )
    bad = call(client, "post", path, {"identity": 7, "event": {"id": ""}, "broker": "", "x": 1})
    assert bad.status_code == 400
    fields = {e["field"] for e in json.loads(bad.body)["errors"]}
    assert {"identity", "broker", "x"} <= fields and any(f.startswith("event.") for f in fields)
    missing = call(client, "post", path, {"identity": identity, "event": event, "broker": "nope"})
    assert missing.status_code == 404
    # Checked as a name before the store is read with it.
    invalid = call(client, "post", path, {"event": event, "broker": "Not A Name" * 300})
    assert invalid.status_code == 400
    assert [e["field"] for e in json.loads(invalid.body)["errors"]] == ["broker"]


# ---- what the ingress reads --------------------------------------------------------------------


def test_policies_are_read_with_the_broker_config_not_per_event() -> None:
    h = harness(ttl=3600.0)  # one load serves every request below
    h.broker()
    h.trigger("t1")
    identity, secret = token(h)
    policy(h, "producer", from_=[{"sub": identity}])
    assert post(h, secret=secret, id_="0").status == 202
    before = h.store.calls
    for i in range(1, 21):
        assert post(h, secret=secret, id_=str(i)).status == 202
    assert h.store.calls == before


def test_another_containers_ingress_applies_a_change_once_its_cache_ttl_has_passed() -> None:
    from chalicelib.services.routing import ConfigCache, load_broker_config

    h = harness()
    h.broker()
    identity, _ = token(h)
    now = [0.0]
    other = ConfigCache(  # another container's cache over the same store, on a clock of its own
        lambda ns, name: load_broker_config(h.store, h.settings.queue_prefix, ns, name),
        5.0,
        clock=lambda: now[0],
        epoch=h.store.epoch,
    )

    def rules() -> list[str]:
        config = other.get("ns", "default")
        assert config is not None
        return [r.policy for r in config.policies]

    assert rules() == []
    policy(h, "producer", from_=[{"sub": identity}])
    now[0] = 4.9
    assert rules() == []  # within the TTL: the configuration it has
    now[0] = 5.0
    assert rules() == ["producer"]
    h.container.event_policies.delete("ns", "producer")
    now[0] = 10.0
    assert rules() == []


@pytest.mark.parametrize("admitted", [True, False])
def test_a_ping_source_is_a_sender_by_reference(admitted: bool) -> None:
    from app import pings
    from chalicelib.core.schedules import scheduled_input
    from chalicelib.services.schedules import Scheduling
    from tests.fakes.schedules import MemorySchedules

    h = harness()
    schedules = MemorySchedules()
    h.container.scheduling = Scheduling(schedules, h.settings.queue_prefix)  # type: ignore[misc]
    h.broker()
    h.trigger("t1")
    name = "tick" if admitted else "other"
    ref = {"apiVersion": "sources.knative.dev/v1", "kind": "PingSource", "name": name}
    policy(h, "pings", from_=[{"ref": ref}])
    sink = {"ref": {"apiVersion": "eventing.knative.dev/v1", "kind": "Broker", "name": "default"}}
    body = {"metadata": {"name": "tick"}, "spec": {"schedule": "* * * * *", "sink": sink}}
    h.container.ping_sources.put("ns", "tick", body)
    (deployed,) = schedules.schedules.values()
    use_container(h.container)
    try:
        answer = pings(scheduled_input(deployed.input, datetime(2026, 11, 28, tzinfo=UTC)), None)
    finally:
        use_container(None)
    assert answer["sent"] is admitted, answer
    assert h.queues.depth(h.queue_of("t1")) == (1 if admitted else 0)
    if not admitted:
        assert [(r["status"], r["reason"]) for r in rejections(h)] == [(403, "unauthorized")]
        assert unauthorized_count(h) == 1


def test_a_policy_is_ready_once_every_ingress_applies_it() -> None:
    from chalicelib.core.resources.event_policy import EVENT_POLICIES
    from chalicelib.services.policies import EventPolicyHooks
    from chalicelib.services.resources import Resources, ResourceService

    h = harness()
    now = [datetime(2026, 11, 28, 22, 0, tzinfo=UTC)]
    policies = Resources(h.store, EVENT_POLICIES)
    hooks = EventPolicyHooks(policies, h.container.cache, 5.0, clock=lambda: now[0])
    service = ResourceService(policies, hooks, clock=lambda: now[0])

    def ready(doc: dict[str, Any]) -> tuple[str, str]:
        (c,) = [c for c in doc["status"]["conditions"] if c["type"] == "Ready"]
        return c["status"], c.get("reason", "")

    body = {"metadata": {"name": "p"}, "spec": {"from": [{"sub": "token:ns:*"}]}}
    doc, _ = service.put("ns", "p", body)
    assert ready(doc) == ("Unknown", "Propagating")
    now[0] += timedelta(seconds=5)
    assert ready(service.get("ns", "p")) == ("True", "")
    doc, _ = service.put("ns", "p", body)  # the same spec: nothing to propagate
    assert ready(doc) == ("True", "")
    body["spec"]["from"] = [{"sub": "token:ns:a"}]
    doc, _ = service.put("ns", "p", body)
    assert ready(doc) == ("Unknown", "Propagating") and doc["metadata"]["generation"] == 2
    now[0] += timedelta(seconds=5)
    assert ready(service.get("ns", "p")) == ("True", "")
