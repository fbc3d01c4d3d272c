"""Every validation rule of the Endpoint Registry text (and the core and message rules a PUT of an
endpoint meets), one table row each: the rule's field and message, and the valid neighbour."""

from __future__ import annotations

from typing import Any

import pytest

from chalicelib.core.errors import ValidationError
from chalicelib.core.registry.validation import EndpointInput, parse_endpoint

HTTP = {"usage": ["producer"], "protocol": "HTTP"}
CE = {"usage": ["producer"], "envelope": "CloudEvents/1.0"}


def problems(body: Any, endpoint_id: str = "ep") -> list[tuple[str, str]]:
    try:
        parse_endpoint(endpoint_id, body)
    except ValidationError as exc:
        return [(p.field, p.message) for p in exc.problems]
    return []


def parsed(body: Any, endpoint_id: str = "ep") -> EndpointInput:
    return parse_endpoint(endpoint_id, body)


def options(protocol: str, usage: str = "producer", **opts: Any) -> dict[str, Any]:
    return {"usage": [usage], "protocol": protocol, "protocoloptions": opts}


def with_(base: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {**base, **extra}


# (case id, body, field, part of the message); the endpoint id is "ep" unless the body says
# otherwise through the "_id" key.
INVALID: list[tuple[str, Any, str, str]] = [
    # -- the document and ids (core spec)
    ("not an object", ["x"], "body", "JSON object"),
    ("malformed id", {"_id": "-ep", **HTTP}, "endpointid", "malformed"),
    ("id too long", {"_id": "e" * 129, **HTTP}, "endpointid", "malformed"),
    ("id with a slash", {"_id": "a/b", **HTTP}, "endpointid", "malformed"),
    ("reserved prefix", {"_id": "_mine", **HTTP}, "endpointid", "reserved"),
    ("mismatched id", with_(HTTP, endpointid="other"), "endpointid", "does not match"),
    ("attribute name case", with_(HTTP, myExt=1), "myExt", "attribute names"),
    ("attribute name digit", with_(HTTP, **{"1ext": 1}), "1ext", "attribute names"),
    ("epoch not an integer", with_(HTTP, epoch="3"), "epoch", "integer"),
    ("negative epoch", with_(HTTP, epoch=-1), "epoch", "at least 0"),
    ("createdat not RFC 3339", with_(HTTP, createdat="2024-01-01"), "createdat", "RFC 3339"),
    ("modifiedat not a string", with_(HTTP, modifiedat=5), "modifiedat", "string"),
    ("empty name", with_(HTTP, name=""), "name", "non-empty"),
    ("description not a string", with_(HTTP, description=1), "description", "string"),
    ("documentation not a URL", with_(HTTP, documentation="a b"), "documentation", "URI"),
    ("icon not a URL", with_(HTTP, icon="%zz"), "icon", "URI"),
    ("labels not a map", with_(HTTP, labels=[]), "labels", "object"),
    ("label key", with_(HTTP, labels={"Bad Key": "v"}), "labels.Bad Key", "label keys"),
    ("label value", with_(HTTP, labels={"k": 1}), "labels.k", "strings"),
    # -- deprecated
    ("deprecated not an object", with_(HTTP, deprecated=True), "deprecated", "object"),
    (
        "deprecated effective",
        with_(HTTP, deprecated={"effective": "soon"}),
        "deprecated.effective",
        "RFC 3339",
    ),
    (
        "deprecated removal before effective",
        with_(
            HTTP,
            deprecated={"effective": "2030-01-02T00:00:00Z", "removal": "2030-01-01T00:00:00Z"},
        ),
        "deprecated.removal",
        "sooner",
    ),
    (
        "deprecated alternative",
        with_(HTTP, deprecated={"alternative": "not a url"}),
        "deprecated.alternative",
        "URI",
    ),
    ("deprecated docs", with_(HTTP, deprecated={"docs": 3}), "deprecated.docs", "string"),
    # -- usage
    ("usage missing", {"protocol": "HTTP"}, "usage", "required"),
    ("usage empty", with_(HTTP, usage=[]), "usage", "non-empty array"),
    ("usage not a list", with_(HTTP, usage={"a": 1}), "usage", "non-empty array"),
    ("usage unknown", with_(HTTP, usage=["sender"]), "usage", "subscriber, consumer, producer"),
    ("usage case", with_(HTTP, usage=["Producer"]), "usage", "case-sensitive"),
    ("usage repeated", with_(HTTP, usage=["consumer", "consumer"]), "usage", "repeat"),
    (
        "producer combined",
        with_(HTTP, usage=["producer", "consumer"]),
        "usage",
        '"producer" must not be combined',
    ),
    (
        "all three",
        {"usage": ["subscriber", "consumer", "producer"], "protocol": "MQTT/5.0"},
        "usage",
        '"producer" must not be combined',
    ),
    (
        "subscriber+consumer over HTTP",
        with_(HTTP, usage=["subscriber", "consumer"]),
        "usage",
        "only allowed for MQTT",
    ),
    (
        "subscriber+consumer over KAFKA",
        {"usage": ["subscriber", "consumer"], "protocol": "KAFKA"},
        "usage",
        "only allowed for MQTT",
    ),
    # -- channel
    ("channel not a string", with_(HTTP, channel=3), "channel", "string"),
    # -- envelope / protocol
    (
        "neither envelope nor protocol",
        {"usage": ["producer"]},
        "envelope",
        "envelope or a protocol",
    ),
    ("envelope empty", with_(CE, envelope=""), "envelope", "non-empty"),
    ("envelope form", with_(CE, envelope="Cloud Events/1.0"), "envelope", "SPEC[/VERSION]"),
    ("protocol empty", with_(HTTP, protocol=""), "protocol", "non-empty"),
    ("protocol not a string", with_(HTTP, protocol=1.1), "protocol", "string"),
    (
        "envelopeoptions not a map",
        with_(CE, envelopeoptions="binary"),
        "envelopeoptions",
        "object",
    ),
    (
        "mode unknown",
        with_(CE, envelopeoptions={"mode": "batch"}),
        "envelopeoptions.mode",
        "binary",
    ),
    (
        "mode is case-sensitive",
        with_(CE, envelopeoptions={"mode": "Binary"}),
        "envelopeoptions.mode",
        "case-sensitive",
    ),
    (
        "format with binary mode",
        with_(CE, envelopeoptions={"mode": "binary", "format": "application/json"}),
        "envelopeoptions.format",
        "must not be set",
    ),
    (
        "format not a media type",
        with_(CE, envelopeoptions={"format": "json"}),
        "envelopeoptions.format",
        "media type",
    ),
    ("protocoloptions not a map", with_(HTTP, protocoloptions=[]), "protocoloptions", "object"),
    (
        "messagegroups not URIs",
        with_(HTTP, messagegroups=["a b"]),
        "messagegroups",
        "array of URIs",
    ),
    # -- common protocol options
    (
        "endpoints not a list",
        options("HTTP", endpoints={"uri": "http://x"}),
        "protocoloptions.endpoints",
        "array",
    ),
    (
        "endpoint entry not an object",
        options("HTTP", endpoints=["http://x"]),
        "protocoloptions.endpoints[0]",
        "object",
    ),
    (
        "HTTP uri missing",
        options("HTTP", endpoints=[{}]),
        "protocoloptions.endpoints[0].uri",
        "required",
    ),
    (
        "uri not absolute",
        options("HTTP", endpoints=[{"uri": "/in"}]),
        "protocoloptions.endpoints[0].uri",
        "absolute URI",
    ),
    (
        "HTTP scheme",
        options("HTTP", endpoints=[{"uri": "ftp://x/in"}]),
        "protocoloptions.endpoints[0].uri",
        "http/https",
    ),
    (
        "deployed not a boolean",
        options("HTTP", deployed="yes"),
        "protocoloptions.deployed",
        "true or false",
    ),
    (
        "authorization not a list",
        options("HTTP", authorization="OAuth2"),
        "protocoloptions.authorization",
        "array",
    ),
    (
        "authorization type empty",
        options("HTTP", authorization=[{"type": ""}]),
        "protocoloptions.authorization[0].type",
        "non-empty",
    ),
    (
        "mechanism without SASL",
        options("KAFKA", authorization=[{"type": "OAuth2", "mechanism": "PLAIN"}]),
        "protocoloptions.authorization[0].mechanism",
        "SASL",
    ),
    (
        "authorityuri not a URI",
        options("HTTP", authorization=[{"authorityuri": "a b"}]),
        "protocoloptions.authorization[0].authorityuri",
        "URI",
    ),
    (
        "grant_types empty",
        options("HTTP", authorization=[{"type": "OAuth2", "grant_types": []}]),
        "protocoloptions.authorization[0].grant_types",
        "non-empty",
    ),
    # -- HTTP options
    ("method not a token", options("HTTP", method="GE T"), "protocoloptions.method", "HTTP method"),
    ("headers not a list", options("HTTP", headers={"a": "b"}), "protocoloptions.headers", "array"),
    (
        "header without name",
        options("HTTP", headers=[{"value": "v"}]),
        "protocoloptions.headers[0].name",
        "required",
    ),
    (
        "header empty value",
        options("HTTP", headers=[{"name": "a", "value": ""}]),
        "protocoloptions.headers[0].value",
        "non-empty",
    ),
    (
        "header name",
        options("HTTP", headers=[{"name": "a b", "value": "v"}]),
        "protocoloptions.headers[0].name",
        "header name",
    ),
    ("query values", options("HTTP", query={"a": ""}), "protocoloptions.query.a", "non-empty"),
    ("apikeyin", options("HTTP", apikeyin="cookie"), "protocoloptions.apikeyin", "header"),
    ("plainscheme", options("HTTP", plainscheme="digest"), "protocoloptions.plainscheme", "basic"),
    # -- AMQP options
    (
        "AMQP scheme",
        options("AMQP/1.0", endpoints=[{"uri": "http://x"}]),
        "protocoloptions.endpoints[0].uri",
        "amqp/amqps",
    ),
    (
        "AMQP durable",
        options("AMQP/1.0", durable="true"),
        "protocoloptions.durable",
        "true or false",
    ),
    (
        "AMQP distribution-mode",
        options("AMQP/1.0", "consumer", **{"distribution-mode": "share"}),
        "protocoloptions.distribution-mode",
        "move",
    ),
    (
        "AMQP old spelling",
        options("AMQP", "consumer", distributionmode="copy"),
        "protocoloptions.distributionmode",
        "distribution-mode",
    ),
    (
        "AMQP link-properties values",
        options("AMQP/1.0", **{"link-properties": {"a": 1}}),
        "protocoloptions.link-properties.a",
        "non-empty string",
    ),
    ("AMQP node", options("AMQP/1.0", node=""), "protocoloptions.node", "non-empty"),
    ("AMQP timeout", options("AMQP/1.0", timeout=-1), "protocoloptions.timeout", "at least 0"),
    (
        "AMQP terminus-durability",
        options("AMQP/1.0", **{"terminus-durability": "all"}),
        "protocoloptions.terminus-durability",
        "unsettled-state",
    ),
    # -- MQTT options
    (
        "MQTT scheme",
        options("MQTT/5.0", endpoints=[{"uri": "http://x"}]),
        "protocoloptions.endpoints[0].uri",
        "mqtt/mqtts",
    ),
    (
        "MQTT tcp with a path",
        options("MQTT/3.1.1", endpoints=[{"uri": "tcp://x:1883/topic"}]),
        "protocoloptions.endpoints[0].uri",
        "must not have a path",
    ),
    (
        "MQTT wildcard in the uri path",
        options("MQTT", endpoints=[{"uri": "mqtt://x/a/%23"}, {"uri": "mqtt://x/a/+"}]),
        "protocoloptions.endpoints[1].uri",
        "wildcards",
    ),
    ("MQTT qos", options("MQTT/5.0", qos=3), "protocoloptions.qos", "0, 1, 2"),
    ("MQTT qos type", options("MQTT/3.1.1", qos="1"), "protocoloptions.qos", "0, 1, 2"),
    ("MQTT retain", options("MQTT/5.0", retain=0), "protocoloptions.retain", "true or false"),
    (
        "MQTT cleansession",
        options("MQTT/3.1.1", cleansession="no"),
        "protocoloptions.cleansession",
        "true or false",
    ),
    ("MQTT topic wildcard", options("MQTT/5.0", topic="a/#"), "protocoloptions.topic", "wildcards"),
    (
        "MQTT topic and topicfilter",
        options("MQTT/5.0", "subscriber", topic="a", topicfilter="a/+"),
        "protocoloptions.topicfilter",
        "not both",
    ),
    ("MQTT willtopic", options("MQTT/5.0", willtopic=""), "protocoloptions.willtopic", "non-empty"),
    (
        "MQTT willmessage",
        options("MQTT/5.0", willmessage=1),
        "protocoloptions.willmessage",
        "string",
    ),
    (
        "MQTT5 sessionexpiryinterval",
        options("MQTT/5.0", sessionexpiryinterval=2**32),
        "protocoloptions.sessionexpiryinterval",
        "4294967295",
    ),
    (
        "MQTT5 shared group without topicfilter",
        options("MQTT/5.0", "subscriber", sharedsubscriptiongroup="g"),
        "protocoloptions.sharedsubscriptiongroup",
        "topicfilter",
    ),
    (
        "MQTT5 shared group with $share",
        options("MQTT/5.0", "subscriber", topicfilter="a/+", sharedsubscriptiongroup="$share/g"),
        "protocoloptions.sharedsubscriptiongroup",
        "bare group name",
    ),
    (
        "MQTT5 retainhandling",
        options("MQTT/5.0", "subscriber", retainhandling=3),
        "protocoloptions.retainhandling",
        "0, 1, 2",
    ),
    # -- KAFKA options
    (
        "KAFKA address in uri",
        options("KAFKA", endpoints=[{"uri": "PLAINTEXT://b:9092"}]),
        "protocoloptions.endpoints[0].bootstrap.servers",
        "is required",
    ),
    (
        "KAFKA bootstrap.servers empty",
        options("KAFKA", endpoints=[{"bootstrap.servers": []}]),
        "protocoloptions.endpoints[0].bootstrap.servers",
        "non-empty",
    ),
    ("KAFKA acks", options("KAFKA", acks=2), "protocoloptions.acks", "-1 to 1"),
    ("KAFKA partition", options("KAFKA", partition="0"), "protocoloptions.partition", "integer"),
    ("KAFKA key", options("KAFKA", key=""), "protocoloptions.key", "non-empty"),
    ("KAFKA topic", options("KAFKA", topic=""), "protocoloptions.topic", "non-empty"),
    ("KAFKA headers", options("KAFKA", headers=[]), "protocoloptions.headers", "object"),
    (
        "KAFKA consumer without group",
        options("KAFKA", "consumer", topic="t"),
        "protocoloptions.consumergroup",
        "must declare",
    ),
    (
        "KAFKA subscriber with group",
        options("KAFKA", "subscriber", consumergroup="g"),
        "protocoloptions.consumergroup",
        "must not declare",
    ),
    (
        "KAFKA producer with consumer options",
        options("KAFKA", autooffsetreset="earliest"),
        "protocoloptions.autooffsetreset",
        "only applies to consumer",
    ),
    (
        "KAFKA autooffsetreset",
        options("KAFKA", "consumer", consumergroup="g", autooffsetreset="first"),
        "protocoloptions.autooffsetreset",
        "earliest",
    ),
    # -- NATS options
    (
        "NATS scheme",
        options("NATS", endpoints=[{"uri": "http://x:4222"}]),
        "protocoloptions.endpoints[0].uri",
        "nats/tls/ws",
    ),
    (
        "NATS port",
        options("NATS", endpoints=[{"uri": "nats://x"}]),
        "protocoloptions.endpoints[0].uri",
        "port",
    ),
    (
        "NATS subject wildcard",
        options("NATS", subject="a.*"),
        "protocoloptions.subject",
        "wildcards",
    ),
    (
        "NATS queuegroup without subjectfilter",
        options("NATS", "subscriber", queuegroup="q"),
        "protocoloptions.queuegroup",
        "subjectfilter",
    ),
    (
        "NATS subject and subjectfilter",
        options("NATS", "subscriber", subject="a", subjectfilter="a.>"),
        "protocoloptions.subjectfilter",
        "not both",
    ),
]


@pytest.mark.parametrize(
    ("body", "field", "message"), [c[1:] for c in INVALID], ids=[c[0] for c in INVALID]
)
def test_each_rule(body: Any, field: str, message: str) -> None:
    endpoint_id = "ep"
    if isinstance(body, dict) and "_id" in body:
        body = dict(body)
        endpoint_id = body.pop("_id")
    found = problems(body, endpoint_id)
    assert any(f == field and message in m for f, m in found), found


VALID: list[tuple[str, dict[str, Any]]] = [
    ("http", options("HTTP", endpoints=[{"uri": "https://x/in"}], method="PUT")),
    ("any HTTP version", options("HTTP/1.1", endpoints=[{"uri": "http://x"}])),
    ("envelope only", CE),
    ("usage as the earlier string form", {"usage": "consumer", "protocol": "HTTP"}),
    ("subscriber+consumer over MQTT", options("MQTT/3.1.1", "subscriber", topicfilter="a/#")),
    ("subscriber+consumer over AMQP", {"usage": ["subscriber", "consumer"], "protocol": "AMQP"}),
    ("subscriber+consumer over NATS", {"usage": ["consumer", "subscriber"], "protocol": "NATS"}),
    ("templated uri", options("MQTT/5.0", endpoints=[{"uri": "mqtts://{host}:8883/t/{id}"}])),
    ("mqtt over wss without a path", options("MQTT/5.0", endpoints=[{"uri": "wss://x/"}])),
    ("kafka consumer", options("KAFKA", "consumer", consumergroup="g", autooffsetreset="latest")),
    ("kafka bootstrap", options("KAFKA", endpoints=[{"bootstrap.servers": ["a:9092", "b:9092"]}])),
    ("nats", options("NATS", endpoints=[{"uri": "tls://x:4222"}], subject="a.b")),
    ("structured", with_(CE, envelopeoptions={"mode": "structured", "format": "application/json"})),
    ("any mode", with_(CE, envelopeoptions={"format": "application/cloudevents+json"})),
    ("unknown envelope options are kept", with_(CE, envelopeoptions={"x-vendor": [1]})),
    ("another envelope", {"usage": ["producer"], "envelope": "MyFormat"}),
    ("unknown protocol", options("BunnyMQ/0.9.1", endpoints=[{"address": "bunny://x"}], a=1)),
    ("deprecated", with_(HTTP, deprecated={"removal": "2030-01-01T00:00:00+02:00"})),
    ("absolute messagegroups", with_(HTTP, messagegroups=["https://r.example/messagegroups/g"])),
    ("xid messagegroups", with_(HTTP, messagegroups=["/messagegroups/g"])),
    ("null means absent", with_(HTTP, channel=None, description=None)),
]


@pytest.mark.parametrize("body", [c[1] for c in VALID], ids=[c[0] for c in VALID])
def test_valid_endpoints(body: dict[str, Any]) -> None:
    assert problems(body) == []


def test_every_problem_is_reported_at_once() -> None:
    body = {
        "usage": ["producer", "consumer"],
        "protocol": "HTTP",
        "envelope": "CloudEvents/1.0",
        "envelopeoptions": {"mode": "binary", "format": "application/json"},
        "protocoloptions": {"endpoints": [{"uri": "mqtt://x"}], "method": ""},
        "labels": {"A": "b"},
    }
    fields = {f for f, _ in problems(body, "_reserved")}
    assert fields == {
        "endpointid",
        "usage",
        "envelopeoptions.format",
        "protocoloptions.endpoints[0].uri",
        "protocoloptions.method",
        "labels.A",
    }


# ---- normalisation, defaults, extensions --------------------------------------------------------


def test_unknown_extension_attributes_are_stored_and_read_only_ones_ignored() -> None:
    got = parsed(
        with_(
            HTTP,
            myextension={"any": ["json", 1]},
            self="https://elsewhere/x",
            xid="/other",
            messagesurl="x",
            messagescount=9,
        )
    )
    assert got.attributes["myextension"] == {"any": ["json", 1]}
    assert not {"self", "xid", "messagesurl", "messagescount"} & set(got.attributes)


def test_usage_string_becomes_a_list_and_names_are_canonical() -> None:
    got = parsed({"usage": "producer", "protocol": "mqtt", "envelope": "cloudevents/1.0"})
    assert got.attributes["usage"] == ["producer"]
    assert got.attributes["protocol"] == "MQTT/5.0"
    assert got.attributes["envelope"] == "CloudEvents/1.0"


@pytest.mark.parametrize(
    ("protocol", "defaults"),
    [
        (
            "http",
            {"deployed": True, "method": "POST", "apikeyin": "header", "plainscheme": "basic"},
        ),
        ("AMQP", {"deployed": True, "durable": False, "distribution-mode": "move"}),
        ("MQTT/3.1.1", {"deployed": True, "qos": 0, "retain": False, "cleansession": True}),
        ("MQTT", {"deployed": True, "qos": 0, "retain": False}),
        ("Kafka", {"deployed": True, "acks": 1}),
        ("NATS", {"deployed": True}),
    ],
)
def test_model_defaults_fill_absent_options(protocol: str, defaults: dict[str, Any]) -> None:
    got = parsed(options(protocol))
    assert defaults.items() <= got.attributes["protocoloptions"].items()


def test_given_options_win_over_defaults_and_abstract_endpoints_stay_abstract() -> None:
    got = parsed(options("HTTP", method="PUT", deployed=False))
    assert got.attributes["protocoloptions"]["method"] == "PUT"
    assert got.attributes["protocoloptions"]["deployed"] is False
    assert "protocoloptions" not in parsed(HTTP).attributes


def test_empty_channel_means_no_channel() -> None:
    assert "channel" not in parsed(with_(HTTP, channel="")).attributes


def test_single_authorization_object_becomes_a_list() -> None:
    got = parsed(options("HTTP", authorization={"type": "OAuth2"}))
    assert got.attributes["protocoloptions"]["authorization"] == [{"type": "OAuth2"}]


def test_timestamps_are_normalised_to_utc() -> None:
    got = parsed(with_(HTTP, createdat="2030-01-01T02:00:00+02:00", modifiedat=None))
    assert (got.createdat.present, got.createdat.value) == (True, "2030-01-01T00:00:00Z")
    assert (got.modifiedat.present, got.modifiedat.value) == (True, None)
    assert not parsed(HTTP).createdat.present


# ---- messages inside an endpoint ---------------------------------------------------------------

MSG = {
    "envelope": "CloudEvents/1.0",
    "envelopemetadata": {"type": {"value": "com.example.created"}},
}


def message_problems(message: Any, mid: str = "m1", **endpoint: Any) -> list[tuple[str, str]]:
    return problems({**CE, **endpoint, "messages": {mid: message}})


MESSAGE_INVALID: list[tuple[str, Any, str, str]] = [
    ("not an object", 3, "messages.m1", "JSON object"),
    ("malformed id", MSG, "messages.m 1.messageid", "malformed"),
    ("mismatched id", {**MSG, "messageid": "m2"}, "messages.m1.messageid", "does not match"),
    (
        "envelopemetadata required",
        {"envelope": "CloudEvents/1.0"},
        "messages.m1.envelopemetadata",
        "required",
    ),
    (
        "envelope not as precise",
        {**MSG, "envelope": "CloudEvents"},
        "messages.m1.envelope",
        "more precise",
    ),
    ("other envelope", {**MSG, "envelope": "Other/1.0"}, "messages.m1.envelope", "more precise"),
    (
        "CE attribute name",
        {**MSG, "envelopemetadata": {"Type": {}}},
        "messages.m1.envelopemetadata.Type",
        "lower-case",
    ),
    (
        "CE declaration not an object",
        {**MSG, "envelopemetadata": {"type": "x"}},
        "messages.m1.envelopemetadata.type",
        "object",
    ),
    (
        "CE required attribute made optional",
        {**MSG, "envelopemetadata": {"source": {"required": False}}},
        "messages.m1.envelopemetadata.source.required",
        "always required",
    ),
    (
        "CE specversion value",
        {**MSG, "envelopemetadata": {"specversion": {"value": "0.3"}}},
        "messages.m1.envelopemetadata.specversion.value",
        '"1.0"',
    ),
    (
        "CE type of id",
        {**MSG, "envelopemetadata": {"id": {"type": "integer"}}},
        "messages.m1.envelopemetadata.id.type",
        "uritemplate",
    ),
    (
        "CE unknown type",
        {**MSG, "envelopemetadata": {"ext": {"type": "float"}}},
        "messages.m1.envelopemetadata.ext.type",
        "timestamp",
    ),
    (
        "CE value not a string",
        {**MSG, "envelopemetadata": {"ext": {"type": "integer", "value": 5}}},
        "messages.m1.envelopemetadata.ext.value",
        "canonical string",
    ),
    (
        "CE integer value",
        {**MSG, "envelopemetadata": {"ext": {"type": "integer", "value": "five"}}},
        "messages.m1.envelopemetadata.ext.value",
        "integer",
    ),
    (
        "CE time value",
        {**MSG, "envelopemetadata": {"time": {"value": "now"}}},
        "messages.m1.envelopemetadata.time.value",
        "RFC 3339",
    ),
    (
        "CE datacontenttype value",
        {**MSG, "envelopemetadata": {"datacontenttype": {"value": "json"}}},
        "messages.m1.envelopemetadata.datacontenttype.value",
        "media type",
    ),
    (
        "dataschema and dataschemauri",
        {
            **MSG,
            "dataschemaformat": "JsonSchema/draft-07",
            "dataschema": {},
            "dataschemauri": "https://s",
        },
        "messages.m1.dataschemauri",
        "mutually exclusive",
    ),
    (
        "dataschema without format",
        {**MSG, "dataschema": {}},
        "messages.m1.dataschemaformat",
        "required",
    ),
    (
        "dataschemaformat form",
        {**MSG, "dataschemaformat": "JsonSchema", "dataschemauri": "https://s"},
        "messages.m1.dataschemaformat",
        "NAME/VERSION",
    ),
    (
        "dataschemaxid",
        {**MSG, "dataschemaxid": "schemagroups/g"},
        "messages.m1.dataschemaxid",
        "xid",
    ),
    (
        "datacontenttype differs from the envelope's",
        {
            **MSG,
            "datacontenttype": "application/json",
            "envelopemetadata": {"datacontenttype": {"value": "text/plain"}},
        },
        "messages.m1.datacontenttype",
        "must equal",
    ),
    ("basemessage relative", {**MSG, "basemessage": "other"}, "messages.m1.basemessage", "xid"),
    (
        "protocol without options",
        {**MSG, "protocol": "HTTP"},
        "messages.m1.protocoloptions",
        "required",
    ),
    ("read-only epoch type", {**MSG, "epoch": "2"}, "messages.m1.epoch", "integer"),
]


@pytest.mark.parametrize(
    ("message", "field", "text"),
    [c[1:] for c in MESSAGE_INVALID],
    ids=[c[0] for c in MESSAGE_INVALID],
)
def test_each_message_rule(message: Any, field: str, text: str) -> None:
    mid = "m 1" if "malformed" in field or field.startswith("messages.m 1") else "m1"
    found = message_problems(message, mid)
    assert any(f == field and text in m for f, m in found), found


def test_message_protocol_must_be_the_endpoints() -> None:
    found = problems(
        {
            "usage": ["producer"],
            "protocol": "HTTP",
            "messages": {"m": {"protocol": "KAFKA", "protocoloptions": {}}},
        }
    )
    assert ("messages.m.protocol", "every message of an endpoint uses its protocol (HTTP)") in found


def test_message_defaults_and_read_only_attributes() -> None:
    got = parsed(
        {
            **CE,
            "messages": {
                "m1": {
                    **MSG,
                    "envelope": "CloudEvents/1.0.2",  # more precise than the endpoint's: fine
                    "envelopemetadata": {
                        "type": {"value": "com.example.created"},
                        "source": {"value": "/orders/{tenant}"},
                        "subject": {},
                        "myext": {"type": "boolean", "value": "true"},
                    },
                    "self": "x",
                    "firstseen": "x",
                    "myextension": 1,
                }
            },
        }
    )
    assert got.messages is not None
    m = got.messages["m1"].attributes
    assert m["envelopemetadata"] == {
        "type": {"value": "com.example.created", "type": "string", "required": True},
        "source": {"value": "/orders/{tenant}", "type": "uritemplate", "required": True},
        "subject": {"type": "uritemplate", "required": False},
        "myext": {"type": "boolean", "value": "true", "required": False},
    }
    assert m["myextension"] == 1 and "self" not in m and "firstseen" not in m
