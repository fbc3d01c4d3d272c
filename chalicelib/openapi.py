"""The API's OpenAPI 3.1 document, served at ``GET /apis/openapi.json`` (design.md §2).

Written out by hand, operation by operation, rather than generated from ``app.routes``: a test
compares the two, so a route added without its description (or a description left behind by a
removed route) fails the build. Request schemas describe what the API accepts as far as a JSON
Schema can (names, dialects, URIs); the parsers in ``chalicelib/core`` remain the authority and
answer everything else with a 400 problem naming each problem. Response schemas list the fields
clients rely on and allow more, as Kubernetes-style resources grow fields.
"""

from __future__ import annotations

import re
from typing import Any

from chalicelib.core.names import MAX_NAME_LENGTH, RESERVED_NAMESPACES
from chalicelib.core.resources.delivery_spec import MAX_AUDIENCE_CHARS, MAX_CA_CERTS_BYTES
from chalicelib.core.resources.event_policy import SENDER_KINDS
from chalicelib.problems import PROBLEM_TYPE

JSON = "application/json"
_PATH_PARAM = re.compile(r"{([^}]+)}")
_LABEL = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"

CP = "/apis/eventing.knative.dev/v1/namespaces/{namespace}"
KS = "/apis/sources.knative.dev/v1/namespaces/{namespace}/kafkasources"
ET = "/apis/eventing.knative.dev/v1alpha1/namespaces/{namespace}/eventtransforms"
EP = "/apis/eventing.knative.dev/v1alpha1/namespaces/{namespace}/eventpolicies"
CONN = "/apis/serverless-broker.dev/v1alpha1/namespaces/{namespace}/connections"
IS = "/apis/sinks.knative.dev/v1alpha1/namespaces/{namespace}/integrationsinks"
REG = "/registry"
ENDPOINT = f"{REG}/endpoints/{{endpointid}}"
MESSAGE = f"{ENDPOINT}/messages/{{messageid}}"


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def _obj(required: list[str] | None = None, /, **props: Any) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "properties": props}
    if required:
        schema["required"] = required
    return schema


def _resource(api_version: str, kind: str, required: list[str], spec: Any) -> dict[str, Any]:
    """A resource in the Kubernetes shape: apiVersion, kind, metadata and this spec."""
    return _obj(
        required,
        apiVersion={"const": api_version},
        kind={"const": kind},
        metadata=_ref("ObjectMeta"),
        spec=spec,
    )


def _described(description: str, schema: dict[str, Any]) -> dict[str, Any]:
    return {**schema, "description": description}


_STRING = {"type": "string"}
_STRING_MAP = {"type": "object", "additionalProperties": _STRING}
_DURATION = {"type": "string", "description": "ISO 8601 duration, e.g. PT0.2S"}
_URI = {"type": "string", "format": "uri"}
_DESTINATION = _obj(
    uri=_URI,
    ref=_obj(
        ["name"],
        apiVersion=_STRING,
        kind=_STRING,
        name=_STRING,
        namespace=_STRING,
    ),
    audience={
        "type": "string",
        "minLength": 1,
        "maxLength": MAX_AUDIENCE_CHARS,
        "description": "requests carry Authorization: Bearer <JWT> with this aud, signed by "
        "the broker (keys at /.well-known/jwks.json); http(s) uri only",
    },
    CACerts={
        "type": "string",
        "maxLength": MAX_CA_CERTS_BYTES,
        "description": "PEM CA certificates its TLS trusts besides the system's; https uri only",
    },
)
_SECRET_REF = _described(
    "a Secrets Manager secret under the stage's connection secret prefix",
    _obj(["arn"], arn=_STRING),
)

