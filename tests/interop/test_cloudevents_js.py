"""Interop with a CloudEvents SDK of another language: the SDK for JavaScript (npm
``cloudevents``, pinned in tests/interop/js/package-lock.json, installed by ``make test`` with
``npm ci``) sends to the local runtime over its own HTTP transport (Node's http: bodies are sent
chunked, which the hand-parsed server lost) in binary, structured and batch mode, and a Node
subscriber parses every delivery with the same SDK (``HTTP.toEvent``). Every event must be
delivered once at least, with its data as sent."""

from __future__ import annotations

import json
import shutil
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import LocalBroker, start_local_broker, stop_local_broker, wait_until

JS = Path(__file__).resolve().parent / "js"
COUNT = 12  # events per mode
NODE = shutil.which("node")

pytestmark = pytest.mark.skipif(
    NODE is None or not (JS / "node_modules" / "cloudevents").is_dir(),
    reason="needs node and tests/interop/js/node_modules (make test runs npm ci there)",
)


def expected_data(event_id: str) -> dict[str, Any]:
    # send.mjs's expectedData
    return {"id": event_id, "text": "h\u00e9llo \u2601\ufe0f", "n": len(event_id)}


class Subscriber:
    def __init__(self) -> None:
        assert NODE is not None
        self.process = subprocess.Popen(
            [NODE, "subscriber.mjs"], cwd=JS, stdout=subprocess.PIPE, text=True
        )
        assert self.process.stdout is not None
        first = self.process.stdout.readline().split()
        assert first[:1] == ["listening"], first
        self.url = f"http://127.0.0.1:{first[1]}/"
        self.events: list[dict[str, Any]] = []
        self._pump = threading.Thread(target=self._read, daemon=True)
        self._pump.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.events.append(json.loads(line))

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=10)
        self._pump.join(timeout=5)
        assert self.process.stdout is not None
        self.process.stdout.close()


@pytest.fixture(scope="module")
def runtime() -> Iterator[tuple[LocalBroker, Subscriber]]:
    broker = start_local_broker()
    subscriber = Subscriber()
    try:
        yield broker, subscriber
    finally:
        subscriber.stop()
        stop_local_broker(broker)
        print("\n--- local runtime output (last 100 lines) ---\n" + "\n".join(broker.lines[-100:]))


def test_the_javascript_sdk_sends_and_reads_every_event_intact(
    runtime: tuple[LocalBroker, Subscriber],
) -> None:
    broker, subscriber = runtime
    assert broker.put("interop", "brokers", "default", {"metadata": {"name": "default"}}).is_success
    trigger = {"metadata": {"name": "js"},
               "spec": {"broker": "default", "subscriber": {"uri": subscriber.url}}}  # fmt: skip
    assert broker.put("interop", "triggers", "js", trigger).is_success
    broker.wait_ready("interop", "triggers", "js")
    assert NODE is not None
    sent = subprocess.run(
        [NODE, "send.mjs", f"{broker.url}/interop/default", str(COUNT)],
        cwd=JS, capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    report = json.loads(sent.stdout)
    # The SDK's transport streams its bodies: what the old server dropped.
    assert report["framing"] == [{"te": "chunked", "cl": None}] * 2
    assert report["refused"] == []
    assert report["sent"] == {"binary": COUNT, "structured": COUNT, "batch": COUNT // 4}
    ids = {f"{mode}-{i}" for mode in ("binary", "structured", "batch") for i in range(COUNT)}

    def delivered() -> set[str]:
        return {e.get("id") for e in subscriber.events} & ids

    wait_until(lambda: delivered() == ids, 60, f"{len(ids)} events delivered")
    assert [e for e in subscriber.events if "error" in e] == []
    for event in subscriber.events:
        assert event["data"] == expected_data(event["id"]), event
        assert event["type"] == "interop.js" and event["source"] == "/interop/js"
