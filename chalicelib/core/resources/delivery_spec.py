"""Knative's DeliverySpec and Destination: retries, backoff, timeouts, dead-letter sink and
subscriber URIs (``http(s)://`` or ``kafka://host:port/topic``), with a Destination's audience and
CACerts."""

from __future__ import annotations

import base64
import binascii
import re
import ssl
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple
from urllib.parse import urlsplit

from chalicelib.core.delivery.aws_targets import arn_problems, is_arn
from chalicelib.core.errors import Problem
from chalicelib.core.names import name_problems, quote
from chalicelib.core.resources import refs
from chalicelib.core.resources.durations import Duration, DurationError
from chalicelib.core.resources.fields import json_object as _object
from chalicelib.core.resources.fields import unknown_fields as _unknown_fields
from chalicelib.core.resources.meta import choice as _choice

BACKOFF_POLICIES = ("linear", "exponential")
DELIVERY_FORMATS = ("json", "binary")
# SQS caps maxReceiveCount at 1000, and the queue's redrive (the crash safety net) must sit above
# the retry + 1 attempts the delivery function makes, with a few receives to spare for crashes.
SQS_MAX_RECEIVE_COUNT = 1000
CRASH_RECEIVE_MARGIN = 3
MAX_RETRY = SQS_MAX_RECEIVE_COUNT - 1 - CRASH_RECEIVE_MARGIN
# A Destination's audience: the ``aud`` of the token its requests carry (design.md §2.5).
MAX_AUDIENCE_CHARS = 1024
# A trigger's Connections (docs/targets.md): its subscriber's, its dead-letter sink's.
CONNECTION_ANNOTATION = "serverless-broker/connection"
DEAD_LETTER_CONNECTION_ANNOTATION = "serverless-broker/dead-letter-connection"
# A Destination's CACerts: a PEM bundle of CA certificates its TLS also trusts. Stored with the
# trigger (a DynamoDB item holds 400 KB), so bounded.
MAX_CA_CERTS_BYTES = 64 * 1024
MAX_CA_CERTS = 32
_PEM_CERTIFICATE = re.compile(
    r"-----BEGIN CERTIFICATE-----\r?\n([A-Za-z0-9+/=\r\n]+?)-----END CERTIFICATE-----\r?\n?"
)


class Access(NamedTuple):
    """How requests to a destination authenticate, and what its TLS trusts (design.md §2.5)."""

    audience: str | None = None  # each request carries a token for this audience
    connection: str | None = None  # the Connection its requests authenticate with
    ca_certs: str | None = None  # a PEM bundle of CAs trusted besides the system's


@dataclass(frozen=True, slots=True)
class DeliverySpec:
    """Knative's DeliverySpec. ``None`` means the field is absent (no default applies here)."""

    retry: int | None = None
    backoff_policy: str | None = None
    backoff_delay: Duration | None = None
    timeout: Duration | None = None
    retry_after_max: Duration | None = None
    dead_letter_sink_uri: str | None = None
    format: str | None = None
    dead_letter_sink_audience: str | None = None
    dead_letter_sink_ca_certs: str | None = None
    # deadLetterSink.ref to an IntegrationSink (docs/targets.md): its target becomes
    # dead_letter_sink_uri when the trigger's route is loaded (services/routing.py).
    dead_letter_sink_ref: str | None = None

    @property
    def has_dead_letter_sink(self) -> bool:
        return self.dead_letter_sink_uri is not None or self.dead_letter_sink_ref is not None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.dead_letter_sink_ref is not None:
            out["deadLetterSink"] = refs.ref_json(refs.SINK, self.dead_letter_sink_ref)
        elif self.dead_letter_sink_uri is not None:
            out["deadLetterSink"] = destination_json(
                self.dead_letter_sink_uri,
                self.dead_letter_sink_audience,
                self.dead_letter_sink_ca_certs,
            )
        if self.retry is not None:
            out["retry"] = self.retry
        if self.backoff_policy is not None:
            out["backoffPolicy"] = self.backoff_policy
        for key, value in (
            ("backoffDelay", self.backoff_delay),
            ("timeout", self.timeout),
            ("retryAfterMax", self.retry_after_max),
        ):
            if value is not None:
                out[key] = value.text
        if self.format is not None:
            out["format"] = self.format
        return out


