"""The IAM statements for IntegrationSources (docs/sources.md), generated from the stage's
``source_arn_patterns`` in .chalice/config.json: the ``sources`` function may read the queues and
the streams of the tables those patterns allow (what its event source mappings poll); the API and
the reconciler may look them up, turn a bucket's notifications to EventBridge on, make, change and
delete the rules named with the stage's queue prefix (chalicelib/adapters/source_plumbing.py names
a bucket's rule ``<queue prefix>s3-<digest>``), and grant EventBridge invoke on ``sources`` per rule
(the plumbing's ``AddPermission``). No ``*`` resource unless a pattern is one.

Patterns may use ``${AWS::Region}``, ``${AWS::AccountId}`` and ``${AWS::Partition}`` (resolved by
CloudFormation in the policies and the functions' BROKER_SOURCE_ARN_PATTERNS).

``python -m infra.source_policy [stage]`` writes the statements into the stage's policy files;
tests/infra/test_source_policy.py checks that the committed files hold exactly these."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from infra import policy_files
from infra.chalice_project import function_name
from infra.policy_files import cfn_value as _resource

SETTING = "source_arn_patterns"
VARIABLE = "BROKER_SOURCE_ARN_PATTERNS"  # chalicelib/config.py
SID_PREFIX = "IntegrationSources"
SERVICES = ("sqs", "dynamodb", "s3")
READ_ACTIONS = {
    "sqs": [
        "sqs:ChangeMessageVisibility",
        "sqs:DeleteMessage",
        "sqs:GetQueueAttributes",
        "sqs:ReceiveMessage",
    ],
    # on the table's streams: PATTERN/stream/*
    "dynamodb": [
        "dynamodb:DescribeStream",
        "dynamodb:GetRecords",
        "dynamodb:GetShardIterator",
        "dynamodb:ListStreams",
    ],
}
WIRE_ACTIONS = {
    "sqs": ["sqs:GetQueueAttributes", "sqs:GetQueueUrl"],
    "dynamodb": ["dynamodb:DescribeTable"],
    "s3": ["s3:GetBucketNotification", "s3:PutBucketNotification"],
}
RULE_ACTIONS = [
    "events:DeleteRule",
    "events:DescribeRule",
    "events:PutRule",
    "events:PutTargets",
    "events:RemoveTargets",
]
FUNCTION_ACTIONS = ["lambda:AddPermission", "lambda:GetFunction", "lambda:RemovePermission"]
# Which functions get which statements.
ROLES = {"sources": "read", "api_handler": "wire", "reconciler": "wire"}


def patterns_of(config: dict[str, Any], stage: str) -> list[str]:
    patterns = policy_files.arn_patterns(config, stage, SETTING)
    for pattern in patterns:
        service_of(pattern)
    return patterns


def service_of(pattern: str) -> str:
    parts = pattern.split(":")
    service = parts[2] if len(parts) > 5 and parts[0] == "arn" else ""
    if service not in SERVICES or (
        service == "dynamodb" and not pattern.rsplit(":", 1)[-1].startswith("table/")
    ):
        raise SystemExit(
            f"error: {SETTING}: {pattern!r} must name a queue, table or bucket "
            "(arn:PARTITION:sqs:REGION:ACCOUNT:QUEUE, arn:PARTITION:dynamodb:REGION:ACCOUNT:"
            "table/TABLE or arn:PARTITION:s3:::BUCKET)"
        )
    return service


def _statement(sid: str, actions: list[str], resources: list[Any]) -> dict[str, Any]:
    return {"Sid": sid, "Effect": "Allow", "Action": list(actions), "Resource": resources}


def statements(
    patterns: list[str], role: str, *, rule_prefix: str, function_arn: str
) -> list[dict[str, Any]]:
    """The statements of a function whose role is ``read`` or ``wire``, one per service (and,
    for ``wire`` when a bucket pattern is there, the rules and the invoke permission)."""
    by_service: dict[str, list[str]] = {}
    for pattern in patterns:
        by_service.setdefault(service_of(pattern), []).append(pattern)
    actions = READ_ACTIONS if role == "read" else WIRE_ACTIONS
    out = []
    for service, found in sorted(by_service.items()):
        if service not in actions:
            continue  # sources reads no bucket: EventBridge invokes it
        streams = service == "dynamodb" and role == "read"
        resources = [_resource(p + "/stream/*" if streams else p) for p in found]
        out.append(_statement(f"{SID_PREFIX}{service.capitalize()}", actions[service], resources))
    if role == "wire" and "s3" in by_service:
        rules = "arn:${AWS::Partition}:events:${AWS::Region}:${AWS::AccountId}:rule/"
        out.append(
            _statement(
                f"{SID_PREFIX}Rules", RULE_ACTIONS, [{"Fn::Sub": f"{rules}{rule_prefix}s3-*"}]
            )
        )
        out.append(
            _statement(f"{SID_PREFIX}Function", FUNCTION_ACTIONS, [{"Fn::Sub": function_arn}])
        )
    return out


def stage_statements(config: dict[str, Any], stage: str, role: str) -> list[dict[str, Any]]:
    arn = "arn:${AWS::Partition}:lambda:${AWS::Region}:${AWS::AccountId}:function:"
    return statements(
        patterns_of(config, stage),
        role,
        rule_prefix=f"sb-{stage}-",  # infra/template.yaml's QueuePrefix
        function_arn=arn + function_name(config, stage, "sources"),
    )


def environment(config: dict[str, Any], stage: str) -> dict[str, Any]:
    """What the functions read (Settings.source_arn_patterns): a CloudFormation value."""
    return {VARIABLE: _resource(",".join(patterns_of(config, stage)))}


def write(config: dict[str, Any], stage: str) -> list[Path]:
    generated = {
        f: (lambda role=role: stage_statements(config, stage, role)) for f, role in ROLES.items()
    }
    return policy_files.write(config, stage, SID_PREFIX, generated)


if __name__ == "__main__":
    raise SystemExit(policy_files.main(write))
