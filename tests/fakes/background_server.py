"""The lifecycle of a test fake served by ``http.server`` from a daemon thread (the fault proxy
in front of the AWS endpoint, Lambda's Extensions API): fakes that need the raw connection (an
abortive reset, a request held open) rather than a WSGI server like brokerctl's own."""

from __future__ import annotations

import threading
from http.server import ThreadingHTTPServer
from typing import Self


class BackgroundServer:
    def _serve(self, server: ThreadingHTTPServer) -> None:
        server.daemon_threads = True
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def start(self) -> Self:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
