"""``make deploy STAGE=local`` into LocalStack's runtime in host mode, as far as it goes without
Docker: the shared stack is created whole (DynamoDB Local included, the Glue job left out), and
the Chalice step stops at the first Lambda function, which LocalStack can only run in Docker.

A LocalStack of its own: the session's one holds the local stage's resources that the contract
suite and the local runtime created outside CloudFormation, and the stack's names are the same."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from brokerctl.embedded_aws import free_port
from tests.localstack import host_localstack

pytestmark = [pytest.mark.localstack, pytest.mark.slow]
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def fresh_localstack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    stack = host_localstack(tmp_path_factory.mktemp("ls-deploy"))
    yield stack.start()
    stack.stop()


def _deploy(localstack: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "BROKER_"))}
    env["LOCALSTACK_HOST"] = localstack.removeprefix("http://")
    return subprocess.run(
        [sys.executable, "-m", "infra.deploy", "--stage", "local", *args],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip


def _client(localstack: str, service: str) -> Any:
    import boto3

    return boto3.client(
        service, endpoint_url=localstack, region_name="us-east-1",
        aws_access_key_id="test", aws_secret_access_key="test",
    )  # fmt: skip


def test_local_stage_deploys_its_stack_into_localstack(fresh_localstack: str) -> None:
    done = _deploy(fresh_localstack)
    output = done.stdout + done.stderr
    assert f"LocalStack at {fresh_localstack}" in output, output
    assert "CREATE_COMPLETE              serverless-broker-local\n" in output, output
    # Without Docker LocalStack cannot run the functions: the deploy says so, and fails.
    assert done.returncode == 1, output
    assert "Creating lambda function: serverless-broker-local-" in output, output
    assert "LocalStack runs Lambda functions in Docker" in output, output

    cfn = _client(fresh_localstack, "cloudformation")
    (described,) = cfn.describe_stacks(StackName="serverless-broker-local")["Stacks"]
    assert described["StackStatus"] == "CREATE_COMPLETE"
    outputs = {o["OutputKey"]: o["OutputValue"] for o in described["Outputs"]}
    assert outputs["TableName"] == "serverless-broker-local"
    assert outputs["ArchiveBucketName"] == "serverless-broker-local-archive"
    assert "GlueJobName" not in outputs  # CreateMetricsJob=false
    resources = {
        r["LogicalResourceId"]
        for r in cfn.describe_stack_resources(StackName="serverless-broker-local")["StackResources"]
    }
    assert {"Table", "ArchiveStream", "ClaimBucket", "MetricsBucket"} <= resources
    assert not {"MetricsJob", "MetricsJobSchedule", "GlueRole"} & resources
    ddb = _client(fresh_localstack, "dynamodb")
    table = ddb.describe_table(TableName="serverless-broker-local")["Table"]
    assert table["TableStatus"] == "ACTIVE"

    # Destroy keeps the table and the buckets; the next deploy adopts them, data and all.
    item = {"pk": {"S": "broker#default/b1"}, "sk": {"S": "spec"}}
    ddb.put_item(TableName=outputs["TableName"], Item=item)
    s3 = _client(fresh_localstack, "s3")
    s3.put_object(Bucket=outputs["ArchiveBucketName"], Key="archive/2026/11/26/02/e1", Body=b"e1")
    destroyed = _deploy(fresh_localstack, "--destroy")
    output = destroyed.stdout + destroyed.stderr
    assert destroyed.returncode == 0, output
    assert "kept table serverless-broker-local (" in output, output
    assert not [
        s for s in cfn.list_stacks()["StackSummaries"] if s["StackStatus"] != "DELETE_COMPLETE"
    ]

    again = _deploy(fresh_localstack)
    output = again.stdout + again.stderr
    for kind, name in (("table", "serverless-broker-local"),
                       ("bucket", "serverless-broker-local-archive"),
                       ("bucket", "serverless-broker-local-metrics")):  # fmt: skip
        assert f"adopting {kind} {name}, kept by an earlier destroy\n" in output, output
    assert "CREATE_COMPLETE              serverless-broker-local\n" in output, output
    assert again.returncode == 1, output  # the functions, as before
    (described,) = cfn.describe_stacks(StackName="serverless-broker-local")["Stacks"]
    assert {o["OutputKey"]: o["OutputValue"] for o in described["Outputs"]} == outputs
    assert ddb.get_item(TableName=outputs["TableName"], Key=item)["Item"] == item
    archived = s3.get_object(Bucket=outputs["ArchiveBucketName"], Key="archive/2026/11/26/02/e1")
    assert archived["Body"].read() == b"e1"


def test_local_stage_never_deploys_without_localstack() -> None:
    done = _deploy(f"http://127.0.0.1:{free_port()}")  # nothing listens there
    assert done.returncode == 2
    assert "deploys into LocalStack only" in done.stderr


# ------------------------------------------------------------------------------ routes (mode 2)
CHALICE = "import sys; from chalice.cli import main; sys.exit(main())"
ACCOUNT = "000000000000"  # LocalStack's default account


def _resolve_sub(node: Any, values: dict[str, str]) -> Any:
    """The package's ``Fn::Sub`` integration URIs with the values known here; any other
    intrinsic, or an unknown variable, fails the test."""
    if isinstance(node, list):
        return [_resolve_sub(item, values) for item in node]
    if not isinstance(node, dict):
        return node
    if set(node) == {"Fn::Sub"}:
        text = node["Fn::Sub"]
        for name, value in values.items():
            text = text.replace("${" + name + "}", value)
        assert "${" not in text, text
        return text
    assert not [k for k in node if k.startswith("Fn::") or k == "Ref"], node
    return {k: _resolve_sub(v, values) for k, v in node.items()}


def test_the_apis_routes_import_into_localstack_with_their_protection(
    fresh_localstack: str, tmp_path: Path
) -> None:
    """Without Docker `chalice deploy` stops before the REST API; the API Chalice generates
    (`chalice package`'s RestAPI definition, the one pipelines deploy) imports into LocalStack's
    API Gateway whole, and the gateway responses and stage protection the deploy puts on
    Chalice's API apply to it. The functions behind it need Docker: a route answers 5xx."""
    import urllib.error
    import urllib.request

    from app import app
    from infra import api_protection, chalice_project, gateway_responses

    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "BROKER_"))}
    env["AWS_DEFAULT_REGION"] = "us-east-1"
    subprocess.run(
        [sys.executable, "-c", CHALICE, "package", "--stage", "local", str(tmp_path)],
        cwd=ROOT, env=env, check=True, capture_output=True, timeout=300,
    )  # fmt: skip
    sam = json.loads((tmp_path / "sam.json").read_text())
    handler = f"arn:aws:lambda:us-east-1:{ACCOUNT}:function:serverless-broker-local"
    definition = _resolve_sub(
        sam["Resources"]["RestAPI"]["Properties"]["DefinitionBody"],
        {"AWS::Partition": "aws", "AWS::Region": "us-east-1", "APIHandler.Arn": handler},
    )

    apigw = _client(fresh_localstack, "apigateway")
    api = apigw.import_rest_api(
        body=json.dumps(definition), parameters={"endpointConfigurationTypes": "REGIONAL"}
    )["id"]
    resources = apigw.get_resources(restApiId=api, embed=["methods"], limit=500)["items"]
    present = {(r["path"], m) for r in resources for m in r.get("resourceMethods", {})}
    routes = {(path, m) for path, methods in app.routes.items() for m in methods}
    assert len(routes) > 20 and routes <= present, sorted(routes - present)
    ingress = next(r["id"] for r in resources if r["path"] == "/{namespace}/{broker}")
    method = apigw.get_method(restApiId=api, resourceId=ingress, httpMethod="POST")
    integration = method["methodIntegration"]
    assert (integration["type"], integration["httpMethod"]) == ("AWS_PROXY", "POST")
    assert handler in integration["uri"]

    # What infra.deploy puts on the API `chalice deploy` makes, on this one.
    config = chalice_project.load_config()
    api_stage = config["stages"]["local"].get("api_gateway_stage", "api")
    apigw.create_deployment(restApiId=api, stageName=api_stage)
    gateway_responses.put_on(apigw, api, api_stage)
    logs = _client(fresh_localstack, "logs")
    group = "/aws/apigateway/serverless-broker-local-access"
    if not logs.describe_log_groups(logGroupNamePrefix=group)["logGroups"]:
        logs.create_log_group(logGroupName=group)
    log_arn = f"arn:aws:logs:us-east-1:{ACCOUNT}:log-group:{group}"
    protection = api_protection.ApiProtection.of_stage(config, "local")
    warnings: list[str] = []
    api_protection.put_on(apigw, api, api_stage, protection, log_arn, say=warnings.append)
    assert warnings == []

    response = apigw.get_gateway_response(
        restApiId=api, responseType="MISSING_AUTHENTICATION_TOKEN"
    )
    assert response["statusCode"] == "404"
    stage = apigw.get_stage(restApiId=api, stageName=api_stage)
    assert stage["methodSettings"]["*/*"]["throttlingRateLimit"] == protection.rate_limit
    assert stage["methodSettings"]["*/*"]["throttlingBurstLimit"] == protection.burst_limit
    assert stage["tracingEnabled"] is True
    assert stage["accessLogSettings"] == {
        "destinationArn": log_arn,
        "format": api_protection.ACCESS_LOG_FORMAT,
    }

    # Served: a path no route matches answers the 404 problem; a route reaches for its function.
    base = f"{fresh_localstack}/_aws/execute-api/{api}/{api_stage}"
    with pytest.raises(urllib.error.HTTPError) as missing:
        urllib.request.urlopen(f"{base}/no/such/route/here", timeout=30)
    # Our status (API Gateway's is 403); LocalStack applies no more of a gateway response (its
    # body and headers are TODOs in its execute-api), AWS applies all of it.
    assert missing.value.code == 404
    assert missing.value.headers["x-amzn-ErrorType"] == "MissingAuthenticationTokenException"
    missing.value.close()
    with pytest.raises(urllib.error.HTTPError) as routed:
        urllib.request.urlopen(f"{base}/healthz", timeout=30)
    routed.value.close()
    assert routed.value.code >= 500
