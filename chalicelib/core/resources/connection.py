"""The Connection kind (``serverless-broker.dev/v1alpha1``; docs/targets.md, Connections): how
delivery authenticates to a third-party HTTP API, as an EventBridge connection does. ``spec.auth``
is exactly one of ``apiKey``, ``basic``, ``oauthClientCredentials`` or ``awsSigV4``; the secrets
themselves stay in Secrets Manager (``secretRef.arn``) and are never part of the resource. A
trigger uses one with the annotation ``serverless-broker/connection`` (its subscriber) or
``serverless-broker/dead-letter-connection`` (its dead-letter sink)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from urllib.parse import urlsplit

from chalicelib.core.errors import Problem, ValidationError
from chalicelib.core.names import quote
from chalicelib.core.resources import meta
from chalicelib.core.resources.conditions import ConditionSet, previous_conditions
from chalicelib.core.resources.delivery_spec import uri_problems
from chalicelib.core.resources.fields import json_object as _object
from chalicelib.core.resources.fields import unknown_fields as _unknown_fields
from chalicelib.core.resources.kind import ResourceKind

API_VERSION = "serverless-broker.dev/v1alpha1"
KIND = "Connection"
PLURAL = "connections"
AUTH_READY = "AuthReady"
CONNECTION_CONDITIONS = ConditionSet((AUTH_READY,))
AUTH_TYPES = ("apiKey", "basic", "oauthClientCredentials", "awsSigV4")

MAX_ARN_CHARS = 2048  # Secrets Manager's own limit on a SecretId
MAX_TEXT_CHARS = 1024  # clientId, scope, tokenUrl
_SECRET_ARN = re.compile(
    r"^arn:[a-z-]+:secretsmanager:[a-z0-9-]+:\d{12}:secret:([A-Za-z0-9/_+=.@-]+)$"
)
_TOKEN = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,256}$")  # an HTTP field name (RFC 9110)
_AWS_NAME = re.compile(r"^[a-z0-9-]{1,64}$")
# Headers the delivery request owns (framing, CloudEvents, tracing, the reply preference): an
# API key may not replace them.
RESERVED_HEADERS = frozenset(
    {
        "host",
        "content-length",
        "content-type",
        "transfer-encoding",
        "connection",
        "traceparent",
        "tracestate",
        "prefer",
        "kn-namespace",
    }
)


@dataclass(frozen=True, slots=True)
class ApiKey:
    header: str
    secret_arn: str  # the secret string is the key


@dataclass(frozen=True, slots=True)
class Basic:
    secret_arn: str  # JSON {"username", "password"}


@dataclass(frozen=True, slots=True)
class OAuthClientCredentials:
    token_url: str
    client_id: str
    client_secret_arn: str  # the secret string is the client secret
    scope: str | None = None


@dataclass(frozen=True, slots=True)
class AwsSigV4:
    service: str
    region: str


Auth = ApiKey | Basic | OAuthClientCredentials | AwsSigV4


@dataclass(frozen=True, slots=True)
class Connection:
    namespace: str
    name: str
    # Set at admission (meta.admitted); a parsed body has none yet.
    uid: str = field(default="", kw_only=True)
    generation: int = field(default=0, kw_only=True)
    creation_timestamp: str = field(default="", kw_only=True)
    auth: Auth
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)

    @property
    def secret_arns(self) -> tuple[str, ...]:
        if isinstance(self.auth, ApiKey | Basic):
            return (self.auth.secret_arn,)
        if isinstance(self.auth, OAuthClientCredentials):
            return (self.auth.client_secret_arn,)
        return ()


# --- parsing -------------------------------------------------------------------------------------


def parse_connection(namespace: str, body: object, *, path_name: str | None) -> Connection:
    """Validate a Connection body; raises ValidationError naming every problem."""
    problems: list[Problem] = []
    name, labels, annotations, spec = meta.envelope(
        namespace, body, API_VERSION, KIND, path_name, problems
    )
    _unknown_fields(spec, ("auth",), "spec", problems)
    auth = _auth(spec.get("auth"), "spec.auth", problems)
    if problems:
        raise ValidationError(problems)
    assert auth is not None
    return Connection(namespace, name, auth, labels, annotations)


def _auth(value: object, path: str, problems: list[Problem]) -> Auth | None:
    raw = _object(value, path, problems)
    _unknown_fields(raw, AUTH_TYPES, path, problems)
    given = [t for t in AUTH_TYPES if t in raw]
    if len(given) != 1:
        problems.append(
            Problem(path, f"must set exactly one of {', '.join(AUTH_TYPES)} (got {len(given)})")
        )
        return None
    kind = given[0]
    where = f"{path}.{kind}"
    fields = _object(raw[kind], where, problems)
    count = len(problems)
    auth: Auth | None = None
    if kind == "apiKey":
        _unknown_fields(fields, ("header", "secretRef"), where, problems)
        header = _header(fields.get("header"), f"{where}.header", problems)
        arn = secret_ref(fields.get("secretRef"), f"{where}.secretRef", problems)
        auth = ApiKey(header, arn)
    elif kind == "basic":
        _unknown_fields(fields, ("secretRef",), where, problems)
        auth = Basic(secret_ref(fields.get("secretRef"), f"{where}.secretRef", problems))
    elif kind == "oauthClientCredentials":
        allowed = ("tokenUrl", "clientId", "clientSecretRef", "scope")
        _unknown_fields(fields, allowed, where, problems)
        token_url = _token_url(fields.get("tokenUrl"), f"{where}.tokenUrl", problems)
        client_id = _text(fields.get("clientId"), f"{where}.clientId", problems, required=True)
        arn = secret_ref(fields.get("clientSecretRef"), f"{where}.clientSecretRef", problems)
        scope = _text(fields.get("scope"), f"{where}.scope", problems, required=False)
        auth = OAuthClientCredentials(token_url, client_id or "", arn, scope)
    else:
        _unknown_fields(fields, ("service", "region"), where, problems)
        service = _aws_name(fields.get("service"), f"{where}.service", "lambda", problems)
        region = _aws_name(fields.get("region"), f"{where}.region", "us-east-1", problems)
        auth = AwsSigV4(service, region)
    return auth if len(problems) == count else None


def secret_ref(value: object, path: str, problems: list[Problem]) -> str:
    """``{"arn": "arn:aws:secretsmanager:REGION:ACCOUNT:secret:NAME"}``: the secret's ARN."""
    if value is None:
        problems.append(Problem(path, 'is required: {"arn": <a Secrets Manager secret ARN>}'))
        return ""
    if not isinstance(value, Mapping):
        problems.append(Problem(path, 'must be {"arn": <a Secrets Manager secret ARN>}'))
        return ""
    _unknown_fields(value, ("arn",), path, problems)
    arn = value.get("arn")
    if not isinstance(arn, str) or len(arn) > MAX_ARN_CHARS or not _SECRET_ARN.fullmatch(arn):
        problems.append(
            Problem(
                f"{path}.arn",
                f"must be a Secrets Manager secret ARN "
                f"(arn:aws:secretsmanager:REGION:ACCOUNT:secret:NAME), got {quote(arn)}",
            )
        )
        return ""
    return arn


