"""The HTTP side of a broker's ingress URL (design.md §2.1): the method, the WebHook handshake,
and the status, headers and body that answer ``Ingress.accept``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from chalice.app import Response

from chalicelib.core.errors import (
    BrokerError,
    InFlightError,
    MethodNotAllowedError,
    UnauthorizedError,
)
from chalicelib.http_errors import problem_response
from chalicelib.problems import problem_of
from chalicelib.services.ingress import Ingress

ALLOW = "POST, OPTIONS"
# CloudEvents HTTP WebHook abuse protection: any origin may deliver, at any rate.
WEBHOOK_GRANT = {"WebHook-Allowed-Origin": "*", "WebHook-Allowed-Rate": "*"}


def answer(
    ingress: Ingress,
    method: str,
    namespace: str,
    broker: str,
    headers: Mapping[str, str],
    body: bytes,
    principal: str | None = None,
) -> Response:
    """The answer to one request on ``/{namespace}/{broker}``; ``headers`` have lower-case names,
    ``principal`` is the IAM principal AWS authenticated the request as (``iam_principal``)."""
    method = method.upper()
    if method == "OPTIONS":
        return Response(body="", status_code=200, headers={"Allow": ALLOW, **WEBHOOK_GRANT})
    try:
        if method != "POST":
            refused = MethodNotAllowedError(f"{method} is not allowed here; send events with POST")
            raise ingress.refuse(namespace, broker, "method_not_allowed", refused)
        ingress.accept(namespace, broker, headers, body, principal)
    except BrokerError as exc:
        out = {"Allow": ALLOW}
        if isinstance(exc, UnauthorizedError):
            out["WWW-Authenticate"] = 'Bearer realm="broker"'
        if isinstance(exc, InFlightError):
            out["Retry-After"] = str(exc.retry_after)
        return problem_response(problem_of(exc), out)
    # An empty text body, never bytes: Chalice hands a bytes body of a non-binary type to Lambda
    # as it is, and the runtime cannot serialise it (API Gateway would answer 502).
    return Response(body="", status_code=202, headers={"Allow": ALLOW})


def iam_principal(request_context: Mapping[str, Any] | None) -> str | None:
    """The ARN of the IAM principal AWS authenticated the request as, or None: a Function URL
    with AuthType AWS_IAM puts it in ``authorizer.iam.userArn``, API Gateway with IAM
    authorization in ``identity.userArn`` (docs/security.md). AWS writes the request context, so
    no client can set either; a route without IAM authorization has neither."""
    context = request_context or {}
    authorizer = context.get("authorizer")
    iam = authorizer.get("iam") if isinstance(authorizer, Mapping) else None
    identity = context.get("identity")
    for source in (iam, identity):
        arn = source.get("userArn") if isinstance(source, Mapping) else None
        if isinstance(arn, str) and arn:
            return arn
    return None
