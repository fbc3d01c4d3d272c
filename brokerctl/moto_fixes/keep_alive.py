"""moto's server runs on werkzeug's development server, which answers every request with
``Connection: close`` (https://github.com/pallets/werkzeug/pull/2399): a request body the
application did not read would be taken for the next request, so every AWS call of the broker
(hundreds a second from the pollers of many triggers) opened a TCP connection of its own. moto's
request handler here serves HTTP/1.1 keep-alive: every request's body is read to its end after
the answer, so the connection stays usable; a chunked request still closes its connection, as
werkzeug decides."""

from __future__ import annotations

import socket
from typing import Any


def keep_alive_handler() -> type:
    from moto.moto_server.werkzeug_app import MotoRequestHandler
    from werkzeug.wsgi import LimitedStream

    class _NothingLeft:
        """Stands in for the socket while werkzeug "discards what is left" after an answer, which
        would otherwise swallow the next request on a kept-alive connection."""

        @staticmethod
        def read(size: int = -1) -> bytes:
            return b""

    class KeepAliveHandler(MotoRequestHandler):
        protocol_version = "HTTP/1.1"
        timeout = 300  # an idle kept-alive connection holds a thread: let it go after 5 min
        _body: Any = None

        def setup(self) -> None:
            super().setup()
            # Headers and body leave in separate writes: without this, Nagle's algorithm holds
            # the body until the client's delayed ACK (~40 ms per call on a kept connection).
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

        def make_environ(self) -> dict[str, Any]:
            environ: dict[str, Any] = super().make_environ()
            if self._body is not None:
                environ["wsgi.input"] = self._body
            return environ

        def send_header(self, keyword: str, value: str) -> None:
            if keyword.lower() == "connection" and value == "close" and self._body is not None:
                return  # the body is read to its end below: the connection carries the next one
            super().send_header(keyword, value)

        def run_wsgi(self) -> None:
            if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                self._body = None  # werkzeug's own handling, which closes the connection
                super().run_wsgi()
                return
            real: Any = self.rfile
            self._body = LimitedStream(real, int(self.headers.get("Content-Length") or 0))
            self.rfile = _NothingLeft()  # type: ignore[assignment]
            try:
                super().run_wsgi()
            finally:
                self.rfile = real
            self._body.exhaust()

        def log_request(self, *args: Any, **kwargs: Any) -> None:
            return None

    return KeepAliveHandler
