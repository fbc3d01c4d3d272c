"""The registry's pure domain: generated ids, what brokers and triggers show, the seen event
types, the epoch/modifiedat stamps, ?inline, the API view and user-endpoint writes."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from chalicelib.core.errors import ValidationError
from chalicelib.core.registry import entities as reg
from chalicelib.core.registry import writes
from chalicelib.core.registry.model import model
from chalicelib.core.registry.validation import CLOUDEVENTS, ID_PATTERN, parse_endpoint
from chalicelib.core.registry.view import (
    Root,
    Urls,
    generated_entity,
    parse_inline,
    render_endpoint,
    render_message,
    render_root,
    render_version,
    stored_entity,
)
from chalicelib.core.resources.broker import admit_broker, parse_broker
from chalicelib.core.resources.trigger import admit_trigger, parse_trigger
from tests.unit.test_registry_schema import (
    assert_valid_document,
    assert_valid_endpoint,
    assert_valid_message,
)

BASE = "https://broker.example"
T0 = datetime(2030, 1, 1, tzinfo=UTC)
NOW = "2030-01-02T00:00:00.000Z"


def broker(name: str = "orders", **spec: Any) -> Any:
    body: dict[str, Any] = {"metadata": {"name": name, "annotations": spec.pop("annotations", {})}}
    if spec:
        body["spec"] = spec
    return admit_broker(parse_broker("shop", body, path_name=name), None, uid="u1", now=T0)


def trigger(name: str = "audit", **spec: Any) -> Any:
    body = {
        "metadata": {"name": name},
        "spec": {"broker": "orders", "subscriber": {"uri": "https://sub.example/in"}, **spec},
    }
    return admit_trigger(parse_trigger("shop", body, path_name=name), None, uid="u2", now=T0)


def seen(t: str, *sources: str, dct: str | None = None, count: int | None = None) -> list[Any]:
    return [
        reg.ObservedType("shop", "orders", t, s, dct, T0, T0 + timedelta(hours=1), count)
        for s in sources
    ]


# ---- ids ----------------------------------------------------------------------------------------


def test_generated_ids_round_trip_and_are_valid_ids() -> None:
    for eid, ref in (
        (reg.broker_endpoint_id("shop", "orders"), reg.GeneratedRef("broker", "shop", "orders")),
        (
            reg.trigger_endpoint_id("shop", "orders", "audit"),
            reg.GeneratedRef("trigger", "shop", "orders", "audit"),
        ),
        (reg.CONTROL_PLANE_ID, reg.GeneratedRef("controlplane")),
    ):
        assert reg.parse_generated_id(eid) == ref
        assert ID_PATTERN.fullmatch(eid)
        assert eid.startswith("_")  # the prefix user PUTs are refused on
    assert reg.parse_generated_id("_broker.a") is None
    assert reg.parse_generated_id("orders") is None


@pytest.mark.parametrize(
    ("types", "expected"),
    [
        (["com.example.created"], {"com.example.created": "com.example.created"}),
        (["urn:x@y~z"], {"urn:x@y~z": "urn:x@y~z"}),
    ],
)
def test_message_ids_are_the_type_when_valid(types: list[str], expected: dict[str, str]) -> None:
    assert reg.message_ids(types) == expected


def test_message_ids_clean_and_hash_otherwise() -> None:
    ids = reg.message_ids(["order created", "order/created", ".hidden", "x" * 200])
    assert ids["order created"].startswith("order_created~")
    assert ids["order/created"].startswith("order_created~")
    assert ids["order created"] != ids["order/created"]
    assert ids[".hidden"].startswith("_.hidden~")
    assert all(ID_PATTERN.fullmatch(i) for i in ids.values())


def test_message_ids_are_unique_case_insensitively() -> None:
    ids = reg.message_ids(["com.a", "COM.A", "Com.A"])
    assert ids["com.a"] == "com.a"
    assert len({i.lower() for i in ids.values()}) == 3


# ---- seen types ---------------------------------------------------------------------------------


def test_summarize_rolls_up_sources_times_and_counts() -> None:
    observed = [
        *seen("t1", "/a", "/b", dct="application/json", count=2),
        reg.ObservedType("shop", "orders", "t1", "/a", None, T0 - timedelta(days=1), T0, None),
        *seen("t2", "/c"),
        reg.ObservedType("shop", "other", "t1", "/z", None, T0, T0, 1),
    ]
    out = reg.summarize(observed)
    t1, t2 = out[("shop", "orders")]
    assert t1 == reg.SeenType(
        "t1", ("/a", "/b"), ("application/json",), T0 - timedelta(days=1),
        T0 + timedelta(hours=1), 4,
    )  # fmt: skip
    assert t2.count is None and t2.sources == ("/c",)
    assert [s.type for s in out[("shop", "other")]] == ["t1"]


# ---- generated endpoints ------------------------------------------------------------------------


def test_broker_endpoint() -> None:
    summary = reg.summarize(
        [
            *seen("com.example.created", "/orders", dct="application/json", count=3),
            *seen("t2", "/a", "/b"),
        ]
    )
    d = reg.broker_definition(broker(), BASE, summary[("shop", "orders")])
    a = d.attributes
    assert d.id == "_broker.shop.orders"
    assert a["usage"] == ["producer"] and a["channel"] == "shop/orders"
    assert a["protocol"] == "HTTP" and a["envelope"] == CLOUDEVENTS
    assert a["protocoloptions"]["endpoints"] == [{"uri": f"{BASE}/shop/orders"}]
    assert a["protocoloptions"]["method"] == "POST"
    assert "mode" not in a["envelopeoptions"]  # either mode
    assert a["envelopeoptions"]["modes"] == ["binary", "structured"]
    m = d.messages["com.example.created"]
    assert m["envelopemetadata"]["type"]["value"] == "com.example.created"
    assert m["envelopemetadata"]["source"]["value"] == "/orders"
    assert m["envelopemetadata"]["datacontenttype"]["value"] == "application/json"
    assert (m["firstseen"], m["lastseen"], m["eventcount"]) == (
        "2030-01-01T00:00:00.000Z", "2030-01-01T01:00:00.000Z", 3,
    )  # fmt: skip
    t2 = d.messages["t2"]
    assert "value" not in t2["envelopemetadata"]["source"] and t2["sources"] == ["/a", "/b"]
    assert "eventcount" not in t2 and "datacontenttype" not in t2["envelopemetadata"]


def test_broker_with_token_auth_and_legacy_versions() -> None:
    b = broker(
        annotations={
            "serverless-broker/ingress-auth": "token",
            "serverless-broker/legacy-spec-versions": "true",
        }
    )
    a = reg.broker_definition(b, BASE).attributes
    assert a["protocoloptions"]["authorization"] == [
        {
            "type": "Bearer",
            "authorityuri": f"{BASE}{reg.CP_API}/namespaces/shop/brokers/orders/tokens",
        }
    ]
    assert a["envelopeoptions"]["specversions"] == ["1.0", "0.3", "0.2", "0.1"]


def test_trigger_endpoint_with_its_own_and_the_brokers_delivery() -> None:
    own = trigger(delivery={"retry": 2, "backoffDelay": "PT1S", "format": "json",
                            "deadLetterSink": {"uri": "https://dls.example/"}})  # fmt: skip
    a = reg.trigger_definition(own, broker(), BASE).attributes
    assert a["channel"] == "shop/orders/audit" and a["usage"] == ["producer"]
    assert a["protocoloptions"]["endpoints"] == [{"uri": "https://sub.example/in"}]
    assert a["envelopeoptions"] == {"mode": "structured", "format": "application/cloudevents+json"}
    assert a["delivery"] == {
        "retry": 2, "backoffdelay": "PT1S", "deadlettersink": "https://dls.example/",
        "format": "json",
    }  # fmt: skip
    inherited = reg.trigger_definition(trigger(), broker(), BASE).attributes
    assert inherited["delivery"] == {
        "retry": 10,
        "backoffpolicy": "exponential",
        "backoffdelay": "PT0.2S",
        "format": "binary",
    }
    assert inherited["envelopeoptions"] == {"mode": "binary"}
    orphan = reg.trigger_definition(trigger(), None, BASE).attributes
    assert orphan["delivery"] == {"format": "binary"}


def test_control_plane_endpoint() -> None:
    d = reg.control_plane_definition(BASE, True, NOW)
    assert d.id == "_controlplane" and d.attributes["usage"] == ["subscriber"]
    assert d.attributes["protocoloptions"]["endpoints"] == [
        {"uri": f"{BASE}/apis/eventing.knative.dev/v1"}
    ]
    assert d.attributes["protocoloptions"]["authorization"] == [{"type": "AWSSigV4"}]
    assert (
        "authorization"
        not in reg.control_plane_definition(BASE, False, NOW).attributes["protocoloptions"]
    )


# ---- stamps -------------------------------------------------------------------------------------


def test_first_sight_then_no_change_then_a_change() -> None:
    d = reg.broker_definition(broker(), BASE)
    first = reg.stamp_definition(d, None, NOW)
    assert first.endpoint.epoch == 1
    assert first.endpoint.createdat == first.endpoint.modifiedat == d.created
    assert reg.stamp_definition(d, first, "2030-01-03T00:00:00.000Z") == first
    changed = replace(d, resource=("u1", 2))  # the broker's generation went up
    later = reg.stamp_definition(changed, first, "2030-01-03T00:00:00.000Z")
    assert later.endpoint.epoch == 2 and later.endpoint.modifiedat == "2030-01-03T00:00:00.000Z"
    again = reg.stamp_definition(
        replace(changed, attributes={"x": 1}), later, "2030-01-04T00:00:00.000Z"
    )
    assert again.endpoint.epoch == 3


def test_a_new_message_bumps_the_endpoint_but_stats_do_not() -> None:
    one = reg.broker_definition(broker(), BASE, reg.summarize(seen("t1", "/a"))[("shop", "orders")])
    s1 = reg.stamp_definition(one, None, NOW)
    assert (
        s1.messages["t1"].epoch == 1 and s1.messages["t1"].createdat == "2030-01-01T00:00:00.000Z"
    )
    busier = [replace(o, last_seen=T0 + timedelta(days=3), count=99) for o in seen("t1", "/a")]
    stats = reg.broker_definition(broker(), BASE, reg.summarize(busier)[("shop", "orders")])
    assert reg.stamp_definition(stats, s1, NOW) == s1  # lastseen/eventcount are not updates
    two = reg.broker_definition(
        broker(),
        BASE,
        reg.summarize([*seen("t1", "/a", "/b"), *seen("t2", "/a")])[("shop", "orders")],
    )
    s2 = reg.stamp_definition(two, s1, "2030-01-05T00:00:00.000Z")
    assert s2.endpoint.epoch == 2  # t2 joined the collection
    assert s2.messages["t1"].epoch == 2  # a new source: t1's definition changed
    assert s2.messages["t2"].epoch == 1


def test_a_recreated_resource_keeps_counting_up() -> None:
    d = reg.broker_definition(broker(), BASE)
    s1 = reg.stamp_definition(d, None, NOW)
    recreated = replace(d, created="2030-02-01T00:00:00Z", resource=("u9", 1))
    s2 = reg.stamp_definition(recreated, s1, "2030-02-01T00:00:05.000Z")
    assert s2.endpoint.epoch == 2 and s2.endpoint.createdat == "2030-02-01T00:00:00Z"


def test_stamps_round_trip_through_json() -> None:
    s = reg.stamp_definition(
        reg.broker_definition(broker(), BASE, reg.summarize(seen("t", "/a"))[("shop", "orders")]),
        None,
        NOW,
    )
    assert reg.EndpointStamps.from_json(s.to_json()) == s


# ---- ?inline ------------------------------------------------------------------------------------


E = ("endpoints",)
EM = ("endpoints", "messages")
ALL = {E, EM, (*EM, "meta"), (*EM, "versions")}
INLINE = [
    (None, "root", set()),
    (["endpoints"], "root", {E}),
    (["endpoints.messages"], "root", {E, EM}),
    (["model,endpoints"], "root", {("model",), E}),
    (["*"], "root", ALL),
    ([""], "root", ALL),
    (["endpoints.*"], "root", ALL),
    (["model", "endpoints.messages.meta"], "root", {("model",), E, EM, (*EM, "meta")}),
    (["messages"], "endpoints", {("messages",)}),
    (["messages.*"], "endpoints", {("messages",), ("messages", "meta"), ("messages", "versions")}),
    (["versions"], "messages", {("versions",)}),
]


@pytest.mark.parametrize(("values", "level", "expected"), INLINE)
def test_inline_paths(values: list[str] | None, level: str, expected: set[tuple[str, ...]]) -> None:
    assert parse_inline(values, level) == expected


@pytest.mark.parametrize(
    ("values", "level"),
    [
        (["endpoint"], "root"),
        (["endpoints.foo"], "root"),
        (["*.messages"], "root"),
        (["endpoints*"], "root"),
        (["endpoints"], "endpoints"),  # already in endpoints
        (["model"], "endpoints"),
        (["messages"], "messages"),
        (["capabilities"], "root"),
    ],
)
def test_bad_inline_is_an_error(values: list[str], level: str) -> None:
    with pytest.raises(ValidationError) as err:
        parse_inline(values, level)
    assert err.value.problems[0].field == "inline"


# ---- the API view -------------------------------------------------------------------------------


def entities() -> list[Any]:
    summary = reg.summarize(seen("com.example.created", "/orders", dct="application/json"))
    defs = [
        reg.broker_definition(broker(), BASE, summary[("shop", "orders")]),
        reg.trigger_definition(trigger(), broker(), BASE),
        reg.control_plane_definition(BASE, False, NOW),
    ]
    return [generated_entity(d, reg.stamp_definition(d, None, NOW)) for d in defs]


def test_rendered_root_with_everything_inlined_validates() -> None:
    urls = Urls(BASE)
    root = Root("serverless-broker-test", 4, NOW, NOW, "n", "d")
    doc = render_root(root, entities(), parse_inline(["*", "model"], "root"), urls, model())
    assert_valid_document(doc)
    assert doc["self"] == f"{BASE}/registry" and doc["xid"] == "/"
    assert doc["endpointsurl"] == f"{BASE}/registry/endpoints" and doc["endpointscount"] == 3
    ep = doc["endpoints"]["_broker.shop.orders"]
    assert ep["self"] == f"{BASE}/registry/endpoints/_broker.shop.orders"
    assert ep["xid"] == "/endpoints/_broker.shop.orders"
    assert ep["messagesurl"] == f"{ep['self']}/messages" and ep["messagescount"] == 1
    m = ep["messages"]["com.example.created"]
    assert m["self"] == f"{ep['self']}/messages/com.example.created"
    assert m["meta"]["readonly"] is True and m["versions"]["1"]["isdefault"] is True
    assert (
        m["metaurl"] == m["meta"]["self"]
        and m["meta"]["defaultversionurl"] == m["versions"]["1"]["self"]
    )
    assert_valid_message(m)


def test_without_inline_collections_are_urls_and_counts_only() -> None:
    urls = Urls(BASE)
    doc = render_root(Root("r", 1, NOW, NOW, "n", "d"), entities(), frozenset(), urls, model())
    assert "endpoints" not in doc and "model" not in doc
    for e in entities():
        out = render_endpoint(e, frozenset(), urls)
        assert "messages" not in out
        assert_valid_endpoint(out)
        for m in e.messages:
            rendered = render_message(e.id, m, frozenset(), urls)
            assert "meta" not in rendered and "versions" not in rendered
            assert rendered["versionscount"] == 1
            assert_valid_message(render_version(e.id, m, urls))


# ---- user endpoint writes -----------------------------------------------------------------------

EP = {"usage": ["producer"], "protocol": "HTTP"}
MSG = {"envelope": CLOUDEVENTS, "envelopemetadata": {"type": {"value": "t"}}}


def write(existing: Any, body: dict[str, Any], now: str = NOW) -> dict[str, Any]:
    return writes.write_endpoint(existing, parse_endpoint("ep", body), now, xid="/endpoints/ep")


def test_create_then_update_moves_epoch_and_modifiedat() -> None:
    created = write(None, EP)
    assert (created["epoch"], created["createdat"], created["modifiedat"]) == (1, NOW, NOW)
    later = "2030-01-03T00:00:00.000Z"
    updated = write(created, {**EP, "epoch": 1}, later)
    assert (updated["epoch"], updated["createdat"], updated["modifiedat"]) == (2, NOW, later)


def test_a_stale_epoch_is_refused() -> None:
    created = write(None, EP)
    with pytest.raises(ValidationError) as err:
        write(write(created, EP), {**EP, "epoch": 1})
    assert (
        err.value.problems[0].field == "epoch" and "does not match" in err.value.problems[0].message
    )


def test_epoch_on_create_is_ignored() -> None:
    assert write(None, {**EP, "epoch": 7})["epoch"] == 1


def test_createdat_and_modifiedat_rules() -> None:
    given = write(
        None, {**EP, "createdat": "2020-01-01T00:00:00Z", "modifiedat": "2021-01-01T00:00:00Z"}
    )
    assert (given["createdat"], given["modifiedat"]) == (
        "2020-01-01T00:00:00Z",
        "2021-01-01T00:00:00Z",
    )
    later = "2030-01-03T00:00:00.000Z"
    same = write(given, {**EP, "modifiedat": "2021-01-01T00:00:00Z"}, later)
    assert same["modifiedat"] == later  # the same value as stored means "now"
    assert same["createdat"] == "2020-01-01T00:00:00Z"  # absent: unchanged
    reset = write(given, {**EP, "createdat": None}, later)
    assert reset["createdat"] == later  # null: now


def test_messages_are_created_updated_and_kept() -> None:
    created = write(None, {**EP, "messages": {"a": MSG, "b": MSG}})
    assert {k: v["epoch"] for k, v in created["messages"].items()} == {"a": 1, "b": 1}
    updated = write(created, {**EP, "messages": {"a": {**MSG, "description": "x"}}})
    assert {k: v["epoch"] for k, v in updated["messages"].items()} == {"a": 2, "b": 1}
    kept = write(updated, EP)
    assert set(kept["messages"]) == {"a", "b"}
    with pytest.raises(ValidationError) as err:
        write(kept, {**EP, "messages": {"A": MSG}})
    assert "case-insensitively" in err.value.problems[0].message
    with pytest.raises(ValidationError):
        write(kept, {**EP, "messages": {"a": {**MSG, "epoch": 1}}})


def test_deleting_a_message_is_a_change_of_the_endpoint() -> None:
    doc = write(None, {**EP, "messages": {"a": MSG}})
    after = writes.delete_message(doc, "a", "1", "2030-01-09T00:00:00.000Z", xid="/endpoints/ep")
    assert after["messages"] == {} and after["epoch"] == 2
    assert after["modifiedat"] == "2030-01-09T00:00:00.000Z"
    with pytest.raises(ValidationError):
        writes.delete_message(doc, "a", "2", NOW, xid="/endpoints/ep")


@pytest.mark.parametrize("epoch", ["x", "-1", "٣"])
def test_delete_epoch_must_be_a_number(epoch: str) -> None:
    with pytest.raises(ValidationError):
        writes.check_epoch(epoch, 1, "/endpoints/ep")


def test_stored_user_endpoint_renders_and_validates() -> None:
    doc = write(None, {**EP, "protocoloptions": {"endpoints": [{"uri": "https://x/in"}]},
                       "messages": {"a": {**MSG, "versionid": "v2"}}})  # fmt: skip
    entity = stored_entity("ep", doc)
    assert entity.readonly is False and entity.messages[0].version == "v2"
    out = render_endpoint(entity, frozenset({("messages",), ("messages", "meta")}), Urls(BASE))
    assert out["messages"]["a"]["meta"]["readonly"] is False
    assert out["messages"]["a"]["versionid"] == "v2"
    assert_valid_endpoint(out)