def secret_name(arn: str) -> str:
    """The name part of a secret ARN (with Secrets Manager's random suffix, when it has one)."""
    found = _SECRET_ARN.fullmatch(arn)
    return found.group(1) if found else ""


def _header(value: object, path: str, problems: list[Problem]) -> str:
    if not isinstance(value, str) or not _TOKEN.fullmatch(value):
        problems.append(Problem(path, f"must be an HTTP header name, got {quote(value)}"))
        return ""
    lower = value.lower()
    if lower in RESERVED_HEADERS or lower.startswith("ce-"):
        problems.append(
            Problem(path, f"{quote(value)} is a header the delivery request sets itself")
        )
        return ""
    return value


def _text(value: object, path: str, problems: list[Problem], *, required: bool) -> str | None:
    if value is None and not required:
        return None
    if (
        not isinstance(value, str)
        or not value
        or len(value) > MAX_TEXT_CHARS
        or any(ord(c) < 0x20 or ord(c) == 0x7F for c in value)
    ):
        problems.append(
            Problem(
                path,
                f"must be a non-empty string of at most {MAX_TEXT_CHARS} characters without "
                "control characters",
            )
        )
        return None
    return value


def _token_url(value: object, path: str, problems: list[Problem]) -> str:
    found = uri_problems(value, path)
    if not found and (
        not isinstance(value, str)
        or len(value) > MAX_TEXT_CHARS
        or urlsplit(value).scheme.lower() not in ("http", "https")
    ):
        found = [Problem(path, f"must be an http(s) URL of at most {MAX_TEXT_CHARS} characters")]
    problems += found
    return "" if found else str(value)


