"""The IAM statement for Connections (docs/targets.md, Connections): the delivery, dead_letter and
API functions may read (``secretsmanager:GetSecretValue``) the secrets under the stage's connection
secret prefix, and no other. The prefix is named from the stage, ``<app>/<stage>/connections/``,
as chalicelib/config.py names it; a Connection naming a secret outside it is refused at PUT.

``python -m infra.connection_policy [stage]`` writes the statement into the stage's policy files;
tests/infra/test_connection_policy.py checks that the committed files hold exactly it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from infra import policy_files

SID = "ConnectionSecrets"
ROLES = ("delivery", "dead_letter", "api_handler")


def prefix_of(config: dict[str, Any], stage: str) -> str:
    return f"{config['app_name']}/{stage}/connections/"


def statement(prefix: str) -> dict[str, Any]:
    arn = "arn:${AWS::Partition}:secretsmanager:${AWS::Region}:${AWS::AccountId}:secret:"
    return {
        "Sid": SID,
        "Effect": "Allow",
        "Action": ["secretsmanager:GetSecretValue"],
        "Resource": {"Fn::Sub": f"{arn}{prefix}*"},
    }


def write(config: dict[str, Any], stage: str) -> list[Path]:
    generated = statement(prefix_of(config, stage))
    return policy_files.write(config, stage, SID, {f: lambda: [generated] for f in ROLES})


if __name__ == "__main__":
    raise SystemExit(policy_files.main(write))
