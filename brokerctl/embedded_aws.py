"""The embedded AWS endpoint of local mode: a real moto server over HTTP on loopback, in a process
of its own (``python -m brokerctl.embedded_aws``).

Its own process, because moto's request handling is pure Python: sharing an interpreter (and its
lock) with the broker's ingress, pollers and delivery made every AWS call wait on the broker's work
and the other way round. It exits with the process that started it. What it changes in moto, and
why, is brokerctl/moto_fixes/ (one module per moto behaviour, for the one moto version they are
written against: another one is refused before the process starts).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import socket
import subprocess
import sys
import threading
import time

from brokerctl import moto_fixes
from brokerctl.processes import end_process

READY_LINE = "embedded AWS endpoint ready"


def serve(host: str, port: int) -> None:
    """Run the moto server in this process until it is killed or its parent exits."""
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app
    from werkzeug.serving import make_server

    from brokerctl.kafka_local import allow_kafka_mappings_in_moto

    moto_fixes.apply()
    allow_kafka_mappings_in_moto()
    app = DomainDispatcherApplication(create_backend_app)
    server = make_server(
        host, port, app, threaded=True, request_handler=moto_fixes.keep_alive_handler()
    )
    parent = os.getppid()

    def orphaned() -> None:  # exit with the broker that started us, however it ended
        while os.getppid() == parent:
            time.sleep(1.0)
        os._exit(0)

    threading.Thread(target=orphaned, name="parent-watch", daemon=True).start()
    print(f"{READY_LINE} on http://{host}:{port}", flush=True)
    server.serve_forever()


class EmbeddedAws:
    """Starts and stops the moto server process on ``host:port``."""

    def __init__(self, host: str = "127.0.0.1", port: int = 4566, start_timeout: float = 60.0):
        self.host = host
        self.port = port
        self._timeout = start_timeout
        self._process: subprocess.Popen[str] | None = None
        self._pump: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self) -> str:
        moto_fixes.require_pinned_moto(moto_fixes.installed_moto())
        if not port_is_free(self.host, self.port):
            raise OSError(
                f"port {self.port} on {self.host} is in use: set BROKER_AWS_PORT or --aws-port, "
                "or point AWS_ENDPOINT_URL at the emulator already running there"
            )
        self._process = subprocess.Popen(
            [sys.executable, "-m", "brokerctl.embedded_aws", "--host", self.host,
             "--port", str(self.port)],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )  # fmt: skip
        output: list[str] = []

        stdout = self._process.stdout
        assert stdout is not None

        def pump() -> None:  # read its output so it never blocks on a full pipe
            with stdout:
                for line in stdout:
                    if len(output) < 200:
                        output.append(line.rstrip("\n"))

        self._pump = threading.Thread(target=pump, name="moto-output", daemon=True)
        self._pump.start()
        deadline = time.monotonic() + self._timeout
        while not _answers(self.host, self.port):
            if self._process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise OSError("the embedded AWS endpoint did not start:\n" + "\n".join(output))
            time.sleep(0.05)
        return self.url

    def stop(self) -> None:
        process, self._process = self._process, None
        if process is None:
            return
        end_process(process)
        if self._pump is not None:
            self._pump.join(timeout=5)  # it closes the pipe at its end


def _answers(host: str, port: int) -> bool:
    with contextlib.suppress(OSError), socket.create_connection((host, port), timeout=0.5):
        return True
    return False


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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=4566)
    args = parser.parse_args(argv)
    try:
        serve(args.host, args.port)
    except moto_fixes.MotoVersionError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