SCHEMAS: dict[str, Any] = {
    "Problem": _described(
        "RFC 9457 problem details; `errors` names every invalid field at once",
        _obj(
            ["type", "title", "status", "detail"],
            type=_STRING,
            title=_STRING,
            status={"type": "integer", "minimum": 400, "maximum": 599},
            detail=_STRING,
            errors={
                "type": "array",
                "items": _obj(["field", "message"], field=_STRING, message=_STRING),
            },
            correlationId=_STRING,
        ),
    ),
    "Name": {"type": "string", "pattern": _LABEL, "maxLength": MAX_NAME_LENGTH},
    "ObjectMeta": _obj(
        name=_ref("Name"),
        namespace=_STRING,
        labels=_STRING_MAP,
        annotations=_STRING_MAP,
        resourceVersion=_STRING,
    ),
    "Delivery": _obj(
        retry={"type": "integer", "minimum": 0},
        backoffPolicy={"enum": ["exponential", "linear"]},
        backoffDelay=_DURATION,
        timeout=_DURATION,
        retryAfterMax=_DURATION,
        deadLetterSink=_DESTINATION,
        format={"enum": ["json", "binary"]},
    ),
    "BrokerSpec": _obj(delivery=_ref("Delivery"), config={"type": "object"}),
    "Broker": _resource("eventing.knative.dev/v1", "Broker", ["metadata"], _ref("BrokerSpec")),
    "Filter": _described(
        "exactly one dialect per element",
        _obj(
            exact=_STRING_MAP,
            prefix=_STRING_MAP,
            suffix=_STRING_MAP,
            all={"type": "array", "items": _ref("Filter")},
            any={"type": "array", "items": _ref("Filter")},
            **{"not": _ref("Filter")},  # a Python keyword, so not a keyword argument
            cesql=_STRING,
            eventPattern={
                "type": "object",
                "description": "an EventBridge event pattern over the event's JSON form "
                "(attributes top level, JSON data under data); see docs/filters.md",
            },
        ),
    ),
    "TriggerSpec": _obj(
        ["subscriber"],
        broker=_ref("Name"),
        filter=_obj(attributes=_STRING_MAP),
        filters={"type": "array", "items": _ref("Filter")},
        subscriber=_DESTINATION,
        delivery=_ref("Delivery"),
    ),
    "Trigger": _resource(
        "eventing.knative.dev/v1", "Trigger", ["metadata", "spec"], _ref("TriggerSpec")
    ),
    "EventTransform": _resource(
        "eventing.knative.dev/v1alpha1",
        "EventTransform",
        ["metadata", "spec"],
        _obj(
            ["jsonata"],
            jsonata=_obj(["expression"], expression={"type": "string", "minLength": 1}),
            sink=_DESTINATION,
            reply=_obj(
                jsonata=_obj(["expression"], expression={"type": "string", "minLength": 1}),
                discard={"type": "boolean"},
            ),
        ),
    ),
    "IntegrationSink": _resource(
        "sinks.knative.dev/v1alpha1",
        "IntegrationSink",
        ["metadata", "spec"],
        _described(
            "exactly one of aws.sqs, aws.sns, aws.s3, aws.eventbridge, log",
            _obj(
                aws=_obj(
                    sqs=_ref("AwsSinkTarget"),
                    sns=_ref("AwsSinkTarget"),
                    s3=_ref("AwsSinkTarget"),
                    eventbridge=_ref("AwsSinkTarget"),
                    auth=_obj(secret=_obj(ref=_obj(name=_STRING))),
                ),
                log=_obj(
                    loggerName=_STRING,
                    level={"enum": ["TRACE", "DEBUG", "INFO", "WARN", "ERROR", "OFF"]},
                    marker=_STRING,
                    showHeaders={"type": "boolean"},
                    showBody={"type": "boolean"},
                    multiline={"type": "boolean"},
                    logMask={"type": "boolean"},
                ),
            ),
        ),
    ),
    "AwsSinkTarget": _obj(["arn", "region"], arn=_STRING, region=_STRING),
    "Connection": _resource(
        "serverless-broker.dev/v1alpha1",
        "Connection",
        ["metadata", "spec"],
        _obj(
            ["auth"],
            auth=_described(
                "exactly one of apiKey, basic, oauthClientCredentials, awsSigV4",
                _obj(
                    apiKey=_obj(["header", "secretRef"], header=_STRING, secretRef=_SECRET_REF),
                    basic=_obj(["secretRef"], secretRef=_SECRET_REF),
                    oauthClientCredentials=_obj(
                        ["tokenUrl", "clientId", "clientSecretRef"],
                        tokenUrl=_URI,
                        clientId=_STRING,
                        clientSecretRef=_SECRET_REF,
                        scope=_STRING,
                    ),
                    awsSigV4=_obj(["service", "region"], service=_STRING, region=_STRING),
                ),
            ),
        ),
    ),
    "PingSource": _resource(
        "sources.knative.dev/v1",
        "PingSource",
        ["metadata", "spec"],
        _obj(
            ["sink"],
            schedule=_described(
                '5-field cron (default "* * * * *"), optionally "CRON_TZ=<zone> " first; what '
                "EventBridge Scheduler cannot run (both day fields, seconds) is a 400",
                {"type": "string", "maxLength": 256},
            ),
            timezone=_described("an IANA time zone", {"type": "string", "maxLength": 50}),
            contentType=_STRING,
            data=_described("the payload (or dataBase64)", {"type": "string", "maxLength": 65536}),
            dataBase64={"type": "string", "maxLength": 65536},
            ceOverrides=_obj(extensions=_STRING_MAP),
            sink=_described(
                "ref to a Broker of the namespace, or uri",
                _obj(
                    ref=_obj(
                        ["kind", "name"],
                        apiVersion=_STRING,
                        kind={"const": "Broker"},
                        name=_ref("Name"),
                        namespace=_STRING,
                    ),
                    uri=_URI,
                ),
            ),
        ),
    ),
    "KafkaSource": _resource(
        "sources.knative.dev/v1",
        "KafkaSource",
        ["metadata", "spec"],
        _obj(
            ["bootstrapServers", "topics", "sink"],
            bootstrapServers={"type": "array", "items": _STRING},
            topics={"type": "array", "items": _STRING},
            consumerGroup=_STRING,
            initialOffset={"enum": ["earliest", "latest"]},
            sink=_DESTINATION,
            delivery=_ref("Delivery"),
        ),
    ),
    "Replay": _resource(
        "eventing.knative.dev/v1",
        "Replay",
        ["spec"],
        _obj(
            ["from", "to"],
            **{
                "from": {"type": "string", "format": "date-time", "description": "inclusive"},
                "to": {"type": "string", "format": "date-time", "description": "exclusive"},
            },
            triggers={"type": "array", "items": _ref("Name")},
            filters={"type": "array", "items": _ref("Filter")},
            packing={
                "type": "boolean",
                "default": False,
                "description": "many events to an SQS message on standard queues (fewer calls)",
            },
        ),
    ),
    "Resource": _obj(
        ["apiVersion", "kind", "metadata"],
        apiVersion=_STRING,
        kind=_STRING,
        metadata=_obj(["name"], name=_STRING, uid=_STRING),
        spec={"type": "object"},
        status=_obj(conditions={"type": "array", "items": {"type": "object"}}),
    ),
    "ResourceList": _obj(
        ["items"],
        apiVersion=_STRING,
        kind=_STRING,
        items={"type": "array", "items": _ref("Resource")},
    ),
    "Status": _obj(["kind", "status"], kind={"const": "Status"}, status=_STRING),
    "CloudEvent": _described(
        "a structured-mode CloudEvent (JSON format)",
        _obj(
            ["specversion", "id", "source", "type"],
            specversion=_STRING,
            id=_STRING,
            source=_STRING,
            type=_STRING,
        ),
    ),
    "Object": {"type": "object"},
    "FilterTest": _obj(
        ["event"],
        event={"type": "object", "description": "a CloudEvent in JSON format"},
        filters={"type": "array", "items": _ref("Filter")},
        filter=_obj(attributes=_STRING_MAP),
        trigger=_ref("Name"),
    ),
    "EventPolicy": _resource(
        "eventing.knative.dev/v1alpha1",
        "EventPolicy",
        ["metadata"],
        _obj(
            to={
                "type": "array",
                "description": "the brokers it applies to; none: every broker of the namespace",
                "items": _obj(
                    ref=_obj(
                        ["apiVersion", "kind", "name"],
                        apiVersion=_STRING,
                        kind={"const": "Broker"},
                        name=_ref("Name"),
                    ),
                    selector=_obj(
                        apiVersion=_STRING,
                        kind={"const": "Broker"},
                        matchLabels=_STRING_MAP,
                        matchExpressions={
                            "type": "array",
                            "items": _obj(
                                ["key", "operator"],
                                key=_STRING,
                                operator={"enum": ["In", "NotIn", "Exists", "DoesNotExist"]},
                                values={"type": "array", "items": _STRING},
                            ),
                        },
                    ),
                ),
            },
            **{  # a Python keyword, so not a keyword argument
                "from": {
                    "type": "array",
                    "items": _obj(
                        sub=_described(
                            "a sender identity (token:{ns}:{id}, an IAM ARN, "
                            "source:{ns}:{kind}:{name}, trigger:{ns}:{name}); '*' only last",
                            {"type": "string", "minLength": 1, "maxLength": 2048},
                        ),
                        ref=_obj(
                            ["apiVersion", "kind", "name"],
                            apiVersion=_STRING,
                            kind={"enum": list(SENDER_KINDS)},
                            name=_ref("Name"),
                            namespace=_ref("Name"),
                        ),
                    ),
                }
            },
            filters={"type": "array", "items": _ref("Filter")},
        ),
    ),
    "PolicyTest": _obj(
        ["event"],
        broker=_ref("Name"),
        identity={"type": ["string", "null"], "description": "null: an anonymous sender"},
        event={"type": "object", "description": "a CloudEvent in JSON format"},
    ),
    "PolicyVerdict": _obj(
        ["allowed", "decision", "reason", "policies"],
        allowed={"type": "boolean"},
        policy={"type": ["string", "null"]},
        decision=_STRING,
        reason=_STRING,
        policies={"type": "array", "items": _STRING},
    ),
    "FilterVerdict": _obj(
        ["matched", "reasons"],
        matched={"type": "boolean"},
        reasons={"type": "array", "items": _STRING},
        trigger=_ref("Name"),
    ),
}

