"""Re-deploying a destroyed stage: the template uses the retained table and buckets when it is
given their names, and infra/deploy.py finds them (and only them) under the stage's names.

The whole deploy -> destroy -> deploy runs on a moto server in test_moto_stack.py; these check
the template's references and the detection on their own, in process."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws

from infra import deploy, stack
from infra.cfn import Resolver
from infra.declarations import LOCAL_PARAMETERS
from tests.infra.conftest import ACCOUNT, REGION, prod_resolver

ADOPTED = {
    "ExistingTableName": "kept-table",
    "ExistingArchiveBucketName": "kept-archive",
    "ExistingMetricsBucketName": "kept-metrics",
}


def _everything(r: Resolver, template: dict[str, Any]) -> str:
    """Every property of every resource the stack creates, and every output and export."""
    created = {
        logical_id: r.properties(logical_id)
        for logical_id, resource in template["Resources"].items()
        if "Condition" not in resource or r.condition(resource["Condition"])
    }
    return json.dumps([created, r.outputs(), r.exports()])


def test_given_names_replace_every_reference_to_the_retained_resources(
    template: dict[str, Any],
) -> None:
    own = prod_resolver(template)
    # ARNs and bucket names (the table's bare name is also the stack's prefix for every name).
    own_names = {own.get_att(k, "Arn") for k in ("Table", "ArchiveBucket", "MetricsBucket")}
    own_names |= {own.ref(k) for k in ("ArchiveBucket", "MetricsBucket")}
    r = prod_resolver(template, **ADOPTED)
    for logical_id in ("Table", "ArchiveBucket", "MetricsBucket"):
        assert not r.condition(template["Resources"][logical_id]["Condition"])
    text = _everything(r, template)
    assert not [name for name in own_names if name in text]  # not one reference left behind
    outputs = r.outputs()
    assert outputs["TableName"] == "kept-table"
    assert outputs["TableArn"] == f"arn:aws:dynamodb:{REGION}:{ACCOUNT}:table/kept-table"
    assert (outputs["ArchiveBucketName"], outputs["ArchiveBucketArn"]) == (
        "kept-archive",
        "arn:aws:s3:::kept-archive",
    )
    assert outputs["MetricsLocation"] == "s3://kept-metrics/metrics/"
    # What the stack still creates against them: the bucket policies, the Firehose stream.
    assert r.properties("ArchiveBucketPolicy")["Bucket"] == "kept-archive"
    assert r.properties("MetricsBucketPolicy")["PolicyDocument"]["Statement"][0]["Resource"] == [
        "arn:aws:s3:::kept-metrics",
        "arn:aws:s3:::kept-metrics/*",
    ]
    stream = r.properties("ArchiveStream")["ExtendedS3DestinationConfiguration"]
    assert stream["BucketARN"] == "arn:aws:s3:::kept-archive"
    assert (
        r.properties("MetricsJob")["DefaultArguments"]["--archive"] == "s3://kept-archive/archive/"
    )


def test_without_given_names_the_stack_creates_them_as_before(template: dict[str, Any]) -> None:
    r = prod_resolver(template)
    for logical_id in ("Table", "ArchiveBucket", "MetricsBucket"):
        assert r.condition(template["Resources"][logical_id]["Condition"])
    assert r.outputs()["TableName"] == "serverless-broker-prod"
    assert r.outputs()["ArchiveBucketArn"] == (
        f"arn:aws:s3:::serverless-broker-prod-archive-{ACCOUNT}-{REGION}"
    )


# ------------------------------------------------------------------------------------ detection
@pytest.fixture
def session(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    for name in ("AWS_ENDPOINT_URL", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    with mock_aws():
        yield boto3.Session(region_name=REGION)


def _table(session: Any, name: str, keys: tuple[str, ...] = ("pk", "sk"), ttl: bool = True) -> None:
    ddb = session.client("dynamodb")
    ddb.create_table(
        TableName=name,
        BillingMode="PAY_PER_REQUEST",
        AttributeDefinitions=[{"AttributeName": k, "AttributeType": "S"} for k in keys],
        KeySchema=[
            {"AttributeName": k, "KeyType": kind}
            for k, kind in zip(keys, ("HASH", "RANGE"), strict=False)
        ],
    )
    if ttl:
        ddb.update_time_to_live(
            TableName=name,
            TimeToLiveSpecification={"Enabled": True, "AttributeName": "expires_at"},
        )


def _retained(
    session: Any, template: dict[str, Any], stage: str, **params: str
) -> tuple[dict[str, str], list[str]]:
    lines: list[str] = []
    found = deploy.retained(session, template, stage, params, ACCOUNT, say=lines.append)
    return found, lines


def test_nothing_is_adopted_where_nothing_was_kept(session: Any, template: dict[str, Any]) -> None:
    assert _retained(session, template, "prod") == ({}, [])


def test_kept_resources_are_found_under_the_names_the_template_gives_them(
    session: Any, template: dict[str, Any]
) -> None:
    _table(session, "serverless-broker-prod")
    s3 = session.client("s3")
    s3.create_bucket(Bucket=f"serverless-broker-prod-archive-{ACCOUNT}-{REGION}")
    s3.create_bucket(Bucket=f"serverless-broker-prod-metrics-{ACCOUNT}-{REGION}")
    s3.create_bucket(Bucket="serverless-broker-prod-metrics")  # another naming: not ours
    found, lines = _retained(session, template, "prod")
    assert found == {
        "ExistingTableName": "serverless-broker-prod",
        "ExistingArchiveBucketName": f"serverless-broker-prod-archive-{ACCOUNT}-{REGION}",
        "ExistingMetricsBucketName": f"serverless-broker-prod-metrics-{ACCOUNT}-{REGION}",
    }
    assert lines == [
        "adopting table serverless-broker-prod, kept by an earlier destroy",
        f"adopting bucket serverless-broker-prod-archive-{ACCOUNT}-{REGION}, kept by an earlier"
        " destroy",
        f"adopting bucket serverless-broker-prod-metrics-{ACCOUNT}-{REGION}, kept by an earlier"
        " destroy",
    ]
    # Another stage's resources are not this stage's.
    assert _retained(session, template, "qa") == ({}, [])


def test_private_bucket_names_are_looked_up_without_the_suffix(
    session: Any, template: dict[str, Any]
) -> None:
    session.client("s3").create_bucket(Bucket="serverless-broker-local-archive")
    found, _ = _retained(session, template, "local", **LOCAL_PARAMETERS)
    assert found == {"ExistingArchiveBucketName": "serverless-broker-local-archive"}


def test_an_existing_stack_keeps_its_own_parameters(session: Any, template: dict[str, Any]) -> None:
    _table(session, "serverless-broker-prod")
    body = json.dumps({"Resources": {"Queue": {"Type": "AWS::SQS::Queue"}}})
    cfn = session.client("cloudformation")
    stack.deploy(cfn, "serverless-broker-prod", body, {}, say=lambda _: None, poll_seconds=0)
    assert _retained(session, template, "prod") == ({}, [])


def test_a_parameter_given_is_left_as_given(session: Any, template: dict[str, Any]) -> None:
    _table(session, "serverless-broker-prod")
    found, lines = _retained(session, template, "prod", ExistingTableName="")
    assert (found, lines) == ({}, [])


def test_a_table_with_other_keys_is_refused_not_adopted(
    session: Any, template: dict[str, Any]
) -> None:
    _table(session, "serverless-broker-prod", keys=("id",))
    with pytest.raises(stack.StackError, match=r"serverless-broker-prod exists with keys"):
        _retained(session, template, "prod")


def test_a_kept_table_without_ttl_is_adopted_with_a_warning(
    session: Any, template: dict[str, Any]
) -> None:
    _table(session, "serverless-broker-prod", ttl=False)
    found, lines = _retained(session, template, "prod")
    assert found == {"ExistingTableName": "serverless-broker-prod"}
    assert lines[0].startswith("warning: table serverless-broker-prod has no TTL on expires_at")
    assert "update-time-to-live" in lines[0]


def test_an_unknown_parameter_is_one_line_not_a_traceback(
    session: Any, template: dict[str, Any]
) -> None:
    with pytest.raises(stack.StackError, match=r"unknown parameters: \['TableNmae'\]"):
        _retained(session, template, "prod", TableNmae="x")
