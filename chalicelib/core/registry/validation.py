"""Validation of user-defined endpoints (and their inlined messages) for ``PUT
/registry/endpoints/{endpointid}``, by the rules of the Endpoint Registry, Message Definitions
and xRegistry core texts. Every problem of a document is reported at once.

What is stored is the request's own attributes, normalised: ``usage`` as a list (earlier drafts
had a single string), predefined ``protocol`` and ``envelope`` names in their canonical spelling,
timestamps in UTC, and the model's ``required`` defaults filled in. Read-only attributes in a
request are ignored, as the core spec says; unknown extension attributes are kept.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from chalicelib.core.cloudevents.context_attributes import (
    is_absolute_uri,
    is_media_type,
    is_rfc3339,
)
from chalicelib.core.errors import Problem, ValidationError
from chalicelib.core.names import quote
from chalicelib.core.registry.checks import (
    ID_PATTERN,
    Checks,
    check_attribute_names,
    is_uri_reference,
    without_placeholders,
)
from chalicelib.core.registry.protocols import (
    canonical_protocol,
    check_options,
    check_usage,
    protocol_family,
)

GENERATED_PREFIX = "_"
CLOUDEVENTS = "CloudEvents/1.0"
USAGES = ("subscriber", "consumer", "producer")

_ENDPOINT_READ_ONLY = frozenset({"self", "shortself", "xid", "messagesurl", "messagescount"})
_MESSAGE_READ_ONLY = frozenset(
    {
        "self",
        "shortself",
        "xid",
        "metaurl",
        "meta",
        "versionsurl",
        "versionscount",
        "versions",
        "isdefault",
        "ancestorid",
        "firstseen",
        "lastseen",
        "eventcount",
        "sources",
        "datacontenttypes",
    }
)
_SERVER_MANAGED = frozenset({"epoch", "createdat", "modifiedat"})
_SPEC_VERSION = re.compile(r"[^/\s]+(/\S+)?")
_SCHEMA_FORMAT = re.compile(r"[^/\s]+/\S+")
_CE_ATTRIBUTE = re.compile(r"[a-z0-9]+")
_CE_TYPES = (
    "any",
    "binary",
    "boolean",
    "duration",
    "integer",
    "number",
    "string",
    "symbol",
    "timestamp",
    "uri",
    "uri-reference",
    "uritemplate",
)
# message_model.json: the envelopemetadata entries with a restricted "type", their default
# "type" and "required" (specversion, id, type and source are always required).
_CE_TYPE_ENUM = {
    "specversion": ("string",),
    "id": ("uritemplate", "string"),
    "source": ("uritemplate", "string"),
    "subject": ("uritemplate", "string"),
    "time": ("timestamp",),
}
_CE_DEFAULT_TYPE = {
    "source": "uritemplate",
    "subject": "uritemplate",
    "time": "timestamp",
    "dataschema": "uritemplate",
}
_CE_ALWAYS_REQUIRED = ("specversion", "id", "type", "source")


@dataclass(frozen=True)
class TimeRequest:
    """``createdat``/``modifiedat`` as a write request gave them: absent, ``null``, or a value."""

    present: bool = False
    value: str | None = None


@dataclass(frozen=True)
class MessageInput:
    attributes: dict[str, Any]
    epoch: int | None
    createdat: TimeRequest
    modifiedat: TimeRequest


@dataclass(frozen=True)
class EndpointInput:
    attributes: dict[str, Any]
    messages: dict[str, MessageInput] | None  # None: the request did not touch the collection
    epoch: int | None
    createdat: TimeRequest
    modifiedat: TimeRequest


def id_problems(value: str, field: str, what: str) -> list[Problem]:
    if ID_PATTERN.fullmatch(value):
        return []
    return [
        Problem(
            field,
            f"{what} {quote(value)} is malformed: 1-128 characters of A-Z a-z 0-9 - . _ ~ : @, "
            "starting with a letter, digit or '_'",
        )
    ]


def parse_endpoint(endpoint_id: str, body: object) -> EndpointInput:
    """Validate and normalise a user-defined endpoint; raises ValidationError with every
    problem."""
    problems = id_problems(endpoint_id, "endpointid", "endpoint id")
    if not problems and endpoint_id.startswith(GENERATED_PREFIX):
        problems.append(
            Problem(
                "endpointid",
                f"ids starting with {GENERATED_PREFIX!r} are reserved for the endpoints the "
                "broker generates (brokers, triggers, the control plane)",
            )
        )
    if not isinstance(body, Mapping):
        problems.append(Problem("body", "an endpoint must be a JSON object"))
        raise ValidationError(problems)
    c = Checks(problems)
    _same_id(body, "endpointid", endpoint_id, c)
    check_attribute_names(body, c)
    attrs = _own_attributes(body, _ENDPOINT_READ_ONLY | {"endpointid", "messages"})
    _common(attrs, c)
    usage = _usage(attrs, c)
    if attrs.get("channel") == "":
        del attrs["channel"]  # "no value" may be serialised as an empty string
    c.string(attrs, "channel")
    if attrs.get("envelope") is None and attrs.get("protocol") is None:
        c.add("envelope", "an endpoint needs an envelope or a protocol (or both)")
    envelope = _envelope(attrs, c)
    protocol = c.string(attrs, "protocol")
    family = None
    if protocol is not None:
        attrs["protocol"] = canonical_protocol(protocol)
        family = protocol_family(protocol)
    if usage is not None:
        check_usage(usage, family, c)
    options = c.object(attrs, "protocoloptions")
    if options is not None:
        attrs["protocoloptions"] = check_options(
            options, family, usage or [], c.under("protocoloptions")
        )
    messagegroups = attrs.get("messagegroups")
    if messagegroups is not None and not (
        isinstance(messagegroups, list)
        and all(isinstance(m, str) and is_uri_reference(m) for m in messagegroups)
    ):
        c.add("messagegroups", "must be an array of URIs (absolute, or xids starting with /)")
    messages = _messages(body, envelope, attrs.get("protocol"), c)
    epoch = c.integer(body, "epoch", 0)
    created, modified = _time(body, "createdat", c), _time(body, "modifiedat", c)
    if problems:
        raise ValidationError(problems)
    return EndpointInput(attrs, messages, epoch, created, modified)


def parse_message(
    message_id: str,
    body: object,
    endpoint_envelope: str | None,
    endpoint_protocol: str | None,
    c: Checks,
) -> MessageInput:
    """One message definition of an endpoint (problems go to ``c``, rooted at the message)."""
    c.problems.extend(id_problems(message_id, c.at("messageid"), "message id"))
    if not isinstance(body, Mapping):
        c.add("", "a message must be a JSON object")
        return MessageInput({}, None, TimeRequest(), TimeRequest())
    _same_id(body, "messageid", message_id, c)
    check_attribute_names(body, c)
    attrs = _own_attributes(body, _MESSAGE_READ_ONLY | {"messageid"})
    version = c.string(attrs, "versionid")
    if version is not None:
        c.problems.extend(id_problems(version, c.at("versionid"), "version id"))
    _common(attrs, c)
    envelope = _envelope(attrs, c)
    if envelope is not None and endpoint_envelope is not None:
        _envelope_precision(endpoint_envelope, envelope, c)
    metadata = c.object(attrs, "envelopemetadata")
    if envelope is not None and "envelopemetadata" not in attrs:
        c.add("envelopemetadata", "is required when envelope is set")
    if envelope is not None and is_cloudevents(envelope) and metadata is not None:
        attrs["envelopemetadata"] = _ce_metadata(metadata, c.under("envelopemetadata"))
    protocol = c.string(attrs, "protocol")
    if protocol is not None:
        attrs["protocol"] = canonical_protocol(protocol)
        if endpoint_protocol is not None and attrs["protocol"].lower() != endpoint_protocol.lower():
            c.add(
                "protocol", f"every message of an endpoint uses its protocol ({endpoint_protocol})"
            )
        if c.object(attrs, "protocoloptions") is None and "protocoloptions" not in attrs:
            c.add("protocoloptions", "is required when protocol is set")
    _data_schema(attrs, c)
    return MessageInput(
        attrs,
        c.integer(body, "epoch", 0),
        _time(body, "createdat", c),
        _time(body, "modifiedat", c),
    )


# ---- endpoint parts -----------------------------------------------------------------------------


def _same_id(body: Mapping[str, Any], key: str, expected: str, c: Checks) -> None:
    value = body.get(key)
    if value is not None and value != expected:
        c.add(key, f"{quote(value)} does not match the id in the path ({quote(expected)})")


def _own_attributes(body: Mapping[str, Any], ignored: frozenset[str]) -> dict[str, Any]:
    """The attributes a write request sets: ``null`` means absent; read-only and server-managed
    attributes are ignored."""
    skip = ignored | _SERVER_MANAGED
    return {k: v for k, v in body.items() if v is not None and k not in skip}


def _common(attrs: dict[str, Any], c: Checks) -> None:
    c.string(attrs, "name")
    c.string(attrs, "description", non_empty=False)
    c.url(attrs, "documentation")
    c.url(attrs, "icon")
    c.labels(attrs)
    deprecated = c.object(attrs, "deprecated")
    if deprecated is not None:
        d = c.under("deprecated")
        effective = d.timestamp(deprecated, "effective")
        removal = d.timestamp(deprecated, "removal")
        for key, value in (("effective", effective), ("removal", removal)):
            if value is not None:
                deprecated[key] = value
        if effective and removal and removal < effective:
            d.add("removal", "must not be sooner than effective")
        for key in ("alternative", "docs", "documentation"):
            d.url(deprecated, key)
        attrs["deprecated"] = deprecated


def _usage(attrs: dict[str, Any], c: Checks) -> list[str] | None:
    value = attrs.get("usage")
    if value is None:
        c.add("usage", f"is required: an array of {', '.join(USAGES)}")
        return None
    if isinstance(value, str):
        value = [value]  # the earlier Endpoint Registry text had a single string
    if not isinstance(value, list) or not value:
        c.add("usage", f"must be a non-empty array of {', '.join(USAGES)}")
        return None
    bad = [v for v in value if v not in USAGES]
    if bad:
        c.add("usage", f"values must be {', '.join(USAGES)} (case-sensitive), got {quote(bad)}")
        return None
    attrs["usage"] = list(value)
    return list(value)


def _envelope(attrs: dict[str, Any], c: Checks) -> str | None:
    value = c.string(attrs, "envelope")
    if value is None:
        return None
    if not _SPEC_VERSION.fullmatch(value):
        c.add("envelope", f"must have the form SPEC[/VERSION], got {quote(value)}")
        return None
    if value.lower() == CLOUDEVENTS.lower():
        value = attrs["envelope"] = CLOUDEVENTS
    options = c.object(attrs, "envelopeoptions")
    if options is not None and is_cloudevents(value):
        o = c.under("envelopeoptions")
        mode = o.choice(options, "mode", ("binary", "structured"))
        o.media_type(options, "format")
        if "format" in options and mode == "binary":
            o.add("format", 'must not be set when mode is "binary" (it is the structured format)')
    return value


def is_cloudevents(envelope: str) -> bool:
    """CloudEvents/1.0, or a more precise 1.0.x."""
    lowered = envelope.lower()
    return lowered == CLOUDEVENTS.lower() or lowered.startswith(CLOUDEVENTS.lower() + ".")


def _envelope_precision(group: str, message: str, c: Checks) -> None:
    """A message's envelope is at least as precise as its endpoint's and does not expand it."""
    g_spec, _, g_version = group.partition("/")
    m_spec, _, m_version = message.partition("/")
    same_version = not g_version or m_version == g_version or m_version.startswith(g_version + ".")
    if g_spec.lower() != m_spec.lower() or not same_version:
        c.add("envelope", f"must be {group} or more precise, like the endpoint's")


def _messages(
    body: Mapping[str, Any], envelope: str | None, protocol: str | None, c: Checks
) -> dict[str, MessageInput] | None:
    raw = body.get("messages")
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        c.add("messages", "must be a map of message id to message definition")
        return None
    return {
        key: parse_message(key, value, envelope, protocol, c.under(f"messages.{key}"))
        for key, value in raw.items()
    }


def _time(body: Mapping[str, Any], key: str, c: Checks) -> TimeRequest:
    if key not in body:
        return TimeRequest()
    if body[key] is None:
        return TimeRequest(True, None)
    value = c.timestamp(body, key)
    return TimeRequest(value is not None, value)


# ---- message parts ------------------------------------------------------------------------------


def _ce_metadata(metadata: dict[str, Any], c: Checks) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, declaration in metadata.items():
        if not _CE_ATTRIBUTE.fullmatch(name):
            c.add(name, "CloudEvents attribute names are lower-case letters and digits")
        if not isinstance(declaration, Mapping):
            c.add(name, "must be an object with type, value, required")
            continue
        out[name] = _ce_declaration(name, dict(declaration), c.under(name))
    return out


def _ce_declaration(name: str, decl: dict[str, Any], c: Checks) -> dict[str, Any]:
    kind = c.choice(decl, "type", _CE_TYPE_ENUM.get(name, _CE_TYPES))
    required = c.boolean(decl, "required")
    c.string(decl, "description")
    c.url(decl, "specurl")
    if name in _CE_ALWAYS_REQUIRED and required is False:
        c.add("required", f"{name} is always required in a CloudEvent")
    value = decl.get("value")
    if value is not None:
        # Every CloudEvents attribute value has a canonical string form; the document schema
        # expects that form here.
        if not isinstance(value, str):
            c.add("value", f"must be the attribute's canonical string form, got {quote(value)}")
        else:
            _ce_value(name, kind or _CE_DEFAULT_TYPE.get(name, "string"), value, c)
    decl.setdefault("type", _CE_DEFAULT_TYPE.get(name, "string"))
    decl.setdefault("required", name in _CE_ALWAYS_REQUIRED)
    return decl


def _ce_value(name: str, kind: str, value: str, c: Checks) -> None:
    if name == "specversion" and value != "1.0":
        c.add("value", 'specversion is "1.0" for the CloudEvents/1.0 envelope')
    elif name == "datacontenttype" and not is_media_type(value):
        c.add("value", f"must be an RFC 2046 media type, got {quote(value)}")
    elif kind == "timestamp" and not is_rfc3339(value):
        c.add("value", f"must be an RFC 3339 timestamp, got {quote(value)}")
    elif kind == "boolean" and value not in ("true", "false"):
        c.add("value", f'must be "true" or "false", got {quote(value)}')
    elif kind == "integer" and not re.fullmatch(r"-?[0-9]+", value):
        c.add("value", f"must be an integer, got {quote(value)}")
    elif kind == "uri" and not is_absolute_uri(value):
        c.add("value", f"must be an absolute URI, got {quote(value)}")
    elif kind in ("uri-reference", "uritemplate") and not is_uri_reference(
        without_placeholders(value)
    ):
        c.add("value", f"must be a URI reference (template), got {quote(value)}")
    elif kind == "symbol" and not re.fullmatch(r"[A-Za-z0-9_]+", value):
        c.add("value", f"a symbol is letters, digits and '_', got {quote(value)}")


def _data_schema(attrs: dict[str, Any], c: Checks) -> None:
    schema_format = c.string(attrs, "dataschemaformat")
    if schema_format is not None and not _SCHEMA_FORMAT.fullmatch(schema_format):
        c.add("dataschemaformat", f"must have the form NAME/VERSION, got {quote(schema_format)}")
    if "dataschema" in attrs and "dataschemauri" in attrs:
        c.add("dataschemauri", "dataschema and dataschemauri are mutually exclusive")
    if ("dataschema" in attrs or "dataschemauri" in attrs) and schema_format is None:
        c.add("dataschemaformat", "is required with dataschema or dataschemauri")
    c.url(attrs, "dataschemauri")
    xid = c.string(attrs, "dataschemaxid")
    if xid is not None and not (xid.startswith("/") and is_uri_reference(xid)):
        c.add("dataschemaxid", f"must be an xid (starting with /), got {quote(xid)}")
    for key in ("basemessage", "basemessageuri"):
        base = c.url(attrs, key)
        if base is not None and not is_absolute_uri(base) and not base.startswith("/"):
            c.add(key, "a relative reference must be an xid starting with /")
    dct = c.media_type(attrs, "datacontenttype")
    declared = attrs.get("envelopemetadata", {})
    declared = declared.get("datacontenttype") if isinstance(declared, Mapping) else None
    value = declared.get("value") if isinstance(declared, Mapping) else None
    if dct is not None and isinstance(value, str) and _media(dct) != _media(value):
        c.add("datacontenttype", "must equal envelopemetadata.datacontenttype.value")


def _media(value: str) -> str:
    kind, _, params = value.partition(";")
    return kind.strip().lower() + (";" + params.strip() if params.strip() else "")