_PROBLEM = {"content": {PROBLEM_TYPE: {"schema": _ref("Problem")}}}


def _problem(description: str) -> dict[str, Any]:
    return {"description": description, **_PROBLEM}


def _json(schema: str, description: str = "OK") -> dict[str, Any]:
    return {"description": description, "content": {JSON: {"schema": _ref(schema)}}}


# Every operation may answer these: a client error as problem+json, and (never on purpose)
# a server error in the same shape.
_ERRORS = {
    "4XX": _problem("the request was refused; `errors` names every problem"),
    "5XX": _problem("the service failed (503: retry later)"),
}
_EMPTY = {"description": "no body"}


def _op(
    op_id: str,
    summary: str,
    responses: dict[str, Any],
    *,
    body: str | None = None,
    query: tuple[str, ...] = (),
    public: bool = False,
) -> dict[str, Any]:
    op: dict[str, Any] = {"operationId": op_id, "summary": summary}
    if query:
        op["parameters"] = [
            {"name": q, "in": "query", "required": False, "schema": _STRING} for q in query
        ]
    if body:
        op["requestBody"] = {"required": True, "content": {JSON: {"schema": _ref(body)}}}
    op["responses"] = {**responses, **_ERRORS}
    if public:
        op["security"] = []
    return op


def _crud(
    kind: str, plural: str, base: str, schema: str, kinds: str | None = None
) -> dict[str, dict[str, Any]]:
    one = f"{base}/{{name}}"
    return {
        base: {
            "get": _op(
                f"list{kinds or kind + 's'}",
                f"list the namespace's {plural}",
                {"200": _json("ResourceList")},
            ),
            "post": _op(
                f"create{kind}",
                f"create a {kind} (name in the body)",
                {"201": _json("Resource")},
                body=schema,
            ),
        },
        one: {
            "get": _op(f"get{kind}", f"a {kind} with its live status", {"200": _json("Resource")}),
            "put": _op(
                f"put{kind}",
                f"create (201) or replace (200) a {kind}; dryRun=All validates, stores nothing",
                {"200": _json("Resource"), "201": _json("Resource")},
                body=schema,
                query=("dryRun",),
            ),
            "delete": _op(f"delete{kind}", f"delete a {kind}", {"200": _json("Status")}),
        },
    }