# Knative's config-br-defaults, which its webhook writes into a broker without spec.delivery.
DEFAULT_BROKER_DELIVERY = DeliverySpec(
    retry=10, backoff_policy="exponential", backoff_delay=Duration("PT0.2S", 0.2)
)


_DELIVERY_FIELDS = (
    "deadLetterSink",
    "retry",
    "backoffPolicy",
    "backoffDelay",
    "timeout",
    "retryAfterMax",
    "format",
)


def parse_delivery(value: object, path: str, problems: list[Problem]) -> DeliverySpec:
    raw = _object(value, path, problems)
    _unknown_fields(raw, _DELIVERY_FIELDS, path, problems)
    retry = raw.get("retry")
    if retry is not None and (
        isinstance(retry, bool) or not isinstance(retry, int) or not 0 <= retry <= MAX_RETRY
    ):
        problems.append(
            Problem(
                f"{path}.retry",
                f"must be a whole number from 0 to {MAX_RETRY} "
                f"(SQS allows {SQS_MAX_RECEIVE_COUNT} receives), got {quote(retry)}",
            )
        )
        retry = None
    policy = _choice(raw.get("backoffPolicy"), BACKOFF_POLICIES, f"{path}.backoffPolicy", problems)
    delay = _duration(raw.get("backoffDelay"), f"{path}.backoffDelay", problems, allow_zero=True)
    timeout = _duration(raw.get("timeout"), f"{path}.timeout", problems, allow_zero=False)
    retry_after_max = _duration(
        raw.get("retryAfterMax"), f"{path}.retryAfterMax", problems, allow_zero=True
    )
    raw_sink = raw.get("deadLetterSink")
    sink_path = f"{path}.deadLetterSink"
    sink = sink_ref = None
    if isinstance(raw_sink, Mapping) and "ref" in raw_sink:  # an IntegrationSink's
        found = refs.parse_ref(raw_sink, sink_path, None, (refs.SINK,), problems)
        sink_ref = found[1] if found else None
    else:
        sink = parse_destination(raw_sink, sink_path, problems, audience=True, ca_certs=True)
    audience = parse_audience(raw_sink, sink_path, problems)
    ca_certs = parse_ca_certs(raw_sink, sink_path, problems)
    fmt = _choice(raw.get("format"), DELIVERY_FORMATS, f"{path}.format", problems)
    return DeliverySpec(
        retry, policy, delay, timeout, retry_after_max, sink, fmt, audience, ca_certs, sink_ref
    )


def _duration(
    value: object, path: str, problems: list[Problem], *, allow_zero: bool
) -> Duration | None:
    if value is None:
        return None
    if not isinstance(value, str):
        problems.append(Problem(path, "must be an ISO-8601 duration string such as PT0.2S"))
        return None
    try:
        duration = Duration.parse(value)
    except DurationError as err:
        problems.append(Problem(path, str(err)))
        return None
    if duration.seconds < 0 or (duration.seconds == 0 and not allow_zero):
        need = "not be negative" if allow_zero else "be greater than zero"
        problems.append(Problem(path, f"must {need}, got {quote(value)}"))
        return None
    return duration


def parse_destination(
    value: object,
    path: str,
    problems: list[Problem],
    *,
    required: bool = False,
    audience: bool = False,
    ca_certs: bool = False,
) -> str | None:
    """A Knative Destination, of which only the ``uri`` form is supported (no Kubernetes here to
    resolve a ``ref``); ``audience``, ``ca_certs``: the caller reads its audience
    (``parse_audience``), its CACerts (``parse_ca_certs``); other destinations refuse them."""
    if value is None:
        if required:
            problems.append(Problem(path, "is required: give it a uri (an absolute http(s) URL)"))
        return None
    raw = _object(value, path, problems)
    if "ref" in raw:
        problems.append(
            Problem(
                f"{path}.ref",
                "only uri is supported here (there is no Kubernetes to resolve a ref): "
                "put the absolute http(s) URL of the service in uri",
            )
        )
    for unsupported, taken in (("CACerts", ca_certs), ("audience", audience)):
        if unsupported in raw and not taken:
            problems.append(Problem(f"{path}.{unsupported}", "is not supported here"))
    _unknown_fields(raw, ("uri", "ref", "CACerts", "audience"), path, problems)
    uri = raw.get("uri")
    if uri is None:
        if isinstance(value, Mapping) and "ref" not in raw:
            problems.append(Problem(f"{path}.uri", "is required (an absolute http or https URL)"))
        return None
    found = uri_problems(uri, f"{path}.uri")
    problems += found
    return None if found else str(uri)


