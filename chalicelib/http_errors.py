"""Chalice responses for problem documents and JSON bodies."""

from __future__ import annotations

import json
from typing import Any

from chalice.app import Response

from chalicelib.core.errors import BrokerError
from chalicelib.problems import PROBLEM_TYPE, problem_of


def problem_from(exc: BrokerError) -> Response:
    doc = problem_of(exc)
    headers: dict[str, str | list[str]] = {"Content-Type": PROBLEM_TYPE}
    return Response(body=json.dumps(doc), status_code=doc["status"], headers=headers)


def json_response(body: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    out: dict[str, str | list[str]] = {"Content-Type": "application/json"}
    if headers:
        out.update(headers)
    return Response(body=json.dumps(body), status_code=status, headers=out)