def _ingress() -> dict[str, Any]:
    allow = {
        "Allow": {"schema": _STRING},
    }
    post = _op(
        "sendEvent",
        "send an event (binary, structured or batch content mode)",
        {"202": {"description": "stored for every matching ready trigger"}},
        public=True,
    )
    post["requestBody"] = {
        "required": False,
        "description": "binary mode (any other media type) carries the attributes as ce-* "
        "headers; structured and batch modes carry them in the JSON body",
        "content": {
            "application/cloudevents+json": {"schema": _ref("CloudEvent")},
            "application/cloudevents-batch+json": {
                "schema": {"type": "array", "items": _ref("CloudEvent")}
            },
            "application/octet-stream": {"schema": {"type": "string", "format": "binary"}},
        },
    }
    post["parameters"] = [
        {"name": f"ce-{a}", "in": "header", "required": False, "schema": _STRING}
        for a in ("specversion", "id", "source", "type")
    ]
    item: dict[str, Any] = {"post": post}
    item["options"] = _op(
        "ingressOptions",
        "the CloudEvents webhook handshake",
        {"200": {"description": "allowed methods and origins", "headers": allow}},
        public=True,
    )
    for method in ("get", "put", "delete", "patch", "head"):
        item[method] = _op(
            f"ingress{method.capitalize()}",
            "not allowed on an ingress URL (405 with Allow: POST, OPTIONS)",
            {"405": {**_problem("use POST"), "headers": allow}},
            public=True,
        )
    return item


