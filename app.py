"""Wiring only: HTTP routes and Lambda entry points, each translating to one service call."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from chalice.app import (
    ChaliceUnhandledError,
    ConvertToMiddleware,
    IAMAuthorizer,
    Request,
    Response,
)

from chalicelib import http_ingress, logs
from chalicelib.config import APP_NAME, Settings
from chalicelib.container import get_container
from chalicelib.function_url import BrokerChalice
from chalicelib.http_errors import error_response, json_response, with_problem_body
from chalicelib.services import archiver
from chalicelib.services.http_input import parse_dry_run, parse_json_body, parse_limit
from chalicelib.services.resources import ResourceService

_SETTINGS = Settings.from_env()
# Chalice's log is the logger named after the app, as is powertools' (its service): on Lambda it
# is powertools' alone (JSON), not also Chalice's plain-text handler.
# BrokerChalice: Chalice that also answers a Lambda Function URL's events (docs/cost.md).
app = BrokerChalice(app_name=APP_NAME, configure_logs=not _SETTINGS.on_lambda)
app.ingress_only = _SETTINGS.function_url_ingress_only  # the URL's callers may be any producer
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

# Control plane: IAM (SigV4) when deployed, open on loopback in local mode (design.md §5).
# Computed at import, where an empty environment must still import cleanly: from_env reads local
# mode only from an explicit BROKER_STAGE=local + BROKER_LOCAL_MODE=true, so an environment that
# lost its stage gets IAM here (closed), and its container refuses to build (require_runnable).
_CP_AUTH = None if _SETTINGS.local_mode else IAMAuthorizer()
if _SETTINGS.on_lambda:
    # Every function (the API's and the four others): JSON log lines with its Lambda context, and
    # an X-Ray subsegment per invocation. Registered first: around the error middleware too.
    app.register_middleware(ConvertToMiddleware(logs.on_lambda()))


def _write_due_archive_records(event: Any, get_response: Any) -> Any:
    """After every invocation of every function: archive records carried for a window or longer
    are written (services/archiver.py ``flush_due``), whether or not a new record came."""
    try:
        return get_response(event)
    finally:
        archiver.flush_due()


if _SETTINGS.on_lambda and _SETTINGS.archive_carry_seconds > 0:
    app.register_middleware(_write_due_archive_records, "all")

CP = "/apis/eventing.knative.dev/v1/namespaces/{namespace}"
ANY = ["*/*"]
ALL_METHODS = ["GET", "POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS"]

log = logs.get("http")


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
    return parse_json_body(_request()[1])


def _dry_run() -> bool:
    """Kubernetes' ``?dryRun=All`` on a PUT: validated and admitted, nothing stored."""
    return parse_dry_run(_current().query_params or {})


View = Callable[..., Response]


def _route(path: str, methods: list[str], *, public: bool = False) -> Callable[[View], View]:
    """``app.route`` with what every route shares: any content type (the handler decides what it
    accepts, as problem+json), the control plane's authorizer unless ``public``, and the view's
    exceptions passed on to ``errors_as_problems``. Chalice turns any other exception into its own
    500 before middleware sees it; only ChaliceUnhandledError gets through."""

    def register(view: View) -> View:
        @functools.wraps(view)
        def escaping(**kwargs: str) -> Response:
            try:
                return view(**kwargs)
            except Exception as exc:
                raise ChaliceUnhandledError(type(exc).__name__) from exc

        authorizer = None if public else _CP_AUTH
        if public:  # reachable through a Function URL whose AuthType is NONE
            app.public_routes = app.public_routes | {path}
        app.route(path, methods=methods, authorizer=authorizer, content_types=ANY)(escaping)
        return escaping

    return register


@app.middleware("http")
def errors_as_problems(event: Request, get_response: Callable[[Request], Response]) -> Response:
    """What escapes a view becomes an answer here: a BrokerError its problem document, anything
    else an opaque 500 problem logged with its correlation id; Chalice's own error answers (405
    for a method a route lacks) are reshaped as problem+json."""
    try:
        return with_problem_body(get_response(event))
    except Exception as exc:
        cause = exc.__cause__ if isinstance(exc, ChaliceUnhandledError) else exc
        return error_response(cause or exc, _correlation_id(event), log)


