"""`chalice package --stage prod`: the CloudFormation pipelines deploy, linted and inspected.

Two builds: the raw output (what any `chalice package` gives) and the output of
`python -m infra.deploy --package-only` (function names fixed, shared-stack values imported).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest
from chalice.utils import to_cfn_resource_name

from infra import chalice_project, deploy
from infra.cfn import Resolver
from tests.infra.conftest import REPO, STAGE
from tests.infra.test_template_lint import lint

pytestmark = pytest.mark.slow

MAX_UNZIPPED_BYTES = 20 * 1024 * 1024
FORBIDDEN_TOP_LEVEL = {"tests", "spark_glue", "benchmarks", "brokerctl", "infra", "pyspark"}
# Producers reach the ingress without AWS credentials (per-broker tokens are the app's business).
OPEN_PATHS = {"/{namespace}/{broker}", "/healthz"}
CHALICE = "import sys; from chalice.cli import main; sys.exit(main())"


def _clean_env() -> dict[str, str]:
    # As a pipeline runs it: no broker settings in the environment, only a region.
    env = {k: v for k, v in os.environ.items() if not k.startswith(("BROKER_", "AWS_ENDPOINT"))}
    env["AWS_DEFAULT_REGION"] = "us-east-1"
    return env


@pytest.fixture(scope="module")
def raw_package(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("chalice-package")
    subprocess.run(
        [sys.executable, "-c", CHALICE, "package", "--stage", STAGE, str(out)],
        cwd=REPO,
        env=_clean_env(),
        check=True,
        capture_output=True,
        timeout=300,
    )
    return out


@pytest.fixture(scope="module")
def pipeline_package(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("pipeline-package")
    deploy.package(STAGE, "us-east-1", out, public_url="https://events.example.com")
    return out


def _sam(out: Path) -> dict[str, Any]:
    sam: dict[str, Any] = json.loads((out / "sam.json").read_text())
    return sam


def _functions(sam: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {k: v for k, v in sam["Resources"].items() if v["Type"] == "AWS::Serverless::Function"}


def _logical_id(function: str) -> str:
    return "APIHandler" if function == "api_handler" else to_cfn_resource_name(function)


@pytest.mark.parametrize("which", ["raw_package", "pipeline_package"])
def test_package_passes_cfn_lint(which: str, request: pytest.FixtureRequest) -> None:
    out: Path = request.getfixturevalue(which)
    assert lint(out / "sam.json") == []


def test_lambda_zip_is_small_and_holds_no_test_or_spark_code(raw_package: Path) -> None:
    with zipfile.ZipFile(raw_package / "deployment.zip") as zf:
        infos = zf.infolist()
    names = [i.filename for i in infos]
    assert sum(i.file_size for i in infos) < MAX_UNZIPPED_BYTES
    assert "app.py" in names
    assert any(n.startswith("chalicelib/") for n in names)
    tops = {n.split("/", 1)[0] for n in names}
    assert tops & FORBIDDEN_TOP_LEVEL == set()
    assert not [n for n in names if "pyspark" in n.lower()]


def test_app_defines_exactly_the_configured_functions(
    raw_package: Path, chalice_config: dict[str, Any], template: dict[str, Any]
) -> None:
    configured = set(chalice_config["stages"][STAGE]["lambda_functions"])
    declared = set(template["Metadata"]["ServerlessBroker"]["Functions"])
    assert configured == declared
    assert set(_functions(_sam(raw_package))) == {_logical_id(f) for f in configured}


def test_functions_get_their_settings_and_policy(
    raw_package: Path, chalice_config: dict[str, Any], policy_files: dict[str, dict[str, Any]]
) -> None:
    sam = _sam(raw_package)
    for function, spec in chalice_config["stages"][STAGE]["lambda_functions"].items():
        resource = sam["Resources"].get(_logical_id(function))
        if resource is None:
            continue  # reported by test_app_defines_exactly_the_configured_functions
        props = resource["Properties"]
        assert props["MemorySize"] == spec["lambda_memory_size"]
        assert props["Timeout"] == spec["lambda_timeout"]
        assert props.get("ReservedConcurrentExecutions") == spec.get("reserved_concurrency")
        role = sam["Resources"][props["Role"]["Fn::GetAtt"][0]]["Properties"]
        assert [p["PolicyDocument"] for p in role["Policies"]] == [policy_files[function]]


@pytest.mark.parametrize("which", ["raw_package", "pipeline_package"])
def test_every_function_is_traced_actively(which: str, request: pytest.FixtureRequest) -> None:
    out: Path = request.getfixturevalue(which)
    functions = _functions(_sam(out))
    assert len(functions) == 8  # the replayer (docs/replay.md), pings, sources (docs/sources.md)
    for logical_id, resource in functions.items():
        assert resource["Properties"].get("Tracing") == "Active", logical_id


def test_control_plane_routes_require_iam_and_ingress_does_not(
    raw_package: Path,
) -> None:
    api = _sam(raw_package)["Resources"]["RestAPI"]["Properties"]
    assert api["EndpointConfiguration"] == "REGIONAL"
    swagger = api["DefinitionBody"]
    assert any(p.startswith("/apis/") for p in swagger["paths"])
    for path, methods in swagger["paths"].items():
        for method, spec in methods.items():
            if method == "options" or not isinstance(spec, dict):
                continue
            schemes = {name for s in spec.get("security", []) for name in s}
            if path.startswith("/apis/"):
                assert schemes == {"sigv4"}, f"{method.upper()} {path} is not IAM-authorised"
            elif path in OPEN_PATHS:
                assert schemes == set(), f"{method.upper()} {path} should be open"
    assert swagger["securityDefinitions"]["sigv4"]["x-amazon-apigateway-authtype"] == "awsSigv4"


def test_pipeline_package_names_functions_and_imports_the_shared_stack(
    pipeline_package: Path,
    chalice_config: dict[str, Any],
    template: dict[str, Any],
    resolver: Resolver,
) -> None:
    exports = set(resolver.exports())
    for logical_id, resource in _functions(_sam(pipeline_package)).items():
        props = resource["Properties"]
        function = next(
            f
            for f in ["api_handler", *chalice_config["stages"][STAGE]["lambda_functions"]]
            if _logical_id(f) == logical_id
        )
        assert props["FunctionName"] == chalice_project.function_name(
            chalice_config, STAGE, function
        )
        variables = props["Environment"]["Variables"]
        imported = {v["Fn::ImportValue"] for v in variables.values() if "Fn::ImportValue" in v}
        assert imported <= exports
        # The ARNs the stage delivers to (infra/target_policy.py), as its policies grant them.
        assert variables["BROKER_TARGET_ARN_PATTERNS"] == {
            "Fn::Sub": ",".join(chalice_config["stages"][STAGE]["target_arn_patterns"])
        }
        # What IntegrationSources may read (infra/source_policy.py), as granted.
        assert variables["BROKER_SOURCE_ARN_PATTERNS"] == {
            "Fn::Sub": ",".join(chalice_config["stages"][STAGE]["source_arn_patterns"])
        }
        assert {"BROKER_ARCHIVE_BUCKET", "BROKER_CLAIM_BUCKET"} <= {
            k for k, v in variables.items() if isinstance(v, dict)
        }
        assert variables["BROKER_PUBLIC_URL"] == "https://events.example.com"
        assert variables["BROKER_LOCAL_MODE"] == "false"


def test_pipeline_package_answers_unknown_paths_with_a_404_problem(
    pipeline_package: Path,
) -> None:
    definition = _sam(pipeline_package)["Resources"]["RestAPI"]["Properties"]["DefinitionBody"]
    response = definition["x-amazon-apigateway-gateway-responses"]["MISSING_AUTHENTICATION_TOKEN"]
    assert response["statusCode"] == "404"
    assert response["responseParameters"] == {
        "gatewayresponse.header.Content-Type": "'application/problem+json'"
    }
    problem = json.loads(response["responseTemplates"]["application/json"])
    assert (problem["status"], problem["title"]) == (404, "No such route")
    assert problem["type"].endswith("/no-such-route")


def test_pipeline_package_throttles_the_stage_and_logs_access_as_json(
    pipeline_package: Path, chalice_config: dict[str, Any], resolver: Resolver
) -> None:
    props = _sam(pipeline_package)["Resources"]["RestAPI"]["Properties"]
    protection = chalice_config["stages"][STAGE]["api_protection"]
    assert props["TracingEnabled"] is True
    assert props["MethodSettings"] == [
        {
            "ResourcePath": "/*",
            "HttpMethod": "*",
            "ThrottlingRateLimit": float(protection["throttling_rate_limit"]),
            "ThrottlingBurstLimit": protection["throttling_burst_limit"],
        }
    ]
    access = props["AccessLogSetting"]
    assert access["DestinationArn"]["Fn::ImportValue"] in set(resolver.exports())
    fields = json.loads(access["Format"])
    assert {"requestId", "ip", "status", "responseLatency"} <= set(fields)


def test_every_function_gets_the_per_trigger_concurrency_default(pipeline_package: Path) -> None:
    for resource in _functions(_sam(pipeline_package)).values():
        variables = resource["Properties"]["Environment"]["Variables"]
        assert 2 <= int(variables["BROKER_MAX_CONCURRENCY"]) <= 1000


def test_no_function_reserves_concurrency(raw_package: Path) -> None:
    """New accounts have a concurrency limit of 10, and Lambda keeps 10 unreserved: any
    reservation fails the deployment there. The reconciler's runs are idempotent plans, so two
    at once do no harm."""
    for resource in _functions(_sam(raw_package)).values():
        assert "ReservedConcurrentExecutions" not in resource["Properties"]


def test_the_pipeline_package_vendors_the_tracers_xray_sdk(pipeline_package: Path) -> None:
    with zipfile.ZipFile(pipeline_package / "deployment.zip") as zf:
        names = zf.namelist()
        size = sum(i.file_size for i in zf.infolist())
    assert any(n.startswith("aws_xray_sdk/") for n in names)
    assert any(n.startswith("wrapt/") for n in names)
    assert not any(n.startswith("botocore/") for n in names)  # the runtime's own, not a second
    assert size < MAX_UNZIPPED_BYTES


@pytest.mark.parametrize("which", ["raw_package", "pipeline_package"])
def test_functions_run_on_a_supported_python_runtime(
    which: str, request: pytest.FixtureRequest
) -> None:
    """python3.11 stops taking new Lambda functions on 2027-07-31; Chalice takes the runtime
    from the interpreter that packages, which `make` picks (3.12)."""
    out = request.getfixturevalue(which)
    runtimes = {r["Properties"]["Runtime"] for r in _functions(_sam(out)).values()}
    assert runtimes and runtimes <= {"python3.12", "python3.13"}


def test_the_pipeline_package_has_the_function_url_beside_the_api(pipeline_package: Path) -> None:
    """The cheaper ingress (infra/function_url.py, docs/cost.md): an IAM-authenticated Function
    URL on the API function, its address an output; no public permission with AWS_IAM."""
    sam = _sam(pipeline_package)
    url = sam["Resources"]["APIHandlerFunctionUrl"]
    assert url["Type"] == "AWS::Lambda::Url"
    assert url["Properties"] == {"TargetFunctionArn": {"Ref": "APIHandler"}, "AuthType": "AWS_IAM"}
    assert sam["Outputs"]["FunctionUrl"]["Value"] == {
        "Fn::GetAtt": ["APIHandlerFunctionUrl", "FunctionUrl"]
    }
    permissions = [r for r in sam["Resources"].values() if r["Type"] == "AWS::Lambda::Permission"]
    assert not [p for p in permissions if p["Properties"].get("Principal") == "*"]
    assert "RestAPI" in sam["Resources"]  # beside API Gateway, not instead of it
    variables = sam["Resources"]["APIHandler"]["Properties"]["Environment"]["Variables"]
    assert variables["BROKER_FUNCTION_URL_INGRESS_ONLY"] == "true"  # prod: producers only there


def test_the_shipped_package_has_no_spool_extension_and_no_carry(
    pipeline_package: Path, chalice_config: dict[str, Any]
) -> None:
    """The archive carry is opt-in (docs/cost.md): the prod stage as shipped carries nothing, so
    no function has the spool layer and none is told to carry."""
    from infra import spool_layer

    assert not spool_layer.carrying(chalice_config, STAGE)
    sam = _sam(pipeline_package)
    assert spool_layer.LAYER_ID not in sam["Resources"]
    assert not (pipeline_package / spool_layer.ZIP_NAME).exists()
    for logical_id, resource in _functions(sam).items():
        assert "Layers" not in resource["Properties"], logical_id
        variables = resource["Properties"].get("Environment", {}).get("Variables", {})
        assert "BROKER_ARCHIVE_CARRY_SECONDS" not in variables, logical_id
