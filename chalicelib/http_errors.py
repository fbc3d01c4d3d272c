"""Chalice responses for problem documents and JSON bodies."""

from __future__ import annotations

import json
from typing import Any

from chalice import Response

from chalicelib.core.errors import BrokerError
from chalicelib.problems import PROBLEM_TYPE, problem_document, problem_of


def problem(status: int, title: str, detail: str, slug: str) -> Response:
    return Response(
        body=json.dumps(problem_document(status, title, detail, slug)),
        status_code=status,
        headers={"Content-Type": PROBLEM_TYPE},
    )


def problem_from(exc: BrokerError) -> Response:
    doc = problem_of(exc)
    return Response(
        body=json.dumps(doc), status_code=doc["status"], headers={"Content-Type": PROBLEM_TYPE}
    )


def json_response(body: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    out = {"Content-Type": "application/json"}
    if headers:
        out.update(headers)
    return Response(body=json.dumps(body), status_code=status, headers=out)
