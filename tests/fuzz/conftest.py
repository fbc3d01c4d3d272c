"""Hostile input through the Chalice app in process (the in-memory fakes behind it): no answer
≥ 500, every 4xx a problem document. ``FUZZ_EXAMPLES`` sets the examples per test (default 200)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from typing import Any

import pytest
from chalice.test import Client
from hypothesis import HealthCheck, settings

from app import app
from chalicelib.container import use_container
from chalicelib.ports import HttpResponse
from tests.functional.harness import Harness

EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "200"))
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@pytest.fixture(scope="module")
def harness() -> Iterator[Harness]:
    h = Harness(HttpResponse(202, {}, b""))
    use_container(h.container)
    h.broker("ns", "default")
    h.trigger("sql", filters=[{"cesql": "INT(seq) > 5 AND type LIKE 'com.%' OR source = '/x'"}])
    yield h
    use_container(None)


@pytest.fixture(scope="module")
def client(harness: Harness) -> Iterator[Client]:
    with Client(app) as c:
        yield c


def check_answer(status: int, headers: dict[str, str], body: bytes, what: str) -> None:
    """The invariant of the whole suite."""
    assert status < 500, f"{what}: {status} {body[:300]!r}"
    if 400 <= status < 500:
        lower = {k.lower(): v for k, v in headers.items()}
        assert lower.get("content-type") == "application/problem+json", f"{what}: {lower}"
        doc: Any = json.loads(body)
        assert {"type", "title", "status", "detail"} <= set(doc), f"{what}: {doc}"
        assert doc["status"] == status
