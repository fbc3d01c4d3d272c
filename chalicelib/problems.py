"""The one place where domain errors become HTTP statuses and RFC 9457 problem documents."""

from __future__ import annotations

from typing import Any

from chalicelib.core.errors import (
    BrokerError,
    ConflictError,
    ForbiddenError,
    ImmutableFieldError,
    MethodNotAllowedError,
    NotFoundError,
    PayloadTooLargeError,
    UnauthorizedError,
    UnavailableError,
    ValidationError,
)

PROBLEM_TYPE = "application/problem+json"

_STATUS: list[tuple[type[BrokerError], int, str]] = [
    (ImmutableFieldError, 422, "immutable-field"),
    (ValidationError, 400, "validation"),
    (UnauthorizedError, 401, "unauthorized"),
    (ForbiddenError, 403, "forbidden"),
    (NotFoundError, 404, "not-found"),
    (MethodNotAllowedError, 405, "method-not-allowed"),
    (ConflictError, 409, "conflict"),
    (PayloadTooLargeError, 413, "payload-too-large"),
    (UnavailableError, 503, "unavailable"),
]


def _lookup(exc: BrokerError) -> tuple[int, str]:
    for cls, status, slug in _STATUS:
        if isinstance(exc, cls):
            return status, slug
    return 500, "internal"


def status_of(exc: BrokerError) -> int:
    return _lookup(exc)[0]


def problem_document(
    status: int, title: str, detail: str, slug: str, errors: list[dict[str, str]] | None = None
) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "type": f"https://serverless-broker.dev/problems/{slug}",
        "title": title,
        "status": status,
        "detail": detail,
    }
    if errors:
        doc["errors"] = errors
    return doc


def problem_of(exc: BrokerError) -> dict[str, Any]:
    status, slug = _lookup(exc)
    errors = [p.to_json() for p in exc.problems] if isinstance(exc, ValidationError) else None
    doc = problem_document(status, exc.title, exc.detail, slug, errors)
    if isinstance(exc, ForbiddenError):
        doc["decision"] = exc.decision
    return doc


INGRESS_SHAPE = "POST /{namespace}/{broker}"


def no_route_problem() -> dict[str, Any]:
    """The answer to a path no route matches, locally and from API Gateway (whose default is a
    misleading ``403 Missing Authentication Token``; see ``infra/gateway_responses.py``)."""
    return problem_document(
        404,
        "No such route",
        f"no such route; events go to {INGRESS_SHAPE}, the control plane is under "
        "/apis/eventing.knative.dev/v1/namespaces/{namespace}/",
        "no-such-route",
    )


def internal_problem(correlation_id: str | None) -> dict[str, Any]:
    """The answer to an error nobody anticipated: nothing of the exception, only the id under
    which the operator finds it in the logs."""
    if not correlation_id:
        return problem_document(500, "Internal error", "an unexpected error occurred", "internal")
    detail = f"an unexpected error occurred; it is logged under correlation id {correlation_id}"
    doc = problem_document(500, "Internal error", detail, "internal")
    doc["correlationId"] = correlation_id
    return doc
