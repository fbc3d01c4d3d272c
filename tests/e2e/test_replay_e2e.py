"""Replay end to end on the local runtime (docs/replay.md): events sent, archived by the local
Firehose (moto) to S3, replayed with ``brokerctl replay create --wait`` to one chosen trigger (one
event a message, the default), and seen again by its subscriber with ``replayname``, one of them
after a retry; the other trigger gets nothing more."""

from __future__ import annotations

import subprocess
import sys
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import httpx
import pytest

from brokerctl.event_display import EventDisplay, Received, Reply
from tests.e2e.conftest import ROOT, LocalBroker, start_local_broker, stop_local_broker

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def local_broker() -> Iterator[LocalBroker]:
    broker = start_local_broker({})
    yield broker
    stop_local_broker(broker)
    print("\n--- local runtime output (last 300 lines) ---\n" + "\n".join(broker.lines[-300:]))


def _trigger(name: str, uri: str) -> dict[str, object]:
    return {
        "metadata": {"name": name},
        "spec": {
            "broker": "default",
            "filter": {"attributes": {"type": "com.example.order"}},
            "subscriber": {"uri": uri},
        },
    }


def _fail_first_replay_of_o1(got: Received, n: int) -> Reply:
    first = got.headers.get("ce-replayname") == "again" and got.headers.get("ce-id") == "o1"
    if first and not _failed:
        _failed.append(n)
        return Reply(503)
    return Reply(202)


_failed: list[int] = []


def test_replay_resends_archived_events_to_the_chosen_trigger(local_broker: LocalBroker) -> None:
    ns = f"replay-{uuid.uuid4().hex[:6]}"
    _failed.clear()
    with EventDisplay(responder=_fail_first_replay_of_o1) as orders, EventDisplay() as audit:
        assert local_broker.put(ns, "brokers", "default", {}).status_code == 201
        for name, sink in (("orders", orders), ("audit", audit)):
            r = local_broker.put(ns, "triggers", name, _trigger(name, sink.url))
            assert r.status_code == 201, r.text
            local_broker.wait_ready(ns, "triggers", name)
        start = datetime.now(UTC) - timedelta(seconds=1)
        for i in range(3):
            r = httpx.post(
                f"{local_broker.url}/{ns}/default",
                content=f"order {i}".encode(),
                headers={
                    "ce-specversion": "1.0",
                    "ce-id": f"o{i}",
                    "ce-source": "/shop",
                    "ce-type": "com.example.order",
                    "content-type": "text/plain",
                },
            )
            assert r.status_code == 202, r.text
        assert orders.wait_for(lambda got: len(got) >= 3, timeout=30)
        assert audit.wait_for(lambda got: len(got) >= 3, timeout=30)

        cli = subprocess.run(
            [
                sys.executable, "-m", "brokerctl", "replay", "create", "again",
                "--url", local_broker.url, "-n", ns,
                "--from", start.isoformat().replace("+00:00", "Z"), "--to", "now",
                "--trigger", "orders", "--wait", "--wait-timeout", "60",
            ],
            cwd=ROOT, capture_output=True, text=True, timeout=90,
        )  # fmt: skip
        assert cli.returncode == 0, cli.stdout + cli.stderr
        assert "succeeded" in cli.stdout and "3 event(s) read, 3 enqueued" in cli.stdout

        assert orders.wait_for(lambda got: len(got) >= 7, timeout=30)
        replayed = [g for g in orders.received if g.headers.get("ce-replayname") == "again"]
        # o1 twice: refused once (503), delivered on its retry
        assert sorted(g.headers["ce-id"] for g in replayed) == ["o0", "o1", "o1", "o2"]
        assert sorted(set(g.body for g in replayed)) == [b"order 0", b"order 1", b"order 2"]
        assert len(_failed) == 1
        doc = httpx.get(f"{local_broker.cp(ns)}/brokers/default/replays/again").json()
        succeeded = next(c for c in doc["status"]["conditions"] if c["type"] == "Succeeded")
        assert succeeded["status"] == "True"
        assert doc["status"]["progress"]["eventsRead"] == 3
        # A later event proves the audit trigger's queue was drained past the replay: it got
        # the new event and never a replayed one.
        r = httpx.post(
            f"{local_broker.url}/{ns}/default",
            content=b"late",
            headers={
                "ce-specversion": "1.0",
                "ce-id": "late",
                "ce-source": "/shop",
                "ce-type": "com.example.order",
                "content-type": "text/plain",
            },
        )
        assert r.status_code == 202
        assert audit.wait_for(lambda got: len(got) >= 4, timeout=30)
        assert len(audit.received) == 4
        assert not [g for g in audit.received if "ce-replayname" in g.headers]
