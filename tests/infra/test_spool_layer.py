"""The spool extension's layer (infra/spool_layer.py): its zip, the stages and functions it goes
on, and both ways in: the packaged template (through moto's CloudFormation, as SAM's transform
hands it over) and the Lambda API ``chalice deploy``'s path publishes it with."""

from __future__ import annotations

import base64
import copy
import hashlib
import io
import json
import uuid
import zipfile
from typing import Any

import boto3
import pytest

from infra import chalice_project, spool_layer
from tests.infra.conftest import STAGE


def test_the_zip_is_what_lambda_runs_and_the_same_for_the_same_sources() -> None:
    content = spool_layer.layer_zip()
    with zipfile.ZipFile(io.BytesIO(content)) as zf:
        modes = {i.filename: (i.external_attr >> 16) & 0o777 for i in zf.infolist()}
        extension = zf.read(f"{spool_layer.EXTENSION_NAME}/extension.py")
    assert modes == {
        f"extensions/{spool_layer.EXTENSION_NAME}": 0o755,
        f"{spool_layer.EXTENSION_NAME}/extension.py": 0o644,
    }
    assert extension == (spool_layer.SOURCE / "extension.py").read_bytes()
    assert spool_layer.layer_zip() == content  # a redeploy publishes no new version


def _sam(functions: list[str]) -> dict[str, Any]:
    return {
        "Resources": {
            name: {"Type": "AWS::Serverless::Function", "Properties": {}} for name in functions
        }
    }


def test_every_function_of_a_carrying_stage_gets_the_layer_and_only_there(
    chalice_config: dict[str, Any], template: dict[str, Any]
) -> None:
    # The carry is opt-in (docs/cost.md): a stage that asks for it gets the layer, as it is
    # safe only with it; the shipped stages carry nothing.
    assert not spool_layer.carrying(chalice_config, STAGE)
    carrying = copy.deepcopy(chalice_config)
    carrying["stages"][STAGE]["environment_variables"]["BROKER_ARCHIVE_CARRY_SECONDS"] = "1"
    logical_ids = ["APIHandler", "Delivery", "DeadLetter", "Reconciler", "KafkaIngress", "Replayer"]
    patched = chalice_project.patch_package(
        _sam(logical_ids), carrying, STAGE, template, "https://events.example.com"
    )
    layer = patched["Resources"][spool_layer.LAYER_ID]
    assert layer["Properties"]["ContentUri"] == f"./{spool_layer.ZIP_NAME}"
    for logical_id in logical_ids:
        assert patched["Resources"][logical_id]["Properties"]["Layers"] == [
            {"Ref": spool_layer.LAYER_ID}
        ]

    plain = chalice_project.patch_package(
        _sam(logical_ids), chalice_config, STAGE, template, "https://events.example.com"
    )
    assert spool_layer.LAYER_ID not in plain["Resources"]
    assert all("Layers" not in plain["Resources"][i]["Properties"] for i in logical_ids)
    assert not spool_layer.carrying(chalice_config, "local")  # local mode batches, no layer


@pytest.fixture
def lam(moto_endpoint: str) -> Any:
    return boto3.client("lambda", endpoint_url=moto_endpoint, region_name="us-east-1")


def test_publish_makes_a_version_only_when_the_zip_changed_and_delete_removes_them(
    lam: Any,
) -> None:
    name = f"sb-{uuid.uuid4().hex[:8]}-archive-spool"
    first = spool_layer.publish(lam, name)
    assert first.endswith(f":layer:{name}:1")
    assert spool_layer.publish(lam, name) == first  # same content: the same version
    version = lam.get_layer_version(LayerName=name, VersionNumber=1)
    digest = base64.b64encode(hashlib.sha256(spool_layer.layer_zip()).digest()).decode()
    assert version["Content"]["CodeSha256"] == digest
    spool_layer.delete(lam, name)
    assert lam.list_layer_versions(LayerName=name)["LayerVersions"] == []


def test_moto_cloudformation_creates_the_layer_as_the_sam_transform_hands_it_over(
    moto_endpoint: str, lam: Any
) -> None:
    """moto has no SAM transform: the template gets the AWS::Lambda::LayerVersion the transform
    makes of our AWS::Serverless::LayerVersion once `aws cloudformation package` uploaded the
    zip. moto creates it (under a name of its own, ignoring LayerName, and its Ref is no ARN:
    moto's limits, so no function here refers to it)."""
    kw: dict[str, Any] = {"endpoint_url": moto_endpoint, "region_name": "us-east-1"}
    bucket = f"pkg-{uuid.uuid4().hex[:8]}"
    s3 = boto3.client("s3", **kw)
    s3.create_bucket(Bucket=bucket)
    s3.put_object(Bucket=bucket, Key="layer.zip", Body=spool_layer.layer_zip())
    props = spool_layer.sam_resources("serverless-broker", STAGE)[spool_layer.LAYER_ID]
    transformed = {
        "Type": "AWS::Lambda::LayerVersion",
        "Properties": {
            "LayerName": props["Properties"]["LayerName"],
            "Description": props["Properties"]["Description"],
            "Content": {"S3Bucket": bucket, "S3Key": "layer.zip"},
        },
    }
    cfn = boto3.client("cloudformation", **kw)
    name = f"layer-{uuid.uuid4().hex[:8]}"
    before = {layer["LayerName"] for layer in lam.list_layers()["Layers"]}
    cfn.create_stack(StackName=name, TemplateBody=json.dumps({"Resources": {"Layer": transformed}}))
    assert cfn.describe_stacks(StackName=name)["Stacks"][0]["StackStatus"] == "CREATE_COMPLETE"
    digest = base64.b64encode(hashlib.sha256(spool_layer.layer_zip()).digest()).decode()
    published = [
        lam.get_layer_version(
            LayerName=layer["LayerName"], VersionNumber=layer["LatestMatchingVersion"]["Version"]
        )
        for layer in lam.list_layers()["Layers"]
        if layer["LayerName"] not in before
    ]
    assert any(v["Content"]["CodeSha256"] == digest for v in published)
