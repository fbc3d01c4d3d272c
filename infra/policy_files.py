"""What the generated IAM statements share (infra/target_policy.py, source_policy.py,
connection_policy.py): a stage's ARN patterns, as CloudFormation values, and writing a
generator's statements into the stage's policy files (.chalice/policy-<stage>-<function>.json) in
place of the ones it wrote before."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from infra.chalice_project import load_config, policy_path


def cfn_value(text: str) -> Any:
    """``text`` as CloudFormation takes it: an ``Fn::Sub`` when it names ``${...}``."""
    return {"Fn::Sub": text} if "${" in text else text


def arn_patterns(config: dict[str, Any], stage: str, setting: str) -> list[str]:
    """The stage's ``setting`` in .chalice/config.json: a list of ARN patterns."""
    patterns = config["stages"][stage].get(setting, [])
    if not isinstance(patterns, list) or not all(isinstance(p, str) for p in patterns):
        raise SystemExit(f"error: {setting} of stage {stage}: a list of ARN patterns")
    return patterns


def write(
    config: dict[str, Any],
    stage: str,
    sid_prefix: str,
    generated: Mapping[str, Callable[[], list[dict[str, Any]]]],
) -> list[Path]:
    """Each function's policy file with its statements whose Sid starts with ``sid_prefix``
    replaced by what ``generated[function]`` makes (the stage's functions only)."""
    written = []
    functions = config["stages"][stage].get("lambda_functions", {})
    for function, statements in generated.items():
        if function not in functions:
            continue
        path = policy_path(config, stage, function)
        policy = json.loads(path.read_text())
        kept = [s for s in policy["Statement"] if not str(s.get("Sid", "")).startswith(sid_prefix)]
        document = {**policy, "Statement": kept + statements()}
        path.write_text(json.dumps(document, indent=2) + "\n")
        written.append(path)
    return written


def main(write_stage: Callable[[dict[str, Any], str], list[Path]]) -> int:
    """``python -m infra.<generator> [stage]``: write the stage's files (prod by default)."""
    stage = sys.argv[1] if len(sys.argv) > 1 else "prod"
    for path in write_stage(load_config(), stage):
        print(f"wrote {path}")
    return 0
