"""IntegrationSource's hooks on in-memory fakes: an AWS source's plumbing made on save and removed
with the last source reading it, a missing or refusing queue Ready=False with the reason, the
stage's source_arn_patterns at PUT (a 400 naming the setting), and the setting's reading."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from chalicelib.config import Settings
from chalicelib.core.errors import ForbiddenError, NotFoundError, ValidationError
from chalicelib.core.resources.broker import BROKERS
from chalicelib.core.resources.integration_source import INTEGRATION_SOURCES, AwsSource
from chalicelib.services.integration_sources import IntegrationSourceHooks
from chalicelib.services.resources import Resources, ResourceService
from chalicelib.services.schedules import Scheduling
from tests.fakes import MemoryStore
from tests.fakes.schedules import MemorySchedules

QUEUE = "arn:aws:sqs:eu-west-1:123456789012:orders"
URI = {"uri": "https://example.com/in"}


class MemoryPlumbing:
    """Queues that exist, ones that refuse the role, and the mappings made."""

    def __init__(self) -> None:
        self.existing: set[str] = {QUEUE}
        self.refusing: set[str] = set()
        self.mapped: set[str] = set()

    def resource_arn(self, aws: AwsSource) -> str | None:
        return aws.resource

    def ensure(self, aws: AwsSource) -> None:
        if aws.resource in self.refusing:
            raise ForbiddenError(f"queue {aws.resource}: refuses the role (AccessDenied)", "aws")
        if aws.resource not in self.existing:
            raise NotFoundError(f"queue {aws.resource}: not found")
        self.mapped.add(aws.resource)

    def remove(self, aws: AwsSource) -> None:
        self.mapped.discard(aws.resource)


def service(settings: Settings = Settings()) -> tuple[Any, MemoryPlumbing]:
    store, plumbing = MemoryStore(), MemoryPlumbing()
    scheduling = Scheduling(MemorySchedules(), settings.queue_prefix)
    hooks = IntegrationSourceHooks(
        Resources(store, INTEGRATION_SOURCES), Resources(store, BROKERS), scheduling, plumbing,
        settings,
    )  # fmt: skip
    return ResourceService(hooks.sources, hooks), plumbing


def body(name: str, arn: str = QUEUE) -> dict[str, Any]:
    return {
        "apiVersion": "sources.knative.dev/v1alpha1",
        "kind": "IntegrationSource",
        "metadata": {"name": name},
        "spec": {"aws": {"sqs": {"arn": arn}}, "sink": URI},
    }


def ready(doc: dict[str, Any]) -> dict[str, str]:
    return next(c for c in doc["status"]["conditions"] if c["type"] == "Ready")


def test_a_source_on_an_existing_queue_is_mapped_and_ready() -> None:
    svc, plumbing = service()
    doc = svc.create("ns", body("a"))
    assert plumbing.mapped == {QUEUE}
    assert ready(doc)["status"] == "True"


@pytest.mark.parametrize(
    ("setup", "reason"),
    [(lambda p: p.existing.clear(), "QueueDoesNotExist"),
     (lambda p: p.refusing.add(QUEUE), "QueueRefusesRole")],
)  # fmt: skip
def test_a_missing_or_refusing_queue_is_not_ready_with_the_reason(setup: Any, reason: str) -> None:
    svc, plumbing = service()
    setup(plumbing)
    condition = ready(svc.create("ns", body("a")))
    assert (condition["status"], condition["reason"]) == ("False", reason)
    assert QUEUE in condition["message"]


def test_the_mapping_goes_with_the_last_source_reading_the_queue() -> None:
    svc, plumbing = service()
    svc.create("ns", body("a"))
    svc.create("ns", body("b"))
    svc.delete("ns", "a")
    assert plumbing.mapped == {QUEUE}
    svc.delete("ns", "b")
    assert plumbing.mapped == set()


def test_an_arn_outside_source_arn_patterns_is_a_400_naming_the_setting() -> None:
    settings = replace(Settings(), source_arn_patterns=("arn:aws:sqs:*:123456789012:orders-*",))
    svc, plumbing = service(settings)
    with pytest.raises(ValidationError) as caught:
        svc.create("ns", body("a"))
    (problem,) = caught.value.problems
    assert problem.field == "spec.aws.sqs.arn"
    assert "source_arn_patterns" in problem.message
    assert plumbing.mapped == set()
    svc.create("ns", body("b", "arn:aws:sqs:eu-west-1:123456789012:orders-eu"))


def test_a_deployed_stage_refuses_a_timer_scheduler_cannot_run() -> None:
    svc, _ = service(replace(Settings(), local_mode=False))
    timer = body("t") | {"spec": {"timer": {"period": 2000, "message": "m"}, "sink": URI}}
    with pytest.raises(ValidationError) as caught:
        svc.create("ns", timer)
    assert "whole minutes" in caught.value.problems[0].message


def test_source_arn_patterns_are_read_per_stage() -> None:
    env = {"BROKER_STAGE": "prod"}
    assert Settings.from_env(env).source_arn_patterns == ()
    listed = {**env, "BROKER_SOURCE_ARN_PATTERNS": "arn:aws:sqs:*:1:a-*, arn:aws:s3:::b"}
    assert Settings.from_env(listed).source_arn_patterns == (
        "arn:aws:sqs:*:1:a-*",
        "arn:aws:s3:::b",
    )
