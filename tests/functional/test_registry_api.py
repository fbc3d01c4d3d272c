"""The xRegistry endpoint registry through Chalice's test client, on the in-memory fakes. Every
document the API returns is checked against the spec's endpoint document schema."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from chalice.test import Client

from chalicelib.container import use_container
from chalicelib.core.resources.broker import DEFAULT_MAX_EVENT_BYTES
from chalicelib.services.event_types import EventTypeSample, MetricsEventTypes, metrics_fetcher
from chalicelib.services.registry import Registry
from tests.functional.harness import Harness
from tests.unit.test_registry_schema import (
    assert_valid_document,
    assert_valid_endpoint,
    assert_valid_endpoints,
    assert_valid_message,
)

BASE = "http://127.0.0.1:8080"
BROKER_ID = "_broker.ns.default"
TRIGGER_ID = "_trigger.ns.default.t1"


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2030, 1, 1, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now

    def tick(self, seconds: float = 60) -> None:
        self.now += timedelta(seconds=seconds)


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def metrics_dir(tmp_path: Path) -> Path:
    return tmp_path


@pytest.fixture
def h(clock: Clock, metrics_dir: Path) -> Iterator[Harness]:
    h = Harness()
    c = h.container
    # Flush the ingress sample on every request, so a test sees each new type at once.
    c.event_types = EventTypeSample(h.store, interval_s=0, clock=clock)  # type: ignore[misc]
    metrics = MetricsEventTypes(metrics_fetcher(str(metrics_dir), h.blobs), ttl_s=0)
    c.registry = Registry(h.store, h.settings, metrics, clock=clock)  # type: ignore[misc]
    use_container(c)
    yield h
    use_container(None)


def get(client: Client, path: str) -> Any:
    r = client.http.get(path)
    assert r.status_code == 200, r.body
    return r.json_body


def put(client: Client, path: str, body: Any) -> Any:
    return client.http.put(
        path, body=json.dumps(body), headers={"content-type": "application/json"}
    )


def setup(h: Harness, *types: str) -> None:
    h.broker()
    h.trigger("t1", delivery={"retry": 3, "backoffDelay": "PT1S", "format": "json"})
    for i, t in enumerate(types):
        assert h.send(t, id_=str(i)).status == 202


# ---- reading ------------------------------------------------------------------------------------


def test_root(h: Harness, client: Client) -> None:
    setup(h)
    doc = get(client, "/registry")
    assert_valid_document(doc)
    assert doc["specversion"] == "1.0-rc4" and doc["registryid"] == "serverless-broker-local"
    assert doc["self"] == f"{BASE}/registry" and doc["xid"] == "/"
    assert doc["endpointsurl"] == f"{BASE}/registry/endpoints"
    assert doc["endpointscount"] == 3 and "endpoints" not in doc and "model" not in doc
    assert doc["epoch"] == 1 and doc["createdat"] and doc["modifiedat"]


def test_root_inlines(h: Harness, client: Client, clock: Clock) -> None:
    setup(h, "com.example.created")
    one = get(client, "/registry?inline=endpoints")
    assert set(one["endpoints"]) == {BROKER_ID, TRIGGER_ID, "_controlplane"}
    assert "messages" not in one["endpoints"][BROKER_ID]
    deep = get(client, "/registry?inline=endpoints.messages")
    messages = deep["endpoints"][BROKER_ID]["messages"]
    assert (
        list(messages) == ["com.example.created"] and "meta" not in messages["com.example.created"]
    )
    everything = get(client, "/registry?inline=*&inline=model")
    assert everything["model"]["groups"]["endpoints"]["resources"]["messages"]["maxversions"] == 1
    message = everything["endpoints"][BROKER_ID]["messages"]["com.example.created"]
    assert message["meta"]["readonly"] is True and list(message["versions"]) == ["1"]
    for doc in (one, deep, everything):
        assert_valid_document(doc)


def test_bad_inline_is_a_problem(h: Harness, client: Client) -> None:
    r = client.http.get("/registry?inline=endpoints.nope")
    assert r.status_code == 400
    assert r.headers["Content-Type"] == "application/problem+json"
    assert r.json_body["errors"][0]["field"] == "inline"


def test_model(h: Harness, client: Client) -> None:
    doc = get(client, "/registry/model")
    endpoints = doc["groups"]["endpoints"]
    assert endpoints["plural"] == "endpoints" and endpoints["singular"] == "endpoint"
    assert endpoints["attributes"]["usage"]["type"] == "array"
    assert endpoints["resources"]["messages"]["hasdocument"] is False


def test_the_literal_routes_win_over_the_ingress_route(h: Harness, client: Client) -> None:
    # /registry/endpoints has two segments, like POST /{namespace}/{broker}.
    r = client.http.get("/registry/endpoints")
    assert r.status_code == 200 and isinstance(r.json_body, dict)
    assert client.http.get("/registry/model").status_code == 200


def test_broker_endpoint_lists_the_event_types_seen(h: Harness, client: Client) -> None:
    setup(h, "com.example.created", "com.example.deleted", "com.example.created")
    ep = get(client, f"/registry/endpoints/{BROKER_ID}?inline=messages")
    assert_valid_endpoint(ep)
    assert ep["usage"] == ["producer"] and ep["channel"] == "ns/default"
    assert ep["protocol"] == "HTTP" and ep["envelope"] == "CloudEvents/1.0"
    assert ep["protocoloptions"]["endpoints"] == [{"uri": f"{BASE}/ns/default"}]
    assert ep["protocoloptions"]["method"] == "POST"
    assert ep["envelopeoptions"]["modes"] == ["binary", "structured"]
    assert ep["messagescount"] == 2
    created = ep["messages"]["com.example.created"]
    assert created["envelopemetadata"]["type"]["value"] == "com.example.created"
    assert created["envelopemetadata"]["source"]["value"] == "/src"
    assert created["envelopemetadata"]["datacontenttype"]["value"] == "text/plain"
    assert created["firstseen"] == created["lastseen"] == "2030-01-01T00:00:00.000Z"


def test_trigger_and_control_plane_endpoints(h: Harness, client: Client) -> None:
    setup(h)
    endpoints = get(client, "/registry/endpoints")
    assert_valid_endpoints(endpoints)
    t = endpoints[TRIGGER_ID]
    assert t["usage"] == ["producer"] and t["channel"] == "ns/default/t1"
    assert t["protocoloptions"]["endpoints"] == [{"uri": "http://sub.example/"}]
    assert t["delivery"] == {"retry": 3, "backoffdelay": "PT1S", "format": "json"}
    assert t["envelopeoptions"] == {"mode": "structured", "format": "application/cloudevents+json"}
    cp = endpoints["_controlplane"]
    assert cp["usage"] == ["subscriber"]
    assert cp["protocoloptions"]["endpoints"] == [{"uri": f"{BASE}/apis/eventing.knative.dev/v1"}]


def test_messages_meta_and_versions(h: Harness, client: Client) -> None:
    setup(h, "com.example.created")
    base = f"/registry/endpoints/{BROKER_ID}/messages"
    messages = get(client, base)
    assert list(messages) == ["com.example.created"]
    m = get(client, f"{base}/com.example.created")
    assert_valid_message(m)
    assert m["self"] == f"{BASE}{base}/com.example.created" and m["versionid"] == "1"
    meta = get(client, f"{base}/com.example.created/meta")
    assert meta["defaultversionid"] == "1" and meta["self"] == m["metaurl"]
    versions = get(client, f"{base}/com.example.created/versions")
    assert (
        list(versions) == ["1"] and m["versionsurl"] == f"{BASE}{base}/com.example.created/versions"
    )
    version = get(client, f"{base}/com.example.created/versions/1")
    assert_valid_message(version)
    assert version == versions["1"] and version["self"] == meta["defaultversionurl"]
    for path in (f"{base}/nope", f"{base}/com.example.created/versions/2", "/registry/endpoints/x"):
        r = client.http.get(path)
        assert r.status_code == 404 and r.headers["Content-Type"] == "application/problem+json"


@pytest.mark.parametrize(
    "path",
    [
        "/registry/endpoints/_broker.ns.missing",
        "/registry/endpoints/_trigger.ns.default.missing",
        "/registry/endpoints/_trigger.ns.other.t1",  # t1 exists, but on broker "default"
    ],
)
def test_generated_endpoints_of_missing_resources_are_not_found(
    h: Harness, client: Client, path: str
) -> None:
    setup(h)
    assert client.http.get(path).status_code == 404


# ---- epoch and modifiedat -----------------------------------------------------------------------


def test_epoch_follows_the_broker_and_its_types(h: Harness, client: Client, clock: Clock) -> None:
    setup(h, "a")
    path = f"/registry/endpoints/{BROKER_ID}"
    first = get(client, path)
    clock.tick()
    assert get(client, path) == first  # reading changes nothing
    h.broker(annotations={"serverless-broker/max-event-bytes": str(DEFAULT_MAX_EVENT_BYTES // 2)})
    clock.tick()
    second = get(client, path)
    assert second["epoch"] == first["epoch"] + 1
    assert second["modifiedat"] > first["modifiedat"] and second["createdat"] == first["createdat"]
    h.send("b")  # a new type joins the messages collection
    clock.tick()
    third = get(client, path)
    assert (third["epoch"], third["messagescount"]) == (second["epoch"] + 1, 2)
    clock.tick()
    h.send("a", id_="again")  # lastseen moves, the definition does not
    assert get(client, path)["epoch"] == third["epoch"]


def test_trigger_epoch_follows_the_delivery_it_inherits(h: Harness, client: Client) -> None:
    h.broker()
    h.trigger("t1")
    first = get(client, f"/registry/endpoints/{TRIGGER_ID}")
    assert first["delivery"]["retry"] == 10
    h.broker(delivery={"retry": 1})
    second = get(client, f"/registry/endpoints/{TRIGGER_ID}")
    assert (second["epoch"], second["delivery"]["retry"]) == (first["epoch"] + 1, 1)


def test_root_epoch_moves_when_endpoints_come_and_go(h: Harness, client: Client) -> None:
    h.broker()
    first = get(client, "/registry")
    assert get(client, "/registry")["epoch"] == first["epoch"]
    h.trigger("t1")
    assert get(client, "/registry")["epoch"] == first["epoch"] + 1
    h.container.triggers.delete("ns", "t1")
    assert get(client, "/registry")["epoch"] == first["epoch"] + 2


# ---- user-defined endpoints ---------------------------------------------------------------------

USER = {
    "name": "orders out",
    "usage": "consumer",
    "channel": "orders",
    "protocol": "KAFKA",
    "protocoloptions": {"endpoints": [{"bootstrap.servers": ["k1:9092"]}], "consumergroup": "g"},
    "x_team": {"owner": "payments"},
    "messages": {
        "com.example.created": {
            "envelope": "CloudEvents/1.0",
            "envelopemetadata": {"type": {"value": "com.example.created"}},
        }
    },
}


def test_user_endpoint_lifecycle(h: Harness, client: Client, clock: Clock) -> None:
    r = put(client, "/registry/endpoints/orders-out", USER)
    assert r.status_code == 201, r.body
    assert r.headers["Location"] == f"{BASE}/registry/endpoints/orders-out"
    doc = r.json_body
    assert_valid_endpoint(doc)
    assert doc["usage"] == ["consumer"] and doc["x_team"] == {"owner": "payments"}
    assert doc["protocoloptions"]["acks"] == 1  # the model's default
    assert doc["epoch"] == 1 and doc["messagescount"] == 1 and "messages" not in doc
    assert get(client, "/registry/endpoints/orders-out") == doc
    clock.tick()
    r = put(client, "/registry/endpoints/orders-out", {**USER, "epoch": 1, "name": "renamed"})
    assert r.status_code == 200 and "Location" not in r.headers
    assert (r.json_body["epoch"], r.json_body["name"]) == (2, "renamed")
    assert r.json_body["modifiedat"] > doc["modifiedat"]
    stale = put(client, "/registry/endpoints/orders-out", {**USER, "epoch": 1})
    assert stale.status_code == 400 and stale.json_body["errors"][0]["field"] == "epoch"
    listed = get(client, "/registry/endpoints?inline=messages")
    assert "orders-out" in listed and "com.example.created" in listed["orders-out"]["messages"]
    assert_valid_endpoints(listed)
    message = get(client, "/registry/endpoints/orders-out/messages/com.example.created?inline=meta")
    assert message["meta"]["readonly"] is False
    r = client.http.delete("/registry/endpoints/orders-out/messages/com.example.created")
    assert r.status_code == 204
    assert get(client, "/registry/endpoints/orders-out")["epoch"] == 3
    assert client.http.delete("/registry/endpoints/orders-out?epoch=1").status_code == 400
    assert client.http.delete("/registry/endpoints/orders-out?epoch=3").status_code == 204
    assert client.http.delete("/registry/endpoints/orders-out").status_code == 404


def test_user_endpoint_counts_in_the_root(h: Harness, client: Client) -> None:
    before = get(client, "/registry")
    assert put(client, "/registry/endpoints/mine", USER).status_code == 201
    after = get(client, "/registry")
    assert after["endpointscount"] == before["endpointscount"] + 1
    assert after["epoch"] == before["epoch"] + 1


def test_invalid_endpoint_is_a_problem_naming_every_field(h: Harness, client: Client) -> None:
    r = put(
        client,
        "/registry/endpoints/bad",
        {"usage": ["producer", "consumer"], "protocol": "MQTT/5.0",
         "protocoloptions": {"qos": 5, "endpoints": [{"uri": "http://x"}]}},
    )  # fmt: skip
    assert r.status_code == 400 and r.headers["Content-Type"] == "application/problem+json"
    fields = {e["field"] for e in r.json_body["errors"]}
    assert fields == {"usage", "protocoloptions.qos", "protocoloptions.endpoints[0].uri"}
    assert client.http.get("/registry/endpoints/bad").status_code == 404


@pytest.mark.parametrize("endpoint_id", [BROKER_ID, TRIGGER_ID, "_controlplane"])
def test_generated_endpoints_are_read_only(h: Harness, client: Client, endpoint_id: str) -> None:
    setup(h)
    r = put(
        client, f"/registry/endpoints/{endpoint_id}", {"usage": ["producer"], "protocol": "HTTP"}
    )
    assert r.status_code == 400 and "generated" in r.json_body["errors"][0]["message"]
    assert client.http.delete(f"/registry/endpoints/{endpoint_id}").status_code == 400
    assert get(client, f"/registry/endpoints/{endpoint_id}")["endpointid"] == endpoint_id


def test_the_reserved_prefix_and_case_insensitive_ids(h: Harness, client: Client) -> None:
    r = put(client, "/registry/endpoints/_broker.ns.x", {"usage": ["producer"], "protocol": "HTTP"})
    assert r.status_code == 400
    r = put(client, "/registry/endpoints/_mine", {"usage": ["producer"], "protocol": "HTTP"})
    assert r.status_code == 400 and "reserved" in r.json_body["errors"][0]["message"]
    assert put(client, "/registry/endpoints/Mine", USER).status_code == 201
    assert put(client, "/registry/endpoints/mine", USER).status_code == 409


def test_a_body_that_is_not_json(h: Harness, client: Client) -> None:
    r = client.http.put(
        "/registry/endpoints/x", body=b"{", headers={"content-type": "application/json"}
    )
    assert r.status_code == 400


# ---- the metrics job's output -------------------------------------------------------------------


def test_types_from_the_metrics_job_merge_with_the_sample(
    h: Harness, client: Client, metrics_dir: Path
) -> None:
    setup(h, "com.example.created")
    rows = [
        {"namespace": "ns", "broker": "default", "event_type": "com.example.created",
         "event_source": "/batch", "date": "2029-12-31", "first_seen": "2029-12-31T10:00:00.000Z",
         "last_seen": "2029-12-31T11:00:00.000Z", "events": 40},
        {"namespace": "ns", "broker": "default", "event_type": "com.example.archived",
         "event_source": "/batch", "date": "2029-12-30", "first_seen": "2029-12-30T10:00:00.000Z",
         "last_seen": "2029-12-30T10:00:00.000Z", "events": 2},
        {"namespace": "ns", "broker": "gone", "event_type": "x", "event_source": "/y",
         "date": "2029-12-30", "first_seen": "2029-12-30T10:00:00Z",
         "last_seen": "2029-12-30T10:00:00Z", "events": 1},
    ]  # fmt: skip
    (metrics_dir / "event_types.json").write_text(json.dumps({"event_types": rows}))
    ep = get(client, f"/registry/endpoints/{BROKER_ID}?inline=messages")
    assert_valid_endpoint(ep)
    created = ep["messages"]["com.example.created"]
    assert created["sources"] == ["/batch", "/src"]
    assert "value" not in created["envelopemetadata"]["source"]  # two sources
    assert created["firstseen"] == "2029-12-31T10:00:00.000Z"
    assert created["lastseen"] == "2030-01-01T00:00:00.000Z"  # the sample saw it later
    assert created["eventcount"] == 40
    assert ep["messages"]["com.example.archived"]["eventcount"] == 2
    listed = get(client, "/registry/endpoints?inline=messages")
    assert listed[BROKER_ID]["messages"] == ep["messages"]
    assert "_broker.ns.gone" not in listed  # types of a deleted broker do not make an endpoint