def _aws_name(value: object, path: str, example: str, problems: list[Problem]) -> str:
    if not isinstance(value, str) or not _AWS_NAME.fullmatch(value):
        problems.append(
            Problem(path, f'must be lower-case letters, digits and "-", such as "{example}"')
        )
        return ""
    return value


def prefix_problems(connection: Connection, prefix: str, setting: str) -> list[Problem]:
    """A problem for every secret outside ``prefix`` (the stage's; its delivery role may read
    nothing else), naming the ``setting`` that sets it."""
    paths = {
        ApiKey: "spec.auth.apiKey.secretRef.arn",
        Basic: "spec.auth.basic.secretRef.arn",
        OAuthClientCredentials: "spec.auth.oauthClientCredentials.clientSecretRef.arn",
    }
    return [
        Problem(
            paths[type(connection.auth)],
            f"names the secret {quote(secret_name(arn))}, outside this stage's prefix "
            f"{quote(prefix)} ({setting}): the delivery role may read only secrets under it",
        )
        for arn in connection.secret_arns
        if not secret_name(arn).startswith(prefix)
    ]


def token_url_problems(connection: Connection, *, allow_http: bool) -> list[Problem]:
    """The client secret travels to the token URL: https, or http where the stage allows it
    (local mode)."""
    auth = connection.auth
    if not isinstance(auth, OAuthClientCredentials) or allow_http:
        return []
    if urlsplit(auth.token_url).scheme.lower() == "https":
        return []
    return [
        Problem(
            "spec.auth.oauthClientCredentials.tokenUrl",
            "must be https: the client secret travels to it (http is accepted in local mode)",
        )
    ]


# --- admission, JSON, status ---------------------------------------------------------------------


def spec_json(connection: Connection) -> dict[str, Any]:
    auth = connection.auth
    if isinstance(auth, ApiKey):
        body: dict[str, Any] = {
            "apiKey": {"header": auth.header, "secretRef": {"arn": auth.secret_arn}}
        }
    elif isinstance(auth, Basic):
        body = {"basic": {"secretRef": {"arn": auth.secret_arn}}}
    elif isinstance(auth, OAuthClientCredentials):
        oauth: dict[str, Any] = {
            "tokenUrl": auth.token_url,
            "clientId": auth.client_id,
            "clientSecretRef": {"arn": auth.client_secret_arn},
        }
        if auth.scope is not None:
            oauth["scope"] = auth.scope
        body = {"oauthClientCredentials": oauth}
    else:
        body = {"awsSigV4": {"service": auth.service, "region": auth.region}}
    return {"auth": body}


def admit_connection(
    parsed: Connection, existing: Connection | None, *, uid: str, now: datetime
) -> Connection:
    return meta.admitted(parsed, existing, uid=uid, now=now, configuration=spec_json)


def connection_status(
    connection: Connection,
    *,
    problem: tuple[str, str] | None,
    now: datetime,
    previous: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Ready once its secret was read (and, for OAuth, a token fetched): ``problem`` is the
    reason and message when not."""
    manager = CONNECTION_CONDITIONS.manage(previous_conditions(previous), now)
    if problem is None:
        manager.mark_true(AUTH_READY)
    else:
        manager.mark_false(AUTH_READY, *problem)
    return {"observedGeneration": connection.generation, "conditions": manager.to_json()}


CONNECTIONS: ResourceKind[Connection] = ResourceKind(
    store_kind="connection",
    api_version=API_VERSION,
    kind=KIND,
    plural=PLURAL,
    parse=lambda namespace, body, name: parse_connection(namespace, body, path_name=name),
    admit=lambda parsed, old, uid, now: admit_connection(parsed, old, uid=uid, now=now),
    spec_json=spec_json,
)
