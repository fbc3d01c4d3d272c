"""cfn-lint on the shared stack's template, informational checks included."""

from __future__ import annotations

from pathlib import Path

from cfnlint.api import ManualArgs, lint_file

from infra.cfn import TEMPLATE_PATH

# Regions the stack is meant for; cfn-lint checks resource types and values per region.
REGIONS = ["us-east-1", "eu-west-1", "ap-southeast-2"]


def lint(path: Path) -> list[str]:
    matches = lint_file(path, config=ManualArgs(include_checks=["I"], regions=REGIONS))
    return [f"{m.rule.id} {m.message} ({path.name}:{m.linenumber})" for m in matches]


def test_template_passes_cfn_lint() -> None:
    assert lint(TEMPLATE_PATH) == []


def test_cfn_lint_sees_a_broken_template(tmp_path: Path) -> None:
    broken = tmp_path / "broken.yaml"
    broken.write_text(
        TEMPLATE_PATH.read_text().replace("BillingMode: PAY_PER_REQUEST", "BillingMode: FREE")
    )
    assert any(problem.startswith("E3030") for problem in lint(broken))
