"""The local runtime exactly as ``make run`` starts it (``python -m brokerctl dev``), as a
subprocess on free ports, plus helpers that wait on conditions with deadlines."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from brokerctl.embedded_aws import free_port

ROOT = Path(__file__).resolve().parents[2]
CP = "/apis/eventing.knative.dev/v1/namespaces"


@dataclass
class LocalBroker:
    url: str
    aws_url: str
    process: subprocess.Popen[str]
    lines: list[str] = field(default_factory=list)
    emulator: str = "moto"  # or "localstack"
    pump: threading.Thread | None = None

    def cp(self, namespace: str) -> str:
        return f"{self.url}{CP}/{namespace}"

    def put(self, namespace: str, kind: str, name: str, body: dict[str, Any]) -> httpx.Response:
        return httpx.put(f"{self.cp(namespace)}/{kind}/{name}", json=body, timeout=30)

    def wait_ready(
        self, namespace: str, kind: str, name: str, timeout: float = 30
    ) -> dict[str, Any]:
        def ready() -> dict[str, Any] | None:
            doc = httpx.get(f"{self.cp(namespace)}/{kind}/{name}", timeout=10).json()
            conds = {c["type"]: c["status"] for c in doc.get("status", {}).get("conditions", [])}
            return doc if conds.get("Ready") == "True" else None

        return wait_until(ready, timeout, f"{kind}/{name} Ready")


def wait_until(check: Callable[[], Any], timeout: float, what: str, every: float = 0.1) -> Any:
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(every)
    raise AssertionError(f"timed out after {timeout}s waiting for {what} (last: {last!r})")


def start_local_broker(
    extra_env: dict[str, str] | None = None,
    aws_endpoint: str | None = None,
    port: int | None = None,
    args: tuple[str, ...] = (),
) -> LocalBroker:
    """``brokerctl dev`` on free ports, with its embedded AWS endpoint, or on ``aws_endpoint``
    (an endpoint that outlives it: the fault matrix restarts the broker against the same one).
    ``args`` are more options of ``brokerctl dev``."""
    port, aws_port = port or free_port(), free_port()
    env = {
        **os.environ,
        "BROKER_PORT": str(port),
        "BROKER_AWS_PORT": str(aws_port),
        "BROKER_CACHE_TTL_SECONDS": "1",
        "PYTHONUNBUFFERED": "1",
        **(extra_env or {}),
    }
    env.pop("AWS_ENDPOINT_URL", None)
    if aws_endpoint is not None:
        env["AWS_ENDPOINT_URL"] = aws_endpoint
    process = subprocess.Popen(
        [sys.executable, "-m", "brokerctl", "dev", *args],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    aws_url = aws_endpoint or f"http://127.0.0.1:{aws_port}"
    broker = LocalBroker(f"http://127.0.0.1:{port}", aws_url, process)
    ready = threading.Event()

    def pump() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            broker.lines.append(line.rstrip("\n"))
            if line.startswith("ready: "):
                ready.set()

    broker.pump = threading.Thread(target=pump, daemon=True)
    broker.pump.start()
    deadline = time.monotonic() + 60
    while not ready.wait(0.1):
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            raise AssertionError("local broker did not start:\n" + "\n".join(broker.lines))
    return broker


def stop_local_broker(broker: LocalBroker) -> None:
    broker.process.send_signal(signal.SIGINT)
    try:
        broker.process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        broker.process.kill()
        broker.process.wait()
    if broker.pump is not None:
        broker.pump.join(timeout=5)
    if broker.process.stdout is not None:
        broker.process.stdout.close()


@pytest.fixture(scope="module")
def local_broker() -> Iterator[LocalBroker]:
    broker = start_local_broker()
    yield broker
    stop_local_broker(broker)
    # Shown by pytest only when a test of the module failed: the runtime's side of the story.
    print("\n--- local runtime output (last 300 lines) ---\n" + "\n".join(broker.lines[-300:]))


@pytest.fixture(
    scope="module", params=["moto", pytest.param("localstack", marks=pytest.mark.localstack)]
)
def any_local_broker(request: pytest.FixtureRequest) -> Iterator[LocalBroker]:
    """The local runtime on its embedded moto, then against LocalStack's runtime as a user runs
    it: ``brokerctl dev --endpoint localstack`` with ``LOCALSTACK_HOST`` (localstack-client)."""
    if request.param == "moto":
        broker = start_local_broker()
    else:
        endpoint: str = request.getfixturevalue("localstack_endpoint")
        host = endpoint.removeprefix("http://")
        broker = start_local_broker({"LOCALSTACK_HOST": host}, args=("--endpoint", "localstack"))
        broker.aws_url, broker.emulator = endpoint, "localstack"
        assert f"using the AWS endpoint at {endpoint}" in "\n".join(broker.lines)
    yield broker
    stop_local_broker(broker)
    print("\n--- local runtime output (last 300 lines) ---\n" + "\n".join(broker.lines[-300:]))