def _paths(*, local: bool) -> dict[str, dict[str, Any]]:
    obj = {"200": _json("Object")}
    paths: dict[str, dict[str, Any]] = {
        "/healthz": {"get": _op("health", "liveness", {"200": _json("Object")}, public=True)},
        "/.well-known/openid-configuration": {
            "get": _op(
                "openidConfiguration",
                "OIDC discovery of the broker's delivery tokens (issuer, jwks_uri)",
                obj,
                public=True,
            )
        },
        "/.well-known/jwks.json": {
            "get": _op("jwks", "the public keys delivery tokens are signed with", obj, public=True)
        },
        "/metrics": {
            "get": _op(
                "metrics",
                "Prometheus text of the local runtime's metrics",
                {
                    "200": {
                        "description": "OK",
                        "content": {"text/plain": {"schema": _STRING}},
                    }
                },
            )
        },
        "/{namespace}/{broker}": _ingress(),
        "/apis/openapi.json": {"get": _op("openapi", "this document", obj)},
        **_crud("Broker", "brokers", f"{CP}/brokers", "Broker"),
        **_crud("Trigger", "triggers", f"{CP}/triggers", "Trigger"),
        f"{CP}/triggers-test": {"post": _filter_test("testFilter")},
        # Local mode also serves design.md's spelling (API Gateway refuses a colon in a path).
        **({f"{CP}/triggers:test": {"post": _filter_test("testFilterLocal")}} if local else {}),
        f"{CP}/triggers/{{name}}/deadletters": {
            "get": _op(
                "listDeadLetters", "dead-lettered events, not consumed", obj, query=("limit",)
            ),
            "delete": _op("purgeDeadLetters", "purge the trigger's DLQ", obj),
        },
        f"{CP}/triggers/{{name}}/deadletters/redrive": {
            "post": _op("redriveDeadLetters", "move dead letters back", {"202": _json("Object")})
        },
        f"{CP}/brokers/{{name}}/tokens": {
            "get": _op("listTokens", "the broker's ingress tokens (ids only)", obj),
            "post": _op("createToken", "a new ingress token, shown once", {"201": _json("Object")}),
        },
        f"{CP}/brokers/{{name}}/tokens/{{token_id}}": {
            "delete": _op("revokeToken", "revoke an ingress token", obj)
        },
        f"{CP}/brokers/{{broker}}/replays": {
            "get": _op("listReplays", "the broker's replays", {"200": _json("ResourceList")})
        },
        f"{CP}/brokers/{{broker}}/replays/{{name}}": {
            "get": _op("getReplay", "a replay with its progress", {"200": _json("Resource")}),
            "put": _op(
                "putReplay",
                "create (201) a replay of archived events; the spec cannot change (422)",
                {"200": _json("Resource"), "201": _json("Resource")},
                body="Replay",
                query=("dryRun",),
            ),
            "delete": _op("cancelReplay", "cancel (delete) a replay", {"200": _json("Status")}),
        },
        **_crud("KafkaSource", "Kafka sources", KS, "KafkaSource"),
        **_crud(
            "PingSource",
            "ping sources",
            "/apis/sources.knative.dev/v1/namespaces/{namespace}/pingsources",
            "PingSource",
        ),
        **_crud("EventTransform", "event transforms", ET, "EventTransform"),
        **_crud("EventPolicy", "event policies", EP, "EventPolicy", kinds="EventPolicies"),
        f"{EP}-test": {
            "post": _op(
                "testEventPolicy",
                "whether a broker's policies admit an event from a sender (nothing is sent)",
                {"200": _json("PolicyVerdict")},
                body="PolicyTest",
            )
        },
        **_crud("Connection", "connections", CONN, "Connection"),
        **_crud("IntegrationSink", "integration sinks", IS, "IntegrationSink"),
        f"{KS}/{{name}}/failures": {
            "get": _op(
                "listKafkaFailures", "records that could not be ingested", obj, query=("limit",)
            ),
            "delete": _op("purgeKafkaFailures", "purge them", obj),
        },
        REG: {"get": _op("registryRoot", "xRegistry root", obj, query=("inline",))},
        f"{REG}/model": {"get": _op("registryModel", "xRegistry model", obj)},
        f"{REG}/endpoints": {"get": _op("registryEndpoints", "endpoints", obj, query=("inline",))},
        ENDPOINT: {
            "get": _op("registryEndpoint", "an endpoint", obj, query=("inline",)),
            "put": _op(
                "putRegistryEndpoint",
                "create (201) or replace (200) an endpoint",
                {"200": _json("Object"), "201": _json("Object")},
                body="Object",
            ),
            "delete": _op(
                "deleteRegistryEndpoint", "delete an endpoint", {"204": _EMPTY}, query=("epoch",)
            ),
        },
        f"{ENDPOINT}/messages": {
            "get": _op("registryMessages", "an endpoint's messages", obj, query=("inline",))
        },
        MESSAGE: {
            "get": _op("registryMessage", "a message", obj, query=("inline",)),
            "delete": _op(
                "deleteRegistryMessage", "delete a message", {"204": _EMPTY}, query=("epoch",)
            ),
        },
        f"{MESSAGE}/meta": {"get": _op("registryMessageMeta", "a message's meta", obj)},
        f"{MESSAGE}/versions": {"get": _op("registryMessageVersions", "its versions", obj)},
        f"{MESSAGE}/versions/{{versionid}}": {
            "get": _op("registryMessageVersion", "one version", obj)
        },
    }
    for path, item in paths.items():
        params = [_path_parameter(p) for p in _PATH_PARAM.findall(path)]
        if params:
            item["parameters"] = params
    return paths


