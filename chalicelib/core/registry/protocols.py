"""Protocol rules of the Endpoint Registry (endpoint spec 1.0-rc4 "Protocol Options", and the
address rules of each protocol): which protocol family a ``protocol`` value names, the type of
every option, the role rules, and the defaults the endpoint model declares (``required`` with a
``default``), which the server writes into a stored endpoint as xRegistry servers do."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit

from chalicelib.core.cloudevents.context_attributes import is_absolute_uri
from chalicelib.core.names import quote
from chalicelib.core.registry.checks import TOKEN_PATTERN, Checks, without_placeholders

HTTP = "HTTP"
AMQP = "AMQP/1.0"
MQTT3 = "MQTT/3.1.1"
MQTT5 = "MQTT/5.0"
KAFKA = "KAFKA"
NATS = "NATS"

# Shorthands the spec names, compared case-insensitively, and their canonical spelling (the one
# the endpoint document schema switches on).
_CANONICAL = {
    "http": HTTP,
    "amqp": AMQP,
    "amqp/1.0": AMQP,
    "mqtt": MQTT5,
    "mqtt/5": MQTT5,
    "mqtt/5.0": MQTT5,
    "mqtt/3.1.1": MQTT3,
    "kafka": KAFKA,
    "nats": NATS,
}

# endpoint_model.json: protocol options that are "required" with a "default".
DEFAULTS: Mapping[str, Mapping[str, Any]] = {
    HTTP: {"deployed": True, "method": "POST", "apikeyin": "header", "plainscheme": "basic"},
    AMQP: {"deployed": True, "durable": False, "distribution-mode": "move"},
    MQTT3: {"deployed": True, "qos": 0, "retain": False, "cleansession": True},
    MQTT5: {"deployed": True, "qos": 0, "retain": False},
    KAFKA: {
        "deployed": True,
        "acks": 1,
        "keyserializer": "org.apache.kafka.common.serialization.StringSerializer",
        "valueserializer": "org.apache.kafka.common.serialization.StringSerializer",
    },
    NATS: {"deployed": True},
}

# Earlier drafts of the Endpoint Registry text spelled these AMQP options without the hyphen.
_RENAMED = {
    "linkproperties": "link-properties",
    "connectionproperties": "connection-properties",
    "distributionmode": "distribution-mode",
}

_SCHEMES = {
    HTTP: ("http", "https"),
    AMQP: ("amqp", "amqps"),
    MQTT3: ("mqtt", "mqtts", "tcp", "ssl", "wss"),
    MQTT5: ("mqtt", "mqtts", "tcp", "ssl", "wss"),
    NATS: ("nats", "tls", "ws"),
}


def canonical_protocol(value: str) -> str:
    return _CANONICAL.get(value.lower(), value)


def protocol_family(value: str) -> str | None:
    """The predefined protocol ``value`` names (any HTTP version is HTTP), or None."""
    canonical = canonical_protocol(value)
    if canonical in DEFAULTS:
        return canonical
    name, _, _version = value.partition("/")
    return {"http": HTTP, "kafka": KAFKA, "nats": NATS}.get(name.lower())


def check_usage(usage: Sequence[str], family: str | None, checks: Checks) -> None:
    """The role combinations the endpoint spec allows."""
    roles = set(usage)
    if len(roles) != len(usage):
        checks.add("usage", "must not repeat a value")
    if len(roles) <= 1:
        return
    if "producer" in roles:
        checks.add("usage", '"producer" must not be combined with another usage')
    elif roles == {"subscriber", "consumer"}:
        if family not in (AMQP, MQTT3, MQTT5, NATS):
            checks.add(
                "usage",
                '["subscriber", "consumer"] is only allowed for MQTT/3.1.1, MQTT/5.0, AMQP/1.0 '
                "and NATS endpoints; declare HTTP and KAFKA roles as separate endpoints sharing "
                "a channel",
            )
    else:
        checks.add("usage", "must declare exactly one usage (or subscriber+consumer)")


def check_options(
    options: dict[str, Any], family: str | None, usage: Sequence[str], checks: Checks
) -> dict[str, Any]:
    """Validate ``protocoloptions`` (``checks`` is rooted at it); returns them with the model's
    defaults added for a predefined protocol."""
    for key in options:
        if not key:
            checks.add("", "option names must be non-empty strings")
    _addresses(options, family, checks)
    _authorization(options, checks)
    checks.boolean(options, "deployed")
    if family in _OPTION_CHECKS:
        _OPTION_CHECKS[family](options, set(usage), checks)
    if family is None:
        return options
    return {**options, **{k: v for k, v in DEFAULTS[family].items() if k not in options}}


def _addresses(options: Mapping[str, Any], family: str | None, checks: Checks) -> None:
    entries = options.get("endpoints")
    if entries is None:
        return
    for at, entry in checks.objects(entries, "endpoints"):
        if family == KAFKA:
            if entry.get("bootstrap.servers") is None:
                at.add(
                    "bootstrap.servers",
                    "is required: KAFKA endpoints list their bootstrap servers here (not in uri)",
                )
            else:
                at.string_list(entry, "bootstrap.servers", non_empty=True)
            continue
        uri = entry.get("uri")
        if uri is None:
            if family is not None:
                at.add("uri", f"is required for {family} endpoints")
            continue
        if not isinstance(uri, str) or not is_absolute_uri(without_placeholders(uri)):
            at.add("uri", f"must be an absolute URI, got {quote(uri)}")
            continue
        if family is not None:
            _address_rules(without_placeholders(uri), family, at)


def _address_rules(uri: str, family: str, at: Checks) -> None:
    parts = urlsplit(uri)
    scheme = parts.scheme.lower()
    allowed = _SCHEMES[family]
    if scheme not in allowed:
        at.add("uri", f"{family} endpoints use the {'/'.join(allowed)} schemes, got {quote(uri)}")
        return
    if family in (MQTT3, MQTT5):
        if scheme in ("tcp", "ssl", "wss") and parts.path not in ("", "/"):
            at.add("uri", f"the {scheme} scheme must not have a path (put the topic in 'topic')")
        elif any(c in parts.path for c in "+#"):
            at.add("uri", "the path is an MQTT topic name and must not hold the + or # wildcards")
    if family == NATS and _port(uri) is None:
        at.add("uri", "NATS endpoint URIs must include a port, e.g. nats://host:4222")


def _port(uri: str) -> int | None:
    try:
        return urlsplit(uri).port
    except ValueError:
        return None


def _authorization(options: dict[str, Any], checks: Checks) -> None:
    value = options.get("authorization")
    if value is None:
        return
    if isinstance(value, Mapping):
        # Earlier drafts had a single object; rc4 has a list of options to choose from.
        value = options["authorization"] = [dict(value)]
    for at, item in checks.objects(value, "authorization"):
        kind = at.string(item, "type")
        if at.string(item, "mechanism") is not None and kind != "SASL":
            at.add("mechanism", 'is only used when type is "SASL"')
        at.url(item, "resourceuri")
        at.url(item, "authorityuri")
        at.string_list(item, "grant_types", non_empty=True)


# ---- per protocol -------------------------------------------------------------------------------


def _http(options: Mapping[str, Any], usage: set[str], checks: Checks) -> None:
    method = checks.string(options, "method")
    if method is not None and not TOKEN_PATTERN.fullmatch(method):
        checks.add("method", f"must be an HTTP method name, got {quote(method)}")
    headers = options.get("headers")
    if headers is not None:
        if not isinstance(headers, list):
            checks.add("headers", "must be an array of {name, value} objects")
        else:
            for i, header in enumerate(headers):
                at = checks.under(f"headers[{i}]")
                if not isinstance(header, Mapping):
                    at.add("", "must be an object with name and value")
                    continue
                name = at.string(header, "name")
                if header.get("name") is None:
                    at.add("name", "is required")
                elif name is not None and not TOKEN_PATTERN.fullmatch(without_placeholders(name)):
                    at.add("name", f"must be an HTTP header name, got {quote(name)}")
                if header.get("value") is None:
                    at.add("value", "is required")
                at.string(header, "value")
    checks.string_map(options, "query")
    checks.string(options, "apikeyname")
    checks.choice(options, "apikeyin", ("header", "query"))
    checks.choice(options, "plainscheme", ("basic", "form", "query"))
    checks.string(options, "plainusernamefield")
    checks.string(options, "plainpasswordfield")


def _amqp(options: Mapping[str, Any], usage: set[str], checks: Checks) -> None:
    for old, new in _RENAMED.items():
        if old in options:
            checks.add(old, f'is spelled "{new}" in the endpoint spec 1.0-rc4')
    checks.string(options, "node")
    checks.boolean(options, "durable")
    checks.string_map(options, "link-properties")
    checks.string_map(options, "connection-properties")
    checks.choice(options, "distribution-mode", ("move", "copy"))
    checks.string_list(options, "connection-capabilities")
    checks.string_list(options, "node-capabilities")
    checks.object(options, "source-filters")
    checks.boolean(options, "dynamic")
    checks.choice(options, "terminus-durability", ("none", "configuration", "unsettled-state"))
    checks.choice(
        options, "expiry-policy", ("link-detach", "session-end", "connection-close", "never")
    )
    checks.integer(options, "timeout", 0)
    checks.choice(options, "sender-settle-mode", ("unsettled", "settled", "mixed"))
    checks.choice(options, "receiver-settle-mode", ("first", "second"))


def _mqtt(options: Mapping[str, Any], usage: set[str], checks: Checks, *, v5: bool) -> None:
    topic = checks.string(options, "topic")
    if topic is not None and any(c in topic for c in "+#"):
        checks.add("topic", "is a concrete topic name: the + and # wildcards go in topicfilter")
    topicfilter = checks.string(options, "topicfilter")
    if "topic" in options and "topicfilter" in options:
        checks.add("topicfilter", "an endpoint declares topic or topicfilter, not both")
    checks.choice(options, "qos", (0, 1, 2))
    checks.boolean(options, "retain")
    checks.string(options, "willtopic")
    checks.string(options, "willmessage")
    if not v5:
        checks.boolean(options, "cleansession")
        return
    checks.boolean(options, "cleanstart")
    checks.integer(options, "sessionexpiryinterval", 0, 4294967295)
    group = checks.string(options, "sharedsubscriptiongroup")
    if group is not None:
        if topicfilter is None:
            checks.add("sharedsubscriptiongroup", "is only allowed together with topicfilter")
        if group.startswith("$share/") or "/" in group:
            checks.add("sharedsubscriptiongroup", "is the bare group name: no $share/ and no '/'")
    checks.boolean(options, "nolocal")
    checks.boolean(options, "retainaspublished")
    checks.choice(options, "retainhandling", (0, 1, 2))


def _kafka(options: Mapping[str, Any], usage: set[str], checks: Checks) -> None:
    checks.string(options, "topic")
    checks.integer(options, "acks", -1, 1)
    checks.string(options, "key")
    checks.integer(options, "partition")
    group = checks.string(options, "consumergroup")
    checks.string_map(options, "headers")
    checks.string(options, "keyserializer")
    checks.string(options, "valueserializer")
    checks.choice(options, "autooffsetreset", ("earliest", "latest", "none"))
    checks.boolean(options, "enableautocommit")
    if "subscriber" in usage and "consumergroup" in options:
        checks.add("consumergroup", "a subscriber KAFKA endpoint must not declare consumergroup")
    if "consumer" in usage and group is None and "consumergroup" not in options:
        checks.add("consumergroup", "a consumer KAFKA endpoint must declare its consumer group")
    if usage & {"producer", "subscriber"}:
        for key in ("autooffsetreset", "enableautocommit"):
            if key in options:
                checks.add(key, "only applies to consumer KAFKA endpoints")


def _nats(options: Mapping[str, Any], usage: set[str], checks: Checks) -> None:
    subject = checks.string(options, "subject")
    if subject is not None and any(t in ("*", ">") for t in subject.split(".")):
        checks.add("subject", "is a concrete subject: the * and > wildcards go in subjectfilter")
    subjectfilter = checks.string(options, "subjectfilter")
    if "subject" in options and "subjectfilter" in options:
        checks.add("subjectfilter", "an endpoint declares subject or subjectfilter, not both")
    if checks.string(options, "queuegroup") is not None and subjectfilter is None:
        checks.add("queuegroup", "is only allowed together with subjectfilter")


_OPTION_CHECKS = {
    HTTP: _http,
    AMQP: _amqp,
    MQTT3: lambda o, u, c: _mqtt(o, u, c, v5=False),
    MQTT5: lambda o, u, c: _mqtt(o, u, c, v5=True),
    KAFKA: _kafka,
    NATS: _nats,
}
