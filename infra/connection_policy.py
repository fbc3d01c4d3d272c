"""The IAM statement for Connections (docs/targets.md, Connections): the delivery, dead_letter and
API functions may read (``secretsmanager:GetSecretValue``) the secrets under the stage's connection
secret prefix, and no other. The prefix is named from the stage, ``<app>/<stage>/connections/``,
as chalicelib/config.py names it; a Connection naming a secret outside it is refused at PUT.

``python -m infra.connection_policy [stage]`` writes the statement into the stage's policy files;
tests/infra/test_connection_policy.py checks that the committed files hold exactly it."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from infra.chalice_project import policy_path

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


def with_statement(policy: dict[str, Any], generated: dict[str, Any]) -> dict[str, Any]:
    kept = [s for s in policy["Statement"] if s.get("Sid") != SID]
    return {**policy, "Statement": [*kept, generated]}


def write(config: dict[str, Any], stage: str) -> list[Path]:
    generated = statement(prefix_of(config, stage))
    written = []
    functions = config["stages"][stage].get("lambda_functions", {})
    for function in ROLES:
        if function not in functions:
            continue
        path = policy_path(config, stage, function)
        policy = json.loads(path.read_text())
        path.write_text(json.dumps(with_statement(policy, generated), indent=2) + "\n")
        written.append(path)
    return written


def main(argv: list[str]) -> int:
    from infra.chalice_project import load_config

    stage = argv[0] if argv else "prod"
    for path in write(load_config(), stage):
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
