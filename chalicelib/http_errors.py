"""Chalice responses: problem documents, JSON bodies, and what ``app.errors_as_problems`` answers
for an exception or for one of Chalice's own error answers."""

from __future__ import annotations

import json
import logging
import uuid
from typing import Any

from chalice.app import Response

from chalicelib.core.errors import BrokerError
from chalicelib.problems import PROBLEM_TYPE, internal_problem, problem_document, problem_of


def problem_response(doc: dict[str, Any], headers: dict[str, str] | None = None) -> Response:
    out: dict[str, str | list[str]] = {**(headers or {}), "Content-Type": PROBLEM_TYPE}
    return Response(body=json.dumps(doc), status_code=doc["status"], headers=out)


def problem_from(exc: BrokerError) -> Response:
    return problem_response(problem_of(exc))


def json_response(body: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    out: dict[str, str | list[str]] = {"Content-Type": "application/json"}
    if headers:
        out.update(headers)
    return Response(body=json.dumps(body), status_code=status, headers=out)


def error_response(exc: BaseException, correlation_id: str | None, log: logging.Logger) -> Response:
    """A BrokerError as its problem document; anything else as a 500 that names only the
    correlation id under which the traceback is logged (no exception text: it may carry
    internals, an AWS ARN or a piece of the request)."""
    if isinstance(exc, BrokerError):
        response = problem_from(exc)
        if response.status_code >= 500:
            log.warning("%s (correlation id %s)", exc.detail, correlation_id)
        return response
    cid = correlation_id or uuid.uuid4().hex
    log.error("unexpected %s, correlation id %s", type(exc).__name__, cid, exc_info=exc)
    return problem_response(internal_problem(cid))


# Chalice's own answers (before or around the view) carry {"Code", "Message"} as JSON.
_CHALICE_SLUGS = {
    "MethodNotAllowedError": ("method-not-allowed", "Method not allowed"),
    "UnsupportedMediaType": ("unsupported-media-type", "Unsupported media type"),
    "BadRequest": ("bad-request", "Bad request"),
}


def with_problem_body(response: Response) -> Response:
    """``response``, unless it is one of Chalice's own error answers: then the same status and
    headers with a problem+json body, so every error of the API has one shape (design.md §2)."""
    body = response.body
    if response.status_code < 400 or not isinstance(body, dict) or set(body) != {"Code", "Message"}:
        return response
    code = str(body["Code"])
    if code == "InternalServerError":
        return problem_response(internal_problem(None))
    slug, title = _CHALICE_SLUGS.get(code, ("error", code))
    doc = problem_document(response.status_code, title, str(body["Message"]), slug)
    headers = {
        str(k): str(v) for k, v in response.headers.items() if str(k).lower() != "content-type"
    }
    return problem_response(doc, headers)