def _correlation_id(event: Request | None) -> str | None:
    context = getattr(event, "context", None) or {}
    return str(context.get("requestId") or "") or None


# ---- data plane -------------------------------------------------------------------------------


@_route("/healthz", ["GET"], public=True)
def healthz() -> Response:
    if _SETTINGS.local_mode and _SETTINGS.endpoint_url:
        # Local mode says where its AWS endpoint is, so that brokerctl finds the archive on
        # whatever port `brokerctl dev` chose (a deployed API never says).
        return json_response(
            {"status": "ok", "mode": "local", "awsEndpoint": _SETTINGS.endpoint_url}
        )
    return json_response({"status": "ok"})


@_route("/metrics", ["GET"])
def metrics() -> Response:
    text = get_container().metrics.prometheus_text()
    headers: dict[str, str | list[str]] = {"Content-Type": "text/plain; version=0.0.4"}
    return Response(body=text, status_code=200, headers=headers)


@_route("/{namespace}/{broker}", ALL_METHODS, public=True)
def ingress(namespace: str, broker: str) -> Response:
    headers, body = _request()
    principal = http_ingress.iam_principal(_current().context)
    return http_ingress.answer(
        get_container().ingress, _method(), namespace, broker, headers, body, principal
    )


# ---- OIDC discovery: how subscribers verify the broker's delivery tokens (design.md §2.5) -------

# Public and cacheable: verifiers fetch these once, and again on a token whose kid they lack.
_DISCOVERY_CACHE = {"Cache-Control": "public, max-age=3600"}


@_route("/.well-known/openid-configuration", ["GET"], public=True)
def openid_configuration() -> Response:
    return json_response(get_container().discovery.configuration(), headers=_DISCOVERY_CACHE)


@_route("/.well-known/jwks.json", ["GET"], public=True)
def jwks() -> Response:
    return json_response(get_container().discovery.jwks(), headers=_DISCOVERY_CACHE)


# ---- the API's own description -------------------------------------------------------------------


@_route("/apis/openapi.json", ["GET"])
def openapi_document() -> Response:
    from chalicelib.openapi import document

    # Signed exactly when the routes are (_CP_AUTH): both follow the settings read at import.
    return json_response(document(_SETTINGS.public_url, signed=_CP_AUTH is not None))


# ---- control plane: one shape for every resource kind (design.md §2.2, §10) -------------------

KS = "/apis/sources.knative.dev/v1/namespaces/{namespace}"
ET = "/apis/eventing.knative.dev/v1alpha1/namespaces/{namespace}"
SB = "/apis/serverless-broker.dev/v1alpha1/namespaces/{namespace}"  # our own kinds


def _resource_routes(prefix: str, service: Callable[[], ResourceService[Any]]) -> None:
    """A kind's routes: list and create on its collection; read, create-or-replace and delete
    an item. ``prefix`` ends with the kind's plural (the path segment)."""
    plural = prefix.rsplit("/", 1)[-1]

    def collection(namespace: str) -> Response:
        if _method() == "GET":
            return json_response(service().list(namespace))
        return json_response(service().create(namespace, _json_body()), 201)

    def item(namespace: str, name: str) -> Response:
        method = _method()
        if method == "GET":
            return json_response(service().get(namespace, name))
        if method == "DELETE":
            return json_response(service().delete(namespace, name))
        doc, created = service().put(namespace, name, _json_body(), _dry_run())
        return json_response(doc, 201 if created else 200)

    collection.__name__ = collection.__qualname__ = plural
    item.__name__ = item.__qualname__ = plural.rstrip("s")
    _route(prefix, ["GET", "POST"])(collection)
    _route(f"{prefix}/{{name}}", ["GET", "PUT", "DELETE"])(item)


_resource_routes(f"{CP}/brokers", lambda: get_container().brokers)
_resource_routes(f"{CP}/triggers", lambda: get_container().triggers)
_resource_routes(f"{KS}/kafkasources", lambda: get_container().kafka_sources)
_resource_routes(f"{KS}/pingsources", lambda: get_container().ping_sources)
_resource_routes(
    "/apis/sources.knative.dev/v1alpha1/namespaces/{namespace}/integrationsources",
    lambda: get_container().integration_sources,
)
_resource_routes(f"{ET}/eventtransforms", lambda: get_container().event_transforms)
_resource_routes(
    "/apis/sinks.knative.dev/v1alpha1/namespaces/{namespace}/integrationsinks",
    lambda: get_container().integration_sinks,
)
_resource_routes(f"{ET}/eventpolicies", lambda: get_container().event_policies)
_resource_routes(f"{SB}/connections", lambda: get_container().connections)


