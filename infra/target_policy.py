"""The IAM statements for AWS targets (docs/targets.md), generated from the stage's
``target_arn_patterns`` in .chalice/config.json: the delivery and dead_letter roles may call each
target service's delivery action (and Step Functions' DescribeExecution, a retry's check of its
own execution) on those patterns only; the API role may make each service's describe call there
(a trigger's readiness). No ``*`` resource: a deployed stage names the ARNs it delivers to.

Patterns may use ``${AWS::Region}``, ``${AWS::AccountId}`` and ``${AWS::Partition}`` (resolved by
CloudFormation in the policies and the functions' BROKER_TARGET_ARN_PATTERNS).

``python -m infra.target_policy [stage]`` writes the statements into the stage's policy files;
tests/infra/test_policies.py checks that the committed files hold exactly these."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from infra import policy_files
from infra.policy_files import cfn_value as _resource

SETTING = "target_arn_patterns"
VARIABLE = "BROKER_TARGET_ARN_PATTERNS"  # chalicelib/config.py
SID_PREFIX = "Targets"
DELIVERY_ACTIONS = {
    "lambda": ["lambda:InvokeFunction"],
    "sqs": ["sqs:SendMessage"],
    "sns": ["sns:Publish"],
    "states": ["states:StartExecution"],
    "events": ["events:PutEvents"],
    "kinesis": ["kinesis:PutRecord"],
    "firehose": ["firehose:PutRecord"],
    "s3": ["s3:PutObject"],  # on the bucket's objects: PATTERN/*
}
CHECK_ACTIONS = {
    "lambda": ["lambda:GetFunction"],
    "sqs": ["sqs:GetQueueAttributes"],
    "sns": ["sns:GetTopicAttributes"],
    "states": ["states:DescribeStateMachine"],
    "events": ["events:DescribeEventBus"],
    "kinesis": ["kinesis:DescribeStreamSummary"],
    "firehose": ["firehose:DescribeDeliveryStream"],
    "s3": ["s3:ListBucket"],  # what HeadBucket needs
}
# Which functions get which statements.
ROLES = {"delivery": "deliver", "dead_letter": "deliver", "api_handler": "check"}


def patterns_of(config: dict[str, Any], stage: str) -> list[str]:
    return policy_files.arn_patterns(config, stage, SETTING)


def service_of(pattern: str) -> str:
    parts = pattern.split(":")
    service = parts[2] if len(parts) > 5 and parts[0] == "arn" else ""
    if service not in DELIVERY_ACTIONS:
        raise SystemExit(
            f"error: {SETTING}: {pattern!r} must name a target service "
            f"(arn:PARTITION:SERVICE:REGION:ACCOUNT:RESOURCE, SERVICE one of "
            f"{', '.join(DELIVERY_ACTIONS)})"
        )
    return service


def statements(patterns: list[str], role: str) -> list[dict[str, Any]]:
    """The statements of a function whose role is ``deliver`` or ``check``, one per service."""
    by_service: dict[str, list[str]] = {}
    for pattern in patterns:
        by_service.setdefault(service_of(pattern), []).append(pattern)
    out = []
    for service, found in sorted(by_service.items()):
        actions = (DELIVERY_ACTIONS if role == "deliver" else CHECK_ACTIONS)[service]
        objects = service == "s3" and role == "deliver"  # PutObject names the object
        resources = [_resource(p + "/*" if objects else p) for p in found]
        out.append(
            {
                "Sid": f"{SID_PREFIX}{service.capitalize()}",
                "Effect": "Allow",
                "Action": list(actions),
                "Resource": resources,
            }
        )
        if service == "states" and role == "deliver":  # a retry's execution, by name
            executions = [
                _resource(p.replace(":stateMachine:", ":execution:") + ":*") for p in found
            ]
            out.append(
                {
                    "Sid": f"{SID_PREFIX}StatesExecutions",
                    "Effect": "Allow",
                    "Action": ["states:DescribeExecution"],
                    "Resource": executions,
                }
            )
    return out


def environment(config: dict[str, Any], stage: str) -> dict[str, Any]:
    """What the functions read (Settings.target_arn_patterns): a CloudFormation value."""
    patterns = patterns_of(config, stage)
    return {VARIABLE: _resource(",".join(patterns))}


def write(config: dict[str, Any], stage: str) -> list[Path]:
    patterns = patterns_of(config, stage)
    generated = {f: (lambda role=role: statements(patterns, role)) for f, role in ROLES.items()}
    return policy_files.write(config, stage, SID_PREFIX, generated)


if __name__ == "__main__":
    raise SystemExit(policy_files.main(write))
