"""``make deploy STAGE=local`` into LocalStack's runtime in host mode, as far as it goes without
Docker: the shared stack is created whole (DynamoDB Local included, the Glue job left out), and
the Chalice step stops at the first Lambda function, which LocalStack can only run in Docker.

A LocalStack of its own: the session's one holds the local stage's resources that the contract
suite and the local runtime created outside CloudFormation, and the stack's names are the same."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

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


def test_local_stage_deploys_its_stack_into_localstack(fresh_localstack: str) -> None:
    import boto3

    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "BROKER_"))}
    env["LOCALSTACK_HOST"] = fresh_localstack.removeprefix("http://")
    done = subprocess.run(
        [sys.executable, "-m", "infra.deploy", "--stage", "local"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    output = done.stdout + done.stderr
    assert f"LocalStack at {fresh_localstack}" in output, output
    assert "CREATE_COMPLETE              serverless-broker-local\n" in output, output
    # Without Docker LocalStack cannot run the functions: the deploy says so, and fails.
    assert done.returncode == 1, output
    assert "Creating lambda function: serverless-broker-local-" in output, output
    assert "LocalStack runs Lambda functions in Docker" in output, output

    kwargs = {"endpoint_url": fresh_localstack, "region_name": "us-east-1"}
    creds = {"aws_access_key_id": "test", "aws_secret_access_key": "test"}
    cfn = boto3.client("cloudformation", **kwargs, **creds)
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
    table = boto3.client("dynamodb", **kwargs, **creds).describe_table(
        TableName="serverless-broker-local"
    )["Table"]
    assert table["TableStatus"] == "ACTIVE"


def test_local_stage_never_deploys_without_localstack() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "BROKER_"))}
    env["LOCALSTACK_HOST"] = f"127.0.0.1:{free_port()}"  # nothing listens there
    done = subprocess.run(
        [sys.executable, "-m", "infra.deploy", "--stage", "local"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2
    assert "deploys into LocalStack only" in done.stderr
