"""The Schedules port on its in-memory fake and on the EventBridge Scheduler adapter against the
moto server, and ``Scheduling`` (services/schedules.py) on both: a schedule is created, replaced
when it differs and left alone when not, listed by prefix, removed (twice is fine), and an owner's
reconcile removes only that owner's schedules nobody wants."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest

from chalicelib.core.cron import Rate, parse_cron
from chalicelib.core.errors import UnavailableError
from chalicelib.core.schedules import SCHEDULED_TIME, EventTemplate, Schedule, Sink
from chalicelib.ports import DeployedSchedule
from chalicelib.services.schedules import Scheduling
from tests.fakes.schedules import MemorySchedules

PINGS = "serverless-broker-local-pings"
ROLE = "serverless-broker-local-us-east-1-scheduler"


@pytest.fixture(params=["memory", "aws"])
def schedules(request: pytest.FixtureRequest) -> Any:
    if request.param == "memory":
        return MemorySchedules()
    from chalicelib.adapters.scheduler_schedules import SchedulerSchedules

    return SchedulerSchedules(request.getfixturevalue("aws_clients"), "us-east-1", PINGS, ROLE)


@pytest.fixture
def prefix() -> str:
    return f"t{uuid.uuid4().hex[:8]}-"


def _cron(text: str, tz: str | None = None) -> Any:
    cron, problems = parse_cron(text, tz, "spec.schedule", "spec.timezone")
    assert not problems
    return cron


def _schedule(key: str, expression: Any, data: bytes = b"hi") -> Schedule:
    template = EventTemplate({"type": "dev.knative.sources.ping", "source": "/s"}, data)
    return Schedule(key, expression, template, Sink("ns", broker="default"), "source:ns:P:n")


def test_the_target_is_the_pings_function_through_the_scheduler_role(
    aws_clients: Any, prefix: str
) -> None:
    """The ARNs the adapter names (the account from STS) are the template's (infra tests)."""
    from chalicelib.adapters.scheduler_schedules import SchedulerSchedules

    SchedulerSchedules(aws_clients, "us-east-1", PINGS, ROLE).put(
        DeployedSchedule(f"{prefix}t", "rate(1 minute)", "UTC", "{}")
    )
    target = aws_clients.client("scheduler").get_schedule(Name=f"{prefix}t")["Target"]
    assert target["Arn"] == f"arn:aws:lambda:us-east-1:123456789012:function:{PINGS}"
    assert target["RoleArn"] == f"arn:aws:iam::123456789012:role/{ROLE}"


def test_put_get_replace_and_delete(schedules: Any, prefix: str) -> None:
    first = DeployedSchedule(f"{prefix}a", "cron(0/5 * * * ? *)", "Europe/Paris", '{"v": 1}')
    schedules.put(first)
    assert schedules.get(first.name) == first
    second = DeployedSchedule(first.name, "rate(2 minutes)", "UTC", '{"v": 2}')
    schedules.put(second)  # replaced whole
    assert schedules.get(first.name) == second
    assert schedules.names(prefix) == [first.name]
    schedules.delete(first.name)
    schedules.delete(first.name)  # already gone: fine
    assert schedules.get(first.name) is None
    assert schedules.names(prefix) == []


def test_the_input_keeps_the_scheduled_time_keyword(schedules: Any, prefix: str) -> None:
    scheduling = Scheduling(schedules, prefix)
    schedule = _schedule("pingsource/ns/a", _cron("*/5 * * * *"))
    scheduling.ensure(schedule)
    deployed = schedules.get(scheduling.name(schedule.key))
    assert json.loads(deployed.input)["time"] == SCHEDULED_TIME
    assert (deployed.expression, deployed.timezone) == ("cron(0/5 * * * ? *)", "UTC")


def test_ensure_changes_only_what_differs(schedules: Any, prefix: str) -> None:
    scheduling = Scheduling(schedules, prefix)
    schedule = _schedule("pingsource/ns/a", _cron("0 9 * * 1-5", "Europe/Paris"))
    assert scheduling.ensure(schedule) is True
    assert scheduling.ensure(schedule) is False
    assert scheduling.deployed(schedule)
    changed = _schedule("pingsource/ns/a", _cron("0 9 * * 1-5", "Europe/Paris"), b"other")
    assert not scheduling.deployed(changed)
    assert scheduling.ensure(changed) is True
    assert scheduling.deployed(changed)


def test_reconcile_removes_only_the_owners_unwanted(schedules: Any, prefix: str) -> None:
    scheduling = Scheduling(schedules, prefix)
    kept = _schedule("pingsource/ns/kept", _cron("* * * * *"))
    gone = _schedule("pingsource/ns/gone", _cron("* * * * *"))
    other = _schedule("integrationsource/ns/timer", Rate(60))
    for s in (kept, gone, other):
        scheduling.ensure(s)
    done = scheduling.reconcile("pingsource/", [kept])
    assert done == [f"delete schedule {scheduling.name(gone.key)}"]
    assert sorted(schedules.names(prefix)) == sorted(
        [scheduling.name(kept.key), scheduling.name(other.key)]
    )


def test_an_unreachable_scheduler_is_unavailable(prefix: str) -> None:
    from chalicelib.adapters.aws_clients import AwsClients
    from chalicelib.adapters.scheduler_schedules import SchedulerSchedules
    from chalicelib.config import Settings

    fake = MemorySchedules()
    fake.fail = True
    dead = Settings(endpoint_url="http://127.0.0.1:9", region="us-east-1")
    for schedules in (fake, SchedulerSchedules(AwsClients(dead), "us-east-1", PINGS, ROLE)):
        with pytest.raises(UnavailableError):
            schedules.put(DeployedSchedule(f"{prefix}a", "rate(1 minute)", "UTC", "{}"))
        with pytest.raises(UnavailableError):
            schedules.names(prefix)
