"""The embedded AWS endpoint of local mode: a real moto server over HTTP on loopback."""

from __future__ import annotations

import contextlib
import socket
from typing import Any


def _disable_moto_lambda_invocation() -> None:
    """moto answers SendMessage on a queue with an event source mapping by receiving the messages
    itself and invoking the function in Docker (absent here), which bumps receive counts and
    steals messages. On AWS the Lambda poller does that, and in local mode our event-source
    emulation plays the poller, so the queue must not see moto's own mapping registry."""
    from moto.sqs import models

    def _get(self: Any) -> dict[str, Any]:
        return {}

    def _set(self: Any, value: Any) -> None:
        return None

    models.Queue.lambda_event_source_mappings = property(_get, _set)  # type: ignore[assignment]


class EmbeddedAws:
    def __init__(self, host: str = "127.0.0.1", port: int = 4566) -> None:
        self.host = host
        self.port = port
        self._server: Any = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self) -> str:
        if not port_is_free(self.host, self.port):
            raise OSError(
                f"port {self.port} on {self.host} is in use: set BROKER_AWS_PORT or --aws-port, "
                "or point AWS_ENDPOINT_URL at the emulator already running there"
            )
        _disable_moto_lambda_invocation()
        from moto.moto_server.werkzeug_app import MotoRequestHandler
        from moto.server import ThreadedMotoServer

        MotoRequestHandler.log_request = lambda *args, **kwargs: None  # type: ignore[method-assign]

        self._server = ThreadedMotoServer(ip_address=self.host, port=self.port, verbose=False)
        self._server.start()
        return self.url

    def stop(self) -> None:
        if self._server is not None:
            with contextlib.suppress(Exception):
                self._server.stop()
            self._server = None


def port_is_free(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
