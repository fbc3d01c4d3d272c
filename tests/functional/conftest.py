"""Fixtures the control-plane tests share: a harness (its subscribers answer 202) installed as
the app's container, and chalice's test client of the app. A module with its own ``h`` overrides
this one."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from chalice.test import Client

from app import app
from chalicelib.container import use_container
from chalicelib.ports import HttpResponse
from tests.functional.harness import Harness


@pytest.fixture
def h() -> Iterator[Harness]:
    h = Harness(HttpResponse(202, {}, b""))
    use_container(h.container)
    yield h
    use_container(None)


@pytest.fixture
def client() -> Iterator[Client]:
    with Client(app) as c:
        yield c