def parse_audience(value: object, path: str, problems: list[Problem]) -> str | None:
    """A Destination's ``audience`` (Knative): requests to its ``uri`` carry a token for it
    (design.md §2.5). A non-empty string of at most MAX_AUDIENCE_CHARS, for an http(s) uri."""
    if not isinstance(value, Mapping) or value.get("audience") is None:
        return None
    audience = value["audience"]
    if not isinstance(audience, str) or not audience or len(audience) > MAX_AUDIENCE_CHARS:
        problems.append(
            Problem(
                f"{path}.audience",
                f"must be a non-empty string of at most {MAX_AUDIENCE_CHARS} characters",
            )
        )
        return None
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in audience):
        problems.append(Problem(f"{path}.audience", "must not contain control characters"))
        return None
    uri = value.get("uri")
    if isinstance(uri, str) and urlsplit(uri).scheme.lower() not in ("http", "https"):
        problems.append(
            Problem(
                f"{path}.audience",
                "applies to an http(s) uri only (a token travels in an HTTP request)",
            )
        )
        return None
    return audience


def parse_ca_certs(value: object, path: str, problems: list[Problem]) -> str | None:
    """A Destination's ``CACerts`` (Knative): a PEM bundle of CA certificates that its TLS
    trusts besides the system's, for an https uri."""
    if not isinstance(value, Mapping) or value.get("CACerts") is None:
        return None
    found = ca_certs_problems(value["CACerts"], f"{path}.CACerts")
    uri = value.get("uri")
    if not found and isinstance(uri, str) and urlsplit(uri).scheme.lower() != "https":
        found = [Problem(f"{path}.CACerts", "applies to an https uri only (it is trusted for TLS)")]
    problems += found
    return None if found else str(value["CACerts"])


def ca_certs_problems(value: object, path: str) -> list[Problem]:
    """Problems with ``value`` as a PEM bundle: one or more ``CERTIFICATE`` blocks and nothing
    else, each an X.509 certificate, at most MAX_CA_CERTS_BYTES and MAX_CA_CERTS of them."""
    if not isinstance(value, str) or not value.strip():
        return [Problem(path, "must be a PEM bundle of CA certificates")]
    if len(value.encode()) > MAX_CA_CERTS_BYTES:
        return [Problem(path, f"is larger than {MAX_CA_CERTS_BYTES} bytes")]
    blocks = [m.group(1) for m in _PEM_CERTIFICATE.finditer(value)]
    if not blocks or _PEM_CERTIFICATE.sub("", value).strip():
        return [
            Problem(
                path,
                "must hold PEM certificates (-----BEGIN CERTIFICATE----- ... -----END "
                "CERTIFICATE-----) and nothing else",
            )
        ]
    if len(blocks) > MAX_CA_CERTS:
        return [Problem(path, f"holds {len(blocks)} certificates; at most {MAX_CA_CERTS}")]
    return [
        Problem(path, f"certificate {i} of {len(blocks)} is not a valid X.509 certificate")
        for i, block in enumerate(blocks, 1)
        if not _is_certificate(block)
    ]


def _is_certificate(block: str) -> bool:
    try:
        der = base64.b64decode("".join(block.split()), validate=True)
        # Parsed by OpenSSL, as it will be when trusted; a context of its own loads nothing else.
        ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT).load_verify_locations(cadata=der)
    except (binascii.Error, ValueError, ssl.SSLError):
        return False
    return True


