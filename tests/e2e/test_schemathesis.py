"""Schemathesis against the local runtime (real HTTP, real moto), driven by the API's own OpenAPI
document: for every operation, generated requests (valid and invalid by the schema) must get
no 5xx, only documented statuses and content types, and bodies that match their schemas.

Bounded by default (``SCHEMATHESIS_EXAMPLES`` per operation, 8); raise it for a longer hunt, e.g.
``SCHEMATHESIS_EXAMPLES=200 pytest tests/e2e/test_schemathesis.py``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.generation.case import Case
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from brokerctl.event_display import EventDisplay
from chalicelib.openapi import document
from tests.e2e.conftest import LocalBroker

EXAMPLES = int(os.environ.get("SCHEMATHESIS_EXAMPLES", "8"))
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
]

# The same document the runtime serves (checked below), built in process so that collection
# needs no running server.
schema = schemathesis.openapi.from_dict(document("http://127.0.0.1", signed=False))
schema.config.generation.update(
    modes=[GenerationMode.POSITIVE, GenerationMode.NEGATIVE],
    max_examples=EXAMPLES,
    deterministic=True,
)


def test_the_runtime_serves_this_document(local_broker: LocalBroker) -> None:
    served = httpx.get(f"{local_broker.url}/apis/openapi.json", timeout=30).json()
    assert served == document(local_broker.url, signed=False)


@pytest.fixture(scope="module")
def api(local_broker: LocalBroker) -> Iterator[str]:
    """The runtime with a broker and a trigger where the document's examples point (namespace and
    broker ``default``), so generated events are stored and delivered, not only refused."""
    with EventDisplay() as subscriber:
        local_broker.put("default", "brokers", "default", {"metadata": {"name": "default"}})
        trigger = {"broker": "default", "subscriber": {"uri": subscriber.url}}
        local_broker.put(
            "default", "triggers", "all", {"metadata": {"name": "all"}, "spec": trigger}
        )
        local_broker.wait_ready("default", "triggers", "all")
        yield local_broker.url


@schema.parametrize()
@settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,
    suppress_health_check=list(HealthCheck),
)
def test_api(case: Case, api: str) -> None:
    case.call_and_validate(base_url=api, checks=CHECKS, timeout=30)
