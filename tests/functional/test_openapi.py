"""GET /apis/openapi.json describes exactly the app's routes, as a valid OpenAPI 3.1 document."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from chalice.test import Client
from openapi_spec_validator import validate
from openapi_spec_validator.validation.exceptions import OpenAPIValidationError

from app import app
from chalicelib.openapi import document
from chalicelib.problems import PROBLEM_TYPE

VERBS = {"get", "put", "post", "delete", "options", "head", "patch", "trace"}


@pytest.fixture
def served() -> Iterator[dict[str, Any]]:
    with Client(app) as client:
        r = client.http.get("/apis/openapi.json")
    assert r.status_code == 200 and r.headers["Content-Type"] == "application/json"
    yield json.loads(r.body)


def _operations(doc: dict[str, Any]) -> set[tuple[str, str]]:
    return {
        (path, verb.upper())
        for path, item in doc["paths"].items()
        for verb in item
        if verb in VERBS
    }


def test_the_document_lists_exactly_the_apps_routes_and_methods(served: dict[str, Any]) -> None:
    routes = {(path, method) for path, methods in app.routes.items() for method in methods}
    assert _operations(served) == routes


@pytest.mark.parametrize("signed", [False, True])
def test_the_document_is_valid_openapi_3_1(signed: bool) -> None:
    doc = document("https://broker.example/api", signed=signed)
    assert doc["openapi"].startswith("3.1.")
    validate(doc)
    assert ("security" in doc) is signed


def test_the_validator_can_fail() -> None:
    doc = document("http://127.0.0.1:8080", signed=False)
    doc["paths"]["/healthz"]["get"]["responses"] = "none"
    with pytest.raises(OpenAPIValidationError):
        validate(doc)


def test_every_operation_names_its_errors_as_problems(served: dict[str, Any]) -> None:
    ids = []
    for item in served["paths"].values():
        for verb, op in item.items():
            if verb not in VERBS:
                continue
            ids.append(op["operationId"])
            for status in ("4XX", "5XX"):
                assert PROBLEM_TYPE in op["responses"][status]["content"], op["operationId"]
    assert len(ids) == len(set(ids))


def test_path_parameters_are_declared_for_every_template(served: dict[str, Any]) -> None:
    for path, item in served["paths"].items():
        declared = {p["name"] for p in item.get("parameters", []) if p["in"] == "path"}
        wanted = {part[1:-1] for part in path.split("/") if part.startswith("{")}
        assert declared == wanted, path


def test_local_mode_publishes_no_security_requirement(served: dict[str, Any]) -> None:
    # The tests run in local mode (tests/conftest.py): the control plane is open on loopback.
    assert "security" not in served
    assert served["servers"] == [{"url": "http://127.0.0.1:8080"}]
