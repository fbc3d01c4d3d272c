"""CLI test helpers: brokerctl run in-process against a tiny recording API server, or as a
subprocess (``python -m brokerctl``) against the local runtime."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from brokerctl.__main__ import main
from tests.e2e.conftest import ROOT


@dataclass
class Seen:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class Answer:
    status: int = 200
    doc: Any = field(default_factory=dict)
    content_type: str = "application/json"


class RecordingApi:
    """Records every request; ``answers[(method, path)]`` chooses the answer (default 200 {})."""

    def __init__(self) -> None:
        self.seen: list[Seen] = []
        self.answers: dict[tuple[str, str], Answer] = {}
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _any(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                parts = urlsplit(self.path)
                outer.seen.append(
                    Seen(
                        self.command,
                        parts.path,
                        parse_qs(parts.query),
                        {k.lower(): v for k, v in self.headers.items()},
                        self.rfile.read(length) if length else b"",
                    )
                )
                answer = outer.answers.get((self.command, parts.path), Answer())
                body = b"" if answer.doc is None else json.dumps(answer.doc).encode()
                self.send_response(answer.status)
                self.send_header("Content-Type", answer.content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST = do_PUT = do_DELETE = _any

            def log_message(self, format: str, *args: Any) -> None:
                return None

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(0.02,), daemon=True
        )
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"

    def answer(self, method: str, path: str, status: int = 200, doc: Any = None, **kw: Any) -> None:
        self.answers[(method, path)] = Answer(status, {} if doc is None else doc, **kw)

    def start(self) -> RecordingApi:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()


@pytest.fixture
def api() -> Iterator[RecordingApi]:
    server = RecordingApi().start()
    yield server
    server.stop()


@dataclass
class Result:
    code: int
    out: str
    err: str


Runner = Callable[..., Result]


@pytest.fixture
def cli(
    api: RecordingApi, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> Runner:
    """``cli("broker", "list")``: brokerctl in-process against the recording server."""
    for name in ("BROKERCTL_URL", "BROKERCTL_NAMESPACE", "BROKERCTL_TOKEN"):
        monkeypatch.delenv(name, raising=False)

    def run(*argv: str) -> Result:
        capsys.readouterr()
        try:
            code = main([*argv, "--url", api.url])
        except SystemExit as exc:  # argparse: usage errors
            code = int(exc.code or 0)
        captured = capsys.readouterr()
        return Result(code, captured.out, captured.err)

    return run


def run_brokerctl(
    *argv: str, env: dict[str, str] | None = None, stdin: bytes | None = None
) -> Result:
    """``python -m brokerctl ...`` as a subprocess, as a user runs it."""
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("BROKERCTL_")}
    full_env.update(env or {})
    done = subprocess.run(
        [sys.executable, "-m", "brokerctl", *argv],
        cwd=ROOT,
        env=full_env,
        input=stdin,
        capture_output=True,
        timeout=60,
    )
    return Result(done.returncode, done.stdout.decode(), done.stderr.decode())
