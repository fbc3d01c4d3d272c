"""The local runtime's Scheduler (brokerctl/local_schedules.py) with a driven clock: it reads the
schedules the control plane made, fires each when due (not before, once per time), through the
same ``pings`` function, with the scheduled time substituted; a changed schedule is read again;
a rate fires every period from when it was first seen."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

from app import pings
from brokerctl.local_schedules import LocalSchedules
from chalicelib.container import use_container
from chalicelib.core.cron import Rate
from chalicelib.core.schedules import EventTemplate, Schedule, Sink
from chalicelib.ports import HttpResponse
from chalicelib.services.schedules import Scheduling
from tests.fakes.schedules import MemorySchedules
from tests.functional.harness import Harness

T0 = datetime(2026, 11, 28, 22, 0, 30, tzinfo=UTC)


def _setup() -> tuple[Harness, MemorySchedules, list[str]]:
    h = Harness(HttpResponse(202, {}, b""))
    said: list[str] = []
    return h, h.schedules, said


def test_a_ping_source_fires_on_the_minute_into_its_trigger() -> None:
    h, schedules, said = _setup()
    use_container(h.container)
    try:
        h.broker()
        h.trigger("display")
        body = {"spec": {"schedule": "* * * * *", "data": "tick",
                         "sink": {"ref": {"kind": "Broker", "name": "default"}}}}  # fmt: skip
        h.container.ping_sources.put("ns", "ticker", {"metadata": {"name": "ticker"}, **body})
        local = LocalSchedules(schedules, h.settings.queue_prefix, pings, said.append)
        local.reload(T0)
        assert local.fire_due(T0 + timedelta(seconds=29)) == 0  # 22:00:59: not yet
        assert local.fire_due(T0 + timedelta(seconds=30)) == 1  # 22:01:00
        assert local.fire_due(T0 + timedelta(seconds=40)) == 0  # once per time
        (message,) = h.messages(h.queue_of("display"))
        event = json.loads(message["event"]) if isinstance(message.get("event"), str) else message
        text = json.dumps(event)
        assert "2026-11-28T22:01:00Z" in text and "dev.knative.sources.ping" in text
        assert said == []
        # Changed (a new schedule): read again, the new expression decides.
        h.container.ping_sources.put(
            "ns", "ticker", {"metadata": {"name": "ticker"}, "spec": {**body["spec"],
                                                                     "schedule": "0 * * * *"}},
        )  # fmt: skip
        local.reload(T0 + timedelta(seconds=41))
        assert local.fire_due(T0 + timedelta(minutes=30)) == 0
        assert local.fire_due(T0 + timedelta(minutes=60)) == 1  # 23:00
    finally:
        use_container(None)


def test_a_rate_fires_every_period_from_when_it_was_seen() -> None:
    schedules = MemorySchedules()
    scheduling = Scheduling(schedules, "sb-local-")
    template = EventTemplate({"type": "timer", "source": "/t"}, b"x")
    scheduling.ensure(
        Schedule("integrationsource/ns/t", Rate(120), template, Sink("ns", uri="http://x/"))
    )
    fired: list[str] = []
    local = LocalSchedules(schedules, "sb-local-", lambda e, c: fired.append(e["time"]), print)
    local.reload(T0)
    assert local.fire_due(T0 + timedelta(seconds=119)) == 0
    assert local.fire_due(T0 + timedelta(seconds=120)) == 1
    assert local.fire_due(T0 + timedelta(seconds=240)) == 1
    assert fired == ["2026-11-28T22:02:30Z", "2026-11-28T22:04:30Z"]
    scheduling.remove("integrationsource/ns/t")
    local.reload(T0 + timedelta(seconds=241))
    assert local.fire_due(T0 + timedelta(hours=1)) == 0


def test_an_endpoint_without_scheduler_is_said_once_and_read_again_later() -> None:
    schedules = MemorySchedules()
    Scheduling(schedules, "sb-local-").ensure(
        Schedule("pingsource/ns/p", Rate(60), EventTemplate({"type": "t", "source": "/s"}),
                 Sink("ns", uri="http://x/"))
    )  # fmt: skip
    said: list[str] = []
    fired: list[str] = []
    local = LocalSchedules(
        schedules, "sb-local-", lambda e, c: fired.append(e["time"]), said.append
    )
    schedules.fail = True
    local.reload(T0)
    local.reload(T0 + timedelta(seconds=30))
    assert len(said) == 1 and "ServiceUnavailable" in said[0]
    schedules.fail = False
    local.reload(T0 + timedelta(seconds=31))
    assert local.fire_due(T0 + timedelta(seconds=91)) == 1