def _broker_scoped_routes(plural: str, service: Callable[[], Any]) -> None:
    """``_resource_routes`` for a kind that lives under a broker (replays): list on the
    collection; read, create-or-replace and delete an item (no POST: the name is in the path)."""
    prefix = f"{CP}/brokers/{{broker}}/{plural}"

    def collection(namespace: str, broker: str) -> Response:
        return json_response(service().list(namespace, broker))

    def item(namespace: str, broker: str, name: str) -> Response:
        method = _method()
        if method == "GET":
            return json_response(service().get(namespace, broker, name))
        if method == "DELETE":
            return json_response(service().delete(namespace, broker, name))
        doc, created = service().put(namespace, broker, name, _json_body(), _dry_run())
        return json_response(doc, 201 if created else 200)

    collection.__name__ = collection.__qualname__ = f"broker_{plural}"
    item.__name__ = item.__qualname__ = f"broker_{plural.rstrip('s')}"
    _route(prefix, ["GET"])(collection)
    _route(f"{prefix}/{{name}}", ["GET", "PUT", "DELETE"])(item)


_broker_scoped_routes("replays", lambda: get_container().replays)


# Nothing is created, so not a resource: design.md's ``triggers:test`` (a custom method in the
# style of Google's AIP-136). Whether API Gateway takes a colon in a path part could not be
# checked here (its older error text names only a-zA-Z0-9._- and braces; later reports say REST
# APIs accept it), and one refused route fails the whole deploy: deployed, the call is
# ``triggers-test``; local mode serves both spellings.
def test_filter(namespace: str) -> Response:
    return json_response(get_container().filter_test.run(namespace, _json_body()))


_route(f"{CP}/triggers-test", ["POST"])(test_filter)
if _SETTINGS.local_mode:
    _route(f"{CP}/triggers:test", ["POST"])(test_filter)


@_route(f"{ET}/eventpolicies-test", ["POST"])
def test_event_policy(namespace: str) -> Response:
    """Whether a broker admits an event from a sender (docs/security.md); nothing is sent."""
    return json_response(get_container().policy_test.run(namespace, _json_body()))


@_route(f"{CP}/triggers/{{name}}/deadletters", ["GET", "DELETE"])
def dead_letters(namespace: str, name: str) -> Response:
    c = get_container()
    broker = c.control_plane.broker_of_trigger(namespace, name)
    if _method() == "DELETE":
        return json_response(c.dead_letters.purge(namespace, broker, name))
    limit = parse_limit(_query("limit", "100"))
    return json_response(c.dead_letters.list(namespace, broker, name, limit))


@_route(f"{CP}/triggers/{{name}}/deadletters/redrive", ["POST"])
def redrive_dead_letters(namespace: str, name: str) -> Response:
    c = get_container()
    broker = c.control_plane.broker_of_trigger(namespace, name)
    return json_response(c.dead_letters.redrive(namespace, broker, name), 202)


# ---- control plane: ingress tokens -------------------------------------------------------------


@_route(f"{CP}/brokers/{{name}}/tokens", ["GET", "POST"])
def broker_tokens(namespace: str, name: str) -> Response:
    tokens = get_container().tokens
    if _method() == "GET":
        return json_response(tokens.list(namespace, name))
    return json_response(tokens.create(namespace, name), 201)


@_route(f"{CP}/brokers/{{name}}/tokens/{{token_id}}", ["DELETE"])
def broker_token(namespace: str, name: str, token_id: str) -> Response:
    return json_response(get_container().tokens.revoke(namespace, name, token_id))


# ---- Kafka sources: their failure queues (design.md §10) ------------------------------------