def connection_problems(
    annotations: Mapping[str, str], destinations: Mapping[str, tuple[str | None, str | None]]
) -> list[Problem]:
    """A trigger's connection annotations: Connection names, for a destination called over
    HTTP, and not with an ``audience`` on it (both would set its Authorization).
    ``destinations``: each annotation → the uri and the audience of the destination it names."""
    problems: list[Problem] = []
    for annotation, (uri, audience) in destinations.items():
        value = annotations.get(annotation)
        if value is None:
            continue
        path = f"metadata.annotations[{annotation}]"
        problems += name_problems(value, path, what="Connection name")
        if uri and urlsplit(uri).scheme.lower() not in ("http", "https"):
            problems.append(
                Problem(path, "applies to an http(s) destination only (its requests carry it)")
            )
        if audience is not None:
            problems.append(
                Problem(path, "set either a connection or an audience for a destination, not both")
            )
    return problems


def destination_json(uri: str, audience: str | None, ca_certs: str | None = None) -> dict[str, str]:
    out = {"uri": uri}
    if audience is not None:
        out["audience"] = audience
    if ca_certs is not None:
        out["CACerts"] = ca_certs
    return out


def uri_problems(value: object, path: str) -> list[Problem]:
    """Problems with ``value`` as a subscriber or dead-letter sink URL: absolute ``http``/``https``
    with a host, and no userinfo (credentials in a URL end up in status, logs and events)."""
    if not isinstance(value, str) or not value:
        return [Problem(path, "must be a non-empty absolute http or https URL")]
    if any(c.isspace() or ord(c) < 0x20 or ord(c) == 0x7F for c in value):
        return [Problem(path, f"{quote(value)} must not contain spaces or control characters")]
    if is_arn(value):  # an AWS target (docs/targets.md)
        return arn_problems(value, path)
    try:
        parts = urlsplit(value)
        _ = parts.port  # raises ValueError on a bad port
    except ValueError:
        return [Problem(path, f"{quote(value)} is not a valid URL (check the host and port)")]
    if parts.scheme.lower() == "kafka":
        return kafka_uri_problems(value, path)
    if parts.scheme.lower() not in ("http", "https"):
        return [
            Problem(
                path,
                f"{quote(value)} must use http or https (or kafka://host:port/topic, or be the "
                "ARN of an AWS target)",
            )
        ]
    if "@" in parts.netloc:
        return [Problem(path, f"{quote(value)} must not contain user information (user:password@)")]
    if not parts.hostname:
        return [Problem(path, f"{quote(value)} must be absolute, with a host")]
    return []


_KAFKA_TOPIC = re.compile(r"^[A-Za-z0-9._-]{1,249}$")


def kafka_uri_problems(value: str, path: str) -> list[Problem]:
    """``kafka://host[:port]/topic`` (port 9092 when omitted): the subscriber is a Kafka topic,
    written through a producer (design.md §10). No userinfo, query or fragment: credentials do
    not travel in URIs, and a topic name is the whole path."""
    parts = urlsplit(value)
    topic = parts.path[1:]
    if "@" in parts.netloc:
        return [Problem(path, f"{quote(value)} must not contain user information (user:password@)")]
    if not parts.hostname:
        return [
            Problem(path, f"{quote(value)} must name a bootstrap server: kafka://host:port/topic")
        ]
    if parts.query or parts.fragment or not _KAFKA_TOPIC.fullmatch(topic) or topic in (".", ".."):
        return [
            Problem(
                path,
                f"{quote(value)} must be kafka://host:port/topic with a Kafka topic name "
                "(1 to 249 of letters, digits, ._-) and no query or fragment",
            )
        ]
    return []


def kafka_target(uri: str) -> tuple[str, str] | None:
    """``(bootstrap "host:port", topic)`` of a valid ``kafka://`` URI; None for other schemes."""
    parts = urlsplit(uri)
    if parts.scheme.lower() != "kafka" or not parts.hostname:
        return None
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    return f"{host}:{parts.port or 9092}", parts.path[1:]
