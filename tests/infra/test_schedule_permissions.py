"""The sources' schedules deploy with the least privilege they need (docs/sources.md): the
scheduler role is assumed by EventBridge Scheduler of this account only and may invoke the pings
function only; the API and the reconciler may create, change, read and delete schedules named with
the stage's prefix only, list them (no resource type), and pass that role, to Scheduler, and no
other; no other function may touch Scheduler or pass a role. The package holds the same policy
files (tests/infra/test_chalice_package.py); the functions name the role and the function as the
template does (chalicelib/config.py)."""

from __future__ import annotations

from typing import Any

from chalicelib.config import Settings
from infra.cfn import Resolver
from tests.infra.conftest import ACCOUNT, REGION, STAGE

PINGS = f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:serverless-broker-{STAGE}-pings"
ROLE = f"arn:aws:iam::{ACCOUNT}:role/serverless-broker-{STAGE}-{REGION}-scheduler"
SCHEDULES = f"arn:aws:scheduler:{REGION}:{ACCOUNT}:schedule/default/sb-{STAGE}-*"
CHANGE = {"scheduler:CreateSchedule", "scheduler:DeleteSchedule", "scheduler:GetSchedule",
          "scheduler:UpdateSchedule"}  # fmt: skip


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _grants(statements: list[dict[str, Any]], prefix: str) -> list[tuple[str, str, Any]]:
    return [
        (action, resource, st.get("Condition"))
        for st in statements
        if st["Effect"] == "Allow"
        for action in _list(st["Action"])
        if action.startswith(prefix)
        for resource in _list(st["Resource"])
    ]


def test_the_scheduler_role_may_only_invoke_the_pings_function(
    template: dict[str, Any], resolver: Resolver
) -> None:
    role = resolver.properties("SchedulerRole")
    assert resolver.get_att("SchedulerRole", "Arn") == ROLE
    (trust,) = role["AssumeRolePolicyDocument"]["Statement"]
    assert trust["Principal"] == {"Service": "scheduler.amazonaws.com"}
    assert trust["Condition"] == {"StringEquals": {"aws:SourceAccount": ACCOUNT}}
    statements = [st for p in role["Policies"] for st in p["PolicyDocument"]["Statement"]]
    assert [(st["Effect"], st["Action"], st["Resource"]) for st in statements] == [
        ("Allow", "lambda:InvokeFunction", PINGS)
    ]
    outputs = resolver.outputs()
    assert (outputs["PingsFunctionArn"], outputs["SchedulerRoleArn"]) == (PINGS, ROLE)
    # The functions name both from the stage and region as the template does.
    settings = Settings(stage=STAGE, region=REGION)
    assert PINGS.endswith(f":function:{settings.pings_function}")
    assert ROLE.endswith(f":role/{settings.scheduler_role}")
    assert "pings" in template["Metadata"]["ServerlessBroker"]["Functions"]


def test_only_the_control_plane_manages_schedules_and_passes_only_that_role(
    policy_files: dict[str, dict[str, Any]], resolver: Resolver
) -> None:
    for fn, doc in policy_files.items():
        statements = resolver.resolve(doc)["Statement"]
        scheduler = _grants(statements, "scheduler:")
        passes = _grants(statements, "iam:")
        if fn not in ("api_handler", "reconciler"):
            assert scheduler == [] and passes == [], fn
            continue
        changes = {a for a, r, _ in scheduler if r == SCHEDULES}
        assert changes == CHANGE, fn
        others = [(a, r) for a, r, _ in scheduler if r != SCHEDULES]
        listing = [("scheduler:ListSchedules", "*")] if fn == "reconciler" else []
        assert others == listing, fn
        assert passes == [
            (
                "iam:PassRole",
                ROLE,
                {"StringEquals": {"iam:PassedToService": "scheduler.amazonaws.com"}},
            )
        ], fn