def _filter_test(op_id: str) -> dict[str, Any]:
    return _op(
        op_id,
        "does a filter (one of filters, filter, trigger) pass an event, and why; creates nothing",
        {"200": _json("FilterVerdict")},
        body="FilterTest",
    )


def _path_parameter(name: str) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "string", "minLength": 1}
    description = None
    if name in ("namespace", "broker", "name"):
        schema = _ref("Name")
    if name == "namespace":
        description = "not one of the reserved " + ", ".join(sorted(RESERVED_NAMESPACES))
    param: dict[str, Any] = {"name": name, "in": "path", "required": True, "schema": schema}
    if name in ("namespace", "broker"):
        param["example"] = "default"
    if description:
        param["description"] = description
    return param


def document(public_url: str, *, signed: bool) -> dict[str, Any]:
    """The document. ``signed``: the control plane needs SigV4 (deployed); in local mode it is
    open on loopback and the document says so by naming no security requirement."""
    doc: dict[str, Any] = {
        "openapi": "3.1.0",
        "info": {
            "title": "Serverless Broker",
            "version": "1",
            "description": "Knative-compatible CloudEvents broker: ingress, Knative-shaped control "
            "plane (Brokers, Triggers, KafkaSources), dead letters, ingress tokens, xRegistry.",
        },
        "servers": [{"url": public_url}],
        "paths": _paths(local=not signed),
        "components": {"schemas": SCHEMAS},
    }
    if signed:
        doc["components"]["securitySchemes"] = {
            "sigv4": {
                "type": "apiKey",
                "name": "Authorization",
                "in": "header",
                "description": "AWS Signature Version 4 (API Gateway IAM authorization)",
            }
        }
        doc["security"] = [{"sigv4": []}]
    else:
        for item in doc["paths"].values():
            for key, op in item.items():
                if key != "parameters":
                    op.pop("security", None)
    return doc
