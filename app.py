"""Wiring only: HTTP routes and Lambda entry points, each translating to one service call."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from chalice.app import Chalice, IAMAuthorizer, Request, Response

from chalicelib.config import APP_NAME, Settings
from chalicelib.container import get_container
from chalicelib.core.errors import BrokerError
from chalicelib.http_errors import json_response, problem_from
from chalicelib.services.http_input import parse_limit

app = Chalice(app_name=APP_NAME)
# API Gateway passes bodies of these media types to Lambda base64-encoded, so binary event data
# arrives byte-exact; other (text) types arrive as UTF-8 text. Not "*/*": then every *response*
# would be binary too, and API Gateway answers clients without an Accept header with base64 text.
app.api.binary_types = sorted(
    set(app.api.binary_types)
    | {
        "application/octet-stream",
        "application/avro",
        "avro/binary",
        "application/protobuf",
        "application/x-protobuf",
        "application/vnd.google.protobuf",
        "application/cbor",
        "application/msgpack",
        "application/x-msgpack",
        "application/gzip",
        "application/pdf",
        "image/webp",
    }
)

_SETTINGS = Settings.from_env()
# Control plane: IAM (SigV4) when deployed, open on loopback in local mode (DESIGN.md §5).
_CP_AUTH = None if _SETTINGS.local_mode else IAMAuthorizer()

CP = "/apis/eventing.knative.dev/v1/namespaces/{namespace}"
ANY = ["*/*"]
ALL_METHODS = ["GET", "POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS"]


def _current() -> Request:
    request = app.current_request
    assert request is not None, "only called while handling a request"
    return request


def _method() -> str:
    return str(_current().method)


def _query(name: str, default: str) -> str:
    params: dict[str, str] = dict(_current().query_params or {})
    return params.get(name, default)


def _request() -> tuple[dict[str, str], bytes]:
    request = _current()
    headers = {str(k).lower(): str(v) for k, v in request.headers.items()}
    raw = request.raw_body or b""
    return headers, raw if isinstance(raw, bytes) else raw.encode()


def _json_body() -> Any:
    from chalicelib.services.http_input import parse_json_body

    return parse_json_body(_request()[1])


def _guarded(fn: Callable[[], Response]) -> Response:
    try:
        return fn()
    except BrokerError as exc:
        return problem_from(exc)


# ---- data plane -------------------------------------------------------------------------------


@app.route("/healthz", methods=["GET"])
def healthz() -> Response:
    return json_response({"status": "ok"})


@app.route("/metrics", methods=["GET"], authorizer=_CP_AUTH)
def metrics() -> Response:
    text = get_container().metrics.prometheus_text()
    headers: dict[str, str | list[str]] = {"Content-Type": "text/plain; version=0.0.4"}
    return Response(body=text, status_code=200, headers=headers)


@app.route("/{namespace}/{broker}", methods=ALL_METHODS, content_types=ANY)
def ingress(namespace: str, broker: str) -> Response:
    headers, body = _request()
    result = get_container().ingress.handle_http(_method(), namespace, broker, headers, body)
    out: dict[str, str | list[str]] = dict(result.headers)
    return Response(body=result.body, status_code=result.status, headers=out)


# ---- control plane: brokers --------------------------------------------------------------------


@app.route(f"{CP}/brokers", methods=["GET", "POST"], authorizer=_CP_AUTH, content_types=ANY)
def brokers(namespace: str) -> Response:
    cp = get_container().control_plane
    if _method() == "GET":
        return _guarded(lambda: json_response(cp.list_brokers(namespace)))
    return _guarded(lambda: json_response(cp.create_broker(namespace, _json_body()), 201))


@app.route(
    f"{CP}/brokers/{{name}}",
    methods=["GET", "PUT", "DELETE"],
    authorizer=_CP_AUTH,
    content_types=ANY,
)
def broker(namespace: str, name: str) -> Response:
    cp = get_container().control_plane
    method = _method()
    if method == "GET":
        return _guarded(lambda: json_response(cp.get_broker(namespace, name)))
    if method == "DELETE":
        return _guarded(lambda: json_response(cp.delete_broker(namespace, name)))

    def put() -> Response:
        doc, created = cp.put_broker(namespace, name, _json_body())
        return json_response(doc, 201 if created else 200)

    return _guarded(put)


# ---- control plane: triggers -------------------------------------------------------------------


@app.route(f"{CP}/triggers", methods=["GET", "POST"], authorizer=_CP_AUTH, content_types=ANY)
def triggers(namespace: str) -> Response:
    cp = get_container().control_plane
    if _method() == "GET":
        return _guarded(lambda: json_response(cp.list_triggers(namespace)))
    return _guarded(lambda: json_response(cp.create_trigger(namespace, _json_body()), 201))


@app.route(
    f"{CP}/triggers/{{name}}",
    methods=["GET", "PUT", "DELETE"],
    authorizer=_CP_AUTH,
    content_types=ANY,
)
def trigger(namespace: str, name: str) -> Response:
    cp = get_container().control_plane
    method = _method()
    if method == "GET":
        return _guarded(lambda: json_response(cp.get_trigger(namespace, name)))
    if method == "DELETE":
        return _guarded(lambda: json_response(cp.delete_trigger(namespace, name)))

    def put() -> Response:
        doc, created = cp.put_trigger(namespace, name, _json_body())
        return json_response(doc, 201 if created else 200)

    return _guarded(put)


@app.route(
    f"{CP}/triggers/{{name}}/deadletters",
    methods=["GET", "DELETE"],
    authorizer=_CP_AUTH,
    content_types=ANY,
)
def dead_letters(namespace: str, name: str) -> Response:
    c = get_container()

    def run() -> Response:
        broker = c.control_plane.broker_of_trigger(namespace, name)
        if _method() == "DELETE":
            return json_response(c.dead_letters.purge(namespace, broker, name))
        limit = parse_limit(_query("limit", "100"))
        return json_response(c.dead_letters.list(namespace, broker, name, limit))

    return _guarded(run)


@app.route(
    f"{CP}/triggers/{{name}}/deadletters/redrive",
    methods=["POST"],
    authorizer=_CP_AUTH,
    content_types=ANY,
)
def redrive_dead_letters(namespace: str, name: str) -> Response:
    c = get_container()

    def run() -> Response:
        broker = c.control_plane.broker_of_trigger(namespace, name)
        return json_response(c.dead_letters.redrive(namespace, broker, name), 202)

    return _guarded(run)


# ---- control plane: ingress tokens -------------------------------------------------------------


@app.route(
    f"{CP}/brokers/{{name}}/tokens", methods=["GET", "POST"], authorizer=_CP_AUTH, content_types=ANY
)
def broker_tokens(namespace: str, name: str) -> Response:
    tokens = get_container().tokens
    if _method() == "GET":
        return _guarded(lambda: json_response(tokens.list(namespace, name)))
    return _guarded(lambda: json_response(tokens.create(namespace, name), 201))


@app.route(
    f"{CP}/brokers/{{name}}/tokens/{{token_id}}",
    methods=["DELETE"],
    authorizer=_CP_AUTH,
    content_types=ANY,
)
def broker_token(namespace: str, name: str, token_id: str) -> Response:
    return _guarded(lambda: json_response(get_container().tokens.revoke(namespace, name, token_id)))


# ---- Kafka sources (DESIGN.md §10) -------------------------------------------------------------

KS = "/apis/sources.knative.dev/v1/namespaces/{namespace}/kafkasources"


@app.route(KS, methods=["GET", "POST"], authorizer=_CP_AUTH, content_types=ANY)
def kafka_sources(namespace: str) -> Response:
    sources = get_container().kafka_sources
    if _method() == "GET":
        return _guarded(lambda: json_response(sources.list_sources(namespace)))
    return _guarded(lambda: json_response(sources.create_source(namespace, _json_body()), 201))


@app.route(
    f"{KS}/{{name}}", methods=["GET", "PUT", "DELETE"], authorizer=_CP_AUTH, content_types=ANY
)
def kafka_source(namespace: str, name: str) -> Response:
    sources = get_container().kafka_sources
    method = _method()
    if method == "GET":
        return _guarded(lambda: json_response(sources.get_source(namespace, name)))
    if method == "DELETE":
        return _guarded(lambda: json_response(sources.delete_source(namespace, name)))

    def put() -> Response:
        doc, created = sources.put_source(namespace, name, _json_body())
        return json_response(doc, 201 if created else 200)

    return _guarded(put)


@app.route(
    f"{KS}/{{name}}/failures", methods=["GET", "DELETE"], authorizer=_CP_AUTH, content_types=ANY
)
def kafka_source_failures(namespace: str, name: str) -> Response:
    sources = get_container().kafka_sources
    if _method() == "DELETE":
        return _guarded(lambda: json_response(sources.purge_failures(namespace, name)))
    limit = _query("limit", "100")
    return _guarded(lambda: json_response(sources.failures(namespace, name, limit)))


# ---- xRegistry (DESIGN.md §9) ----------------------------------------------------------------

REG = "/registry"
ENDPOINT = f"{REG}/endpoints/{{endpointid}}"
MESSAGE = f"{ENDPOINT}/messages/{{messageid}}"


def _params(name: str) -> list[str] | None:
    params = _current().query_params
    return list(params.getlist(name)) if params and name in params else None


def _epoch() -> str | None:
    values = _params("epoch")
    return values[-1] if values else None


@app.route(REG, methods=["GET"], authorizer=_CP_AUTH)
def registry_root() -> Response:
    return _guarded(lambda: json_response(get_container().registry.root(_params("inline"))))


@app.route(f"{REG}/model", methods=["GET"], authorizer=_CP_AUTH)
def registry_model() -> Response:
    return _guarded(lambda: json_response(get_container().registry.model()))


@app.route(f"{REG}/endpoints", methods=["GET"], authorizer=_CP_AUTH)
def registry_endpoints() -> Response:
    return _guarded(lambda: json_response(get_container().registry.endpoints(_params("inline"))))


@app.route(ENDPOINT, methods=["GET", "PUT", "DELETE"], authorizer=_CP_AUTH, content_types=ANY)
def registry_endpoint(endpointid: str) -> Response:
    registry = get_container().registry
    method = _method()
    if method == "GET":
        return _guarded(lambda: json_response(registry.endpoint(endpointid, _params("inline"))))

    def delete() -> Response:
        registry.delete_endpoint(endpointid, _epoch())
        return Response(body="", status_code=204)

    def put() -> Response:
        doc, created = registry.put_endpoint(endpointid, _json_body())
        location = {"Location": registry.location(endpointid)} if created else None
        return json_response(doc, 201 if created else 200, location)

    return _guarded(delete if method == "DELETE" else put)


@app.route(f"{ENDPOINT}/messages", methods=["GET"], authorizer=_CP_AUTH)
def registry_messages(endpointid: str) -> Response:
    registry = get_container().registry
    return _guarded(lambda: json_response(registry.messages(endpointid, _params("inline"))))


@app.route(MESSAGE, methods=["GET", "DELETE"], authorizer=_CP_AUTH)
def registry_message(endpointid: str, messageid: str) -> Response:
    registry = get_container().registry
    if _method() == "GET":
        return _guarded(
            lambda: json_response(registry.message(endpointid, messageid, _params("inline")))
        )

    def delete() -> Response:
        registry.delete_message(endpointid, messageid, _epoch())
        return Response(body="", status_code=204)

    return _guarded(delete)


@app.route(f"{MESSAGE}/meta", methods=["GET"], authorizer=_CP_AUTH)
def registry_message_meta(endpointid: str, messageid: str) -> Response:
    registry = get_container().registry
    return _guarded(lambda: json_response(registry.message_meta(endpointid, messageid)))


@app.route(f"{MESSAGE}/versions", methods=["GET"], authorizer=_CP_AUTH)
def registry_message_versions(endpointid: str, messageid: str) -> Response:
    registry = get_container().registry
    return _guarded(lambda: json_response(registry.message_versions(endpointid, messageid)))


@app.route(f"{MESSAGE}/versions/{{versionid}}", methods=["GET"], authorizer=_CP_AUTH)
def registry_message_version(endpointid: str, messageid: str, versionid: str) -> Response:
    registry = get_container().registry
    return _guarded(
        lambda: json_response(registry.message_version(endpointid, messageid, versionid))
    )


# ---- Lambda entry points -----------------------------------------------------------------------


@app.lambda_function(name="delivery")
def delivery(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return get_container().delivery.handle_sqs_event(event, context)


@app.lambda_function(name="dead_letter")
def dead_letter(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return get_container().dead_letter.handle_sqs_event(event, context)


@app.lambda_function(name="kafka_ingress")
def kafka_ingress(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return get_container().kafka_ingress.handle(event, context)


@app.schedule("rate(5 minutes)", name="reconciler")
def reconciler(event: Any) -> None:
    get_container().control_plane.reconcile_all()
    get_container().kafka_sources.reconcile_all()
