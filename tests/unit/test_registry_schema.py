"""The endpoint document JSON schema of the xRegistry spec, as the registry tests use it: every
document the API returns must validate. Formats are asserted too: ``date-time`` (RFC 3339),
``uri`` (an absolute RFC 3986 URI) and ``xid`` (starts with ``/``)."""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from chalicelib.core.cloudevents.context_attributes import is_absolute_uri
from tests.shared_specs import require

SCHEMA_PATH = (
    Path(__file__).parents[2].parent
    / "shared/specs/xregistry/endpoint_schemas_document-schema.json"
)
require(SCHEMA_PATH)


@lru_cache(maxsize=1)
def _schema() -> dict[str, Any]:
    return json.loads(SCHEMA_PATH.read_text())


def _checker() -> jsonschema.FormatChecker:
    checker = jsonschema.FormatChecker()
    for name, fn in jsonschema.Draft7Validator.FORMAT_CHECKER.checkers.items():
        checker.checkers[name] = fn
    checker.checks("uri")(lambda v: not isinstance(v, str) or is_absolute_uri(v))
    checker.checks("xid")(lambda v: not isinstance(v, str) or v.startswith("/"))
    return checker


def _validator(schema: dict[str, Any]) -> jsonschema.Draft7Validator:
    return jsonschema.Draft7Validator(schema, format_checker=_checker())


def errors_of(doc: Any, what: str = "document") -> list[str]:
    schema = _schema()
    if what != "document":
        schema = {"$ref": f"#/definitions/{what}", "definitions": schema["definitions"]}
    found = _validator(schema).iter_errors(doc)
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in found]


def assert_valid_document(doc: Any) -> None:
    """A registry root or ``{"endpoints": {...}}`` document."""
    assert not errors_of(doc), errors_of(doc)


def assert_valid_endpoints(endpoints: dict[str, Any]) -> None:
    assert_valid_document({"endpoints": endpoints})


def assert_valid_endpoint(endpoint: dict[str, Any]) -> None:
    assert_valid_document({"endpoints": {endpoint["endpointid"]: endpoint}})


def assert_valid_message(message: dict[str, Any]) -> None:
    errors = errors_of(message, "messagegroup-schema/message")
    assert not errors, errors


# ---- the helper itself can fail ----------------------------------------------------------------

GOOD = {
    "endpointid": "e1",
    "self": "https://example.com/registry/endpoints/e1",
    "xid": "/endpoints/e1",
    "epoch": 1,
    "createdat": "2024-01-01T00:00:00Z",
    "modifiedat": "2024-01-01T00:00:00Z",
    "usage": ["producer"],
    "protocol": "HTTP",
    "protocoloptions": {"endpoints": [{"uri": "https://example.com/in"}], "method": "POST"},
}


def test_the_schema_file_is_there() -> None:
    assert SCHEMA_PATH.is_file(), f"CI needs ../shared beside the repository: {SCHEMA_PATH}"


def test_a_good_endpoint_validates() -> None:
    assert_valid_endpoint(GOOD)


@pytest.mark.parametrize(
    "change",
    [
        {"usage": "producer"},  # rc4: an array
        {"epoch": "1"},
        {"createdat": "yesterday"},
        {"self": "not a uri"},
        {"xid": "endpoints/e1"},
        {"protocoloptions": {"endpoints": [{"uri": "/relative"}]}},
        {"protocoloptions": {"method": 1}},
        {"envelope": "CloudEvents/1.0", "envelopeoptions": {"mode": 1}},
        {"protocol": "MQTT/5.0", "protocoloptions": {"qos": -1}},
    ],
)
def test_the_schema_rejects_a_bad_endpoint(change: dict[str, Any]) -> None:
    assert errors_of({"endpoints": {"e1": {**GOOD, **change}}})
