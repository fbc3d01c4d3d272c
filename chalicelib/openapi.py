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

from chalicelib.core.names import RESERVED_NAMESPACES
from chalicelib.openapi_schemas import SCHEMAS, STRING, ref
from chalicelib.problems import PROBLEM_TYPE

JSON = "application/json"
_PATH_PARAM = re.compile(r"{([^}]+)}")

CP = "/apis/eventing.knative.dev/v1/namespaces/{namespace}"
KS = "/apis/sources.knative.dev/v1/namespaces/{namespace}/kafkasources"
ET = "/apis/eventing.knative.dev/v1alpha1/namespaces/{namespace}/eventtransforms"
EP = "/apis/eventing.knative.dev/v1alpha1/namespaces/{namespace}/eventpolicies"
CONN = "/apis/serverless-broker.dev/v1alpha1/namespaces/{namespace}/connections"
IS = "/apis/sinks.knative.dev/v1alpha1/namespaces/{namespace}/integrationsinks"
REG = "/registry"
ENDPOINT = f"{REG}/endpoints/{{endpointid}}"
MESSAGE = f"{ENDPOINT}/messages/{{messageid}}"


_PROBLEM = {"content": {PROBLEM_TYPE: {"schema": ref("Problem")}}}


def _problem(description: str) -> dict[str, Any]:
    return {"description": description, **_PROBLEM}


def _json(schema: str, description: str = "OK") -> dict[str, Any]:
    return {"description": description, "content": {JSON: {"schema": ref(schema)}}}


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
            {"name": q, "in": "query", "required": False, "schema": STRING} for q in query
        ]
    if body:
        op["requestBody"] = {"required": True, "content": {JSON: {"schema": ref(body)}}}
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
        "Allow": {"schema": STRING},
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
            "application/cloudevents+json": {"schema": ref("CloudEvent")},
            "application/cloudevents-batch+json": {
                "schema": {"type": "array", "items": ref("CloudEvent")}
            },
            "application/octet-stream": {"schema": {"type": "string", "format": "binary"}},
        },
    }
    post["parameters"] = [
        {"name": f"ce-{a}", "in": "header", "required": False, "schema": STRING}
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
                        "content": {"text/plain": {"schema": STRING}},
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
        **_crud(
            "IntegrationSource",
            "integration sources",
            "/apis/sources.knative.dev/v1alpha1/namespaces/{namespace}/integrationsources",
            "IntegrationSource",
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
        schema = ref("Name")
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
