"""The app on brokerctl's local HTTP server, over a harness with one broker and a trigger that
takes every event: what the framing tests and the framing fuzz both serve."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from app import app
from brokerctl.embedded_aws import free_port
from brokerctl.http_server import AppServer
from chalicelib.container import use_container
from tests.functional.harness import Harness


@contextmanager
def serving() -> Iterator[tuple[Harness, int]]:
    """(the harness, the server's port) while the server runs."""
    h = Harness()
    h.broker()
    h.trigger("all")
    use_container(h.container)
    server = AppServer(app, "127.0.0.1", free_port(), lambda line: None).start()
    try:
        yield h, int(server.url.rsplit(":", 1)[1])
    finally:
        server.stop()
        use_container(None)
