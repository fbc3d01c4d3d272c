"""infra/function_url.py: the template resources per AuthType, and the deploy-time calls against
moto's Lambda (create, switch AuthType, disable)."""

from __future__ import annotations

import io
import json
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws

from infra.function_url import FunctionUrl, put_on
from tests.infra.test_template_lint import lint


def test_stage_config_defaults_to_iam_and_refuses_unknown_auth_types() -> None:
    config: dict[str, Any] = {"stages": {"a": {}, "b": {"function_url": {"auth_type": "OPEN"}}}}
    assert FunctionUrl.of_stage(config, "a") == FunctionUrl(True, "AWS_IAM")
    with pytest.raises(SystemExit):
        FunctionUrl.of_stage(config, "b")


def test_a_stage_may_serve_only_the_ingress_on_its_url() -> None:
    config: dict[str, Any] = {
        "stages": {
            "a": {},
            "i": {"function_url": {"routes": "ingress"}},
            "x": {"function_url": {"routes": "control"}},
        }
    }
    assert FunctionUrl.of_stage(config, "a").environment() == {
        "BROKER_FUNCTION_URL_INGRESS_ONLY": "false"
    }
    assert FunctionUrl.of_stage(config, "i").environment() == {
        "BROKER_FUNCTION_URL_INGRESS_ONLY": "true"
    }
    with pytest.raises(SystemExit):
        FunctionUrl.of_stage(config, "x")
    shipped = json.loads((Path(__file__).parents[2] / ".chalice" / "config.json").read_text())
    assert FunctionUrl.of_stage(shipped, "prod").routes == "ingress"


def test_a_public_url_gets_both_public_permissions() -> None:
    resources = FunctionUrl(True, "NONE").sam_resources("APIHandler")
    assert resources["APIHandlerFunctionUrl"]["Properties"]["AuthType"] == "NONE"
    actions = sorted(
        r["Properties"]["Action"]
        for r in resources.values()
        if r["Type"] == "AWS::Lambda::Permission"
    )
    assert actions == ["lambda:InvokeFunction", "lambda:InvokeFunctionUrl"]
    assert FunctionUrl(False).sam_resources("APIHandler") == {}
    assert FunctionUrl(False).sam_output() == {}


@pytest.fixture
def lam() -> Iterator[Any]:
    with mock_aws():
        iam = boto3.client("iam", region_name="us-east-1")
        role = iam.create_role(RoleName="r", AssumeRolePolicyDocument="{}")["Role"]["Arn"]
        client = boto3.client("lambda", region_name="us-east-1")
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w") as zf:
            zf.writestr("app.py", "def app(e, c):\n    return {}\n")
        client.create_function(
            FunctionName="serverless-broker-prod", Runtime="python3.12", Role=role,
            Handler="app.app", Code={"ZipFile": buf.getvalue()},
        )  # fmt: skip
        yield client


def test_deploy_creates_switches_and_removes_the_url(lam: Any) -> None:
    url = put_on(lam, "serverless-broker-prod", FunctionUrl(True, "AWS_IAM"))
    assert url and url.startswith("https://")
    assert (
        lam.get_function_url_config(FunctionName="serverless-broker-prod")["AuthType"] == "AWS_IAM"
    )
    assert put_on(lam, "serverless-broker-prod", FunctionUrl(True, "AWS_IAM")) == url  # idempotent
    assert put_on(lam, "serverless-broker-prod", FunctionUrl(True, "NONE")) == url
    assert lam.get_function_url_config(FunctionName="serverless-broker-prod")["AuthType"] == "NONE"
    assert put_on(lam, "serverless-broker-prod", FunctionUrl(False)) is None
    with pytest.raises(lam.exceptions.ResourceNotFoundException):
        lam.get_function_url_config(FunctionName="serverless-broker-prod")


@pytest.mark.parametrize("auth", ["AWS_IAM", "NONE"])
def test_the_resources_pass_cfn_lint(auth: str, tmp_path: Path) -> None:
    function = {
        "Type": "AWS::Lambda::Function",
        "Properties": {
            "Role": "arn:aws:iam::123456789012:role/r",
            "Runtime": "python3.12",
            "Handler": "app.app",
            "Code": {"ZipFile": "def app(e, c): pass"},
        },
    }
    url = FunctionUrl(True, auth)
    template = {
        "AWSTemplateFormatVersion": "2010-09-09",
        "Resources": {"APIHandler": function, **url.sam_resources("APIHandler")},
        "Outputs": url.sam_output(),
    }
    path = tmp_path / "t.json"
    path.write_text(json.dumps(template))
    assert lint(path) == []