@_route(f"{KS}/kafkasources/{{name}}/failures", ["GET", "DELETE"])
def kafka_source_failures(namespace: str, name: str) -> Response:
    sources = get_container().kafka_source_hooks
    if _method() == "DELETE":
        return json_response(sources.purge_failures(namespace, name))
    return json_response(sources.failures(namespace, name, _query("limit", "100")))


# ---- xRegistry (design.md §9) ----------------------------------------------------------------

REG = "/registry"
ENDPOINT = f"{REG}/endpoints/{{endpointid}}"
MESSAGE = f"{ENDPOINT}/messages/{{messageid}}"


def _params(name: str) -> list[str] | None:
    params = _current().query_params
    return list(params.getlist(name)) if params and name in params else None


def _epoch() -> str | None:
    values = _params("epoch")
    return values[-1] if values else None


@_route(REG, ["GET"])
def registry_root() -> Response:
    return json_response(get_container().registry.root(_params("inline")))


@_route(f"{REG}/model", ["GET"])
def registry_model() -> Response:
    return json_response(get_container().registry.model())


@_route(f"{REG}/endpoints", ["GET"])
def registry_endpoints() -> Response:
    return json_response(get_container().registry.endpoints(_params("inline")))


@_route(ENDPOINT, ["GET", "PUT", "DELETE"])
def registry_endpoint(endpointid: str) -> Response:
    registry = get_container().registry
    method = _method()
    if method == "GET":
        return json_response(registry.endpoint(endpointid, _params("inline")))
    if method == "DELETE":
        registry.delete_endpoint(endpointid, _epoch())
        return Response(body="", status_code=204)
    doc, created = registry.put_endpoint(endpointid, _json_body())
    location = {"Location": registry.location(endpointid)} if created else None
    return json_response(doc, 201 if created else 200, location)


@_route(f"{ENDPOINT}/messages", ["GET"])
def registry_messages(endpointid: str) -> Response:
    return json_response(get_container().registry.messages(endpointid, _params("inline")))


@_route(MESSAGE, ["GET", "DELETE"])
def registry_message(endpointid: str, messageid: str) -> Response:
    registry = get_container().registry
    if _method() == "GET":
        return json_response(registry.message(endpointid, messageid, _params("inline")))
    registry.delete_message(endpointid, messageid, _epoch())
    return Response(body="", status_code=204)


@_route(f"{MESSAGE}/meta", ["GET"])
def registry_message_meta(endpointid: str, messageid: str) -> Response:
    return json_response(get_container().registry.message_meta(endpointid, messageid))


@_route(f"{MESSAGE}/versions", ["GET"])
def registry_message_versions(endpointid: str, messageid: str) -> Response:
    return json_response(get_container().registry.message_versions(endpointid, messageid))


@_route(f"{MESSAGE}/versions/{{versionid}}", ["GET"])
def registry_message_version(endpointid: str, messageid: str, versionid: str) -> Response:
    registry = get_container().registry
    return json_response(registry.message_version(endpointid, messageid, versionid))


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


# The sources' schedules (docs/sources.md): EventBridge Scheduler invokes it with a schedule's
# input (its event template, sink and scheduled time); locally brokerctl/local_schedules.py does.
@app.lambda_function(name="pings")
def pings(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return get_container().pings.handle(event, context)


# IntegrationSources' records (docs/sources.md): SQS and DynamoDB Streams event source mappings
# (partial batch failures) and the S3 EventBridge rule invoke it; locally brokerctl's pollers do.
@app.lambda_function(name="sources")
def sources(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return get_container().source_events.handle(event, context)


# Replays (docs/replay.md): every minute, runs the unfinished replays for up to its budget (its
# timeout less a margin), checkpointing each batch; a replay longer than one run is continued by
# the next, from its checkpoint. Runs that overlap take different replays (a lease each).
REPLAYER_BUDGET_SECONDS = 780.0


@app.schedule("rate(1 minute)", name="replayer")
def replayer(event: Any) -> None:
    get_container().replay_runner.run_pending(REPLAYER_BUDGET_SECONDS)


@app.schedule("rate(5 minutes)", name="reconciler")
def reconciler(event: Any) -> None:
    get_container().control_plane.reconcile_all()
    get_container().kafka_source_hooks.reconcile_all()
    get_container().ping_source_hooks.reconcile_all()
    get_container().integration_source_hooks.reconcile_all()
