"""Schedules on EventBridge Scheduler (docs/sources.md): each a schedule in the stage's group whose
target is the ``pings`` function, invoked by Scheduler's role with the schedule's input. The same
calls deployed and in local mode (the embedded endpoint keeps them; the local runtime fires
them: brokerctl/local_schedules.py)."""

from __future__ import annotations

from chalicelib.adapters.aws_clients import AwsClients
from chalicelib.adapters.aws_errors import error_code, translated
from chalicelib.core.errors import NotFoundError, UnavailableError
from chalicelib.ports import DeployedSchedule

# Scheduler's own retries cover invoking the function (throttling, an unavailable Lambda): a ping
# due over five minutes ago is dropped rather than sent late (Knative retries under a minute).
RETRY_POLICY = {"MaximumEventAgeInSeconds": 300, "MaximumRetryAttempts": 10}
DEFAULT_GROUP = "default"


class SchedulerSchedules:
    def __init__(
        self,
        clients: AwsClients,
        region: str,
        function_name: str,
        role_name: str,
        group: str = DEFAULT_GROUP,
    ) -> None:
        """``function_name``: the ``pings`` function; ``role_name``: the role Scheduler assumes
        to invoke it (the stack's scheduler role). Their ARNs need the account, asked of STS once
        (GetCallerIdentity needs no permission)."""
        self._clients = clients
        self._region = region
        self._function = function_name
        self._role = role_name
        self._group = group
        self._arns: tuple[str, str] | None = None

    def _target(self) -> tuple[str, str]:
        """(the function's ARN, the role's ARN)."""
        if self._arns is None:
            with translated("STS GetCallerIdentity"):
                caller = self._clients.client("sts").get_caller_identity()
            partition, account = str(caller["Arn"]).split(":")[1], str(caller["Account"])
            self._arns = (
                f"arn:{partition}:lambda:{self._region}:{account}:function:{self._function}",
                f"arn:{partition}:iam::{account}:role/{self._role}",
            )
        return self._arns

    def put(self, schedule: DeployedSchedule) -> None:
        target_arn, role_arn = self._target()
        request = {
            "Name": schedule.name,
            "GroupName": self._group,
            "ScheduleExpression": schedule.expression,
            "ScheduleExpressionTimezone": schedule.timezone,
            "FlexibleTimeWindow": {"Mode": "OFF"},
            "State": "ENABLED",
            "Target": {
                "Arn": target_arn,
                "RoleArn": role_arn,
                "Input": schedule.input,
                "RetryPolicy": RETRY_POLICY,
            },
        }
        scheduler = self._clients.client("scheduler")
        try:
            with translated(f"Scheduler CreateSchedule {schedule.name}"):
                scheduler.create_schedule(**request)
        except UnavailableError as exc:
            cause = exc.__cause__
            if not isinstance(cause, Exception) or error_code(cause) != "ConflictException":
                raise
            # It exists: replaced whole (UpdateSchedule takes every field again).
            with translated(f"Scheduler UpdateSchedule {schedule.name}"):
                scheduler.update_schedule(**request)

    def get(self, name: str) -> DeployedSchedule | None:
        try:
            with translated(f"Scheduler GetSchedule {name}"):
                found = self._clients.client("scheduler").get_schedule(
                    Name=name, GroupName=self._group
                )
        except NotFoundError:
            return None
        return DeployedSchedule(
            name=str(found["Name"]),
            expression=str(found["ScheduleExpression"]),
            timezone=str(found.get("ScheduleExpressionTimezone") or "UTC"),
            input=str(found.get("Target", {}).get("Input", "")),
        )

    def names(self, prefix: str) -> list[str]:
        pages = self._clients.client("scheduler").get_paginator("list_schedules")
        found: list[str] = []
        with translated(f"Scheduler ListSchedules {prefix}*"):
            for page in pages.paginate(GroupName=self._group, NamePrefix=prefix):
                found += [str(s["Name"]) for s in page.get("Schedules", [])]
        return found

    def delete(self, name: str) -> None:
        try:
            with translated(f"Scheduler DeleteSchedule {name}"):
                self._clients.client("scheduler").delete_schedule(Name=name, GroupName=self._group)
        except NotFoundError:
            pass  # already gone: the goal is met
