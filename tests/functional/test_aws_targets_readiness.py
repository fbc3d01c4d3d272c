"""A trigger whose AWS target does not exist or refuses the broker is not Ready, with reason
SubscriberNotFound or SubscriberNotAuthorized (docs/targets.md), from the target service's
describe call, remembered for a while per ARN."""

from __future__ import annotations

from typing import Any

from chalicelib.services.target_checks import TargetChecks
from tests.fakes.aws_targets import MemoryTargets
from tests.functional.harness import Harness

QUEUE = "arn:aws:sqs:us-east-1:123456789012:orders"


def conditions(doc: dict[str, Any]) -> dict[str, tuple[str, str]]:
    return {c["type"]: (c["status"], c.get("reason", "")) for c in doc["status"]["conditions"]}


def setup() -> tuple[Harness, MemoryTargets]:
    h = Harness()
    targets = MemoryTargets()
    h.container.aws_targets = targets  # type: ignore[misc]
    h.broker()
    return h, targets


def test_a_missing_target_is_subscriber_not_found() -> None:
    h, _ = setup()
    doc = h.trigger("tr", uri=QUEUE)
    found = conditions(doc)
    assert found["SubscriberResolved"] == ("False", "SubscriberNotFound")
    assert found["Ready"][0] == "False"
    message = next(c for c in doc["status"]["conditions"] if c["type"] == "SubscriberResolved")
    assert QUEUE in message["message"] and "NonExistentQueue" in message["message"]
    assert conditions(h.container.triggers.get("ns", "tr"))["Ready"][0] == "False"


def test_a_refusing_target_is_subscriber_not_authorized() -> None:
    h, targets = setup()
    targets.create(QUEUE)
    targets.denied.add(QUEUE)
    found = conditions(h.trigger("tr", uri=QUEUE))
    assert found["SubscriberResolved"] == ("False", "SubscriberNotAuthorized")


def test_a_reachable_target_resolves_and_http_subscribers_are_not_checked() -> None:
    h, targets = setup()
    targets.create(QUEUE)
    assert conditions(h.trigger("tr", uri=QUEUE))["SubscriberResolved"][0] == "True"
    checks = targets.checks
    assert conditions(h.trigger("web", uri="http://sub.example/"))["SubscriberResolved"][0] == (
        "True"
    )
    assert targets.checks == checks


def test_checks_are_remembered_per_arn_for_their_ttl() -> None:
    targets = MemoryTargets()
    now = [0.0]
    checks = TargetChecks(targets, ttl=30, clock=lambda: now[0])
    assert checks.problem(QUEUE) is not None
    targets.create(QUEUE)
    assert checks.problem(QUEUE) is not None and targets.checks == 1  # remembered
    now[0] = 31.0
    assert checks.problem(QUEUE) is None and targets.checks == 2


def test_a_check_that_fails_for_a_while_says_nothing_about_the_target() -> None:
    from chalicelib.ports import TargetResult

    class Throttled(MemoryTargets):
        def check(self, arn: str) -> TargetResult:
            return TargetResult("ThrottlingException", "slow down", 400)

    checks = TargetChecks(Throttled())
    assert checks.problem(QUEUE) is None
