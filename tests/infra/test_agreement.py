"""The three descriptions of a deployment agree: infra/template.yaml (what AWS gets),
.chalice/config.json (what the functions get) and local_declarations() with Settings defaults
(what local mode creates), down to names, keys, queue and redrive settings and environment."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from chalicelib.config import Settings
from chalicelib.core import reconcile
from chalicelib.core.resources.delivery_spec import CRASH_RECEIVE_MARGIN
from infra import chalice_project
from infra.cfn import Resolver
from infra.declarations import LOCAL_PARAMETERS, SETTINGS_FIELDS, local_declarations
from tests.infra.conftest import ACCOUNT, REGION, REPO, STAGE

APP = "serverless-broker"


def _meta(template: dict[str, Any]) -> dict[str, Any]:
    meta: dict[str, Any] = template["Metadata"]["ServerlessBroker"]
    return meta


def _stage_env(config: dict[str, Any], stage: str) -> dict[str, str]:
    return {
        **config.get("environment_variables", {}),
        **config["stages"][stage]["environment_variables"],
    }


def _template_env(template: dict[str, Any], r: Resolver) -> dict[str, str]:
    outputs = r.outputs()
    return {var: str(outputs[out]) for var, out in _meta(template)["Environment"].items()}


def test_settings_fields_are_what_config_py_reads() -> None:
    for var, attr in SETTINGS_FIELDS.items():
        value = "sb-x-" if var == "BROKER_QUEUE_PREFIX" else f"x-{var.lower()}"
        assert getattr(Settings.from_env({var: value}), attr) == value, var


def test_local_declarations_name_what_settings_defaults_name() -> None:
    settings = Settings()
    decl = local_declarations(settings)
    assert decl.table["TableName"] == settings.table_name
    assert decl.buckets[:2] == [settings.archive_bucket, settings.claim_bucket]
    assert decl.stream["DeliveryStreamName"] == settings.archive_stream
    assert decl.stream["ExtendedS3DestinationConfiguration"]["BucketARN"] == (
        f"arn:aws:s3:::{settings.archive_bucket}"
    )
    assert decl.functions == [
        settings.delivery_function,
        settings.dead_letter_function,
        settings.kafka_function,
        settings.sources_function,
    ]
    assert decl.queue_prefix == settings.queue_prefix
    for var, attr in SETTINGS_FIELDS.items():
        assert decl.environment[var] == str(getattr(settings, attr)), var


def test_local_declarations_are_the_template_for_the_local_stage(template: dict[str, Any]) -> None:
    r = Resolver(template, {"Stage": "local", **LOCAL_PARAMETERS})
    decl = local_declarations(Settings())
    assert decl.environment == _template_env(template, r)
    table = r.properties("Table")
    assert decl.table == {k: table[k] for k in decl.table}
    assert decl.table_ttl_attribute == table["TimeToLiveSpecification"]["AttributeName"]
    assert decl.table_point_in_time_recovery is True
    stream = r.properties("ArchiveStream")["ExtendedS3DestinationConfiguration"]
    for key, value in decl.stream["ExtendedS3DestinationConfiguration"].items():
        assert stream[key] == value, key
    assert decl.role_name == r.ref("FirehoseRole")
    assert sorted(decl.bucket_lifecycles) == sorted(decl.buckets)
    assert decl.metrics_job_arguments == r.properties("MetricsJob")["DefaultArguments"]


def test_overridden_settings_win_over_template_names() -> None:
    settings = Settings.from_env(
        {"BROKER_TABLE": "t1", "BROKER_ARCHIVE_BUCKET": "a1", "BROKER_DELIVERY_FUNCTION": "d1"}
    )
    decl = local_declarations(settings)
    assert decl.table["TableName"] == "t1"
    assert decl.buckets[0] == "a1"
    assert decl.stream["ExtendedS3DestinationConfiguration"]["BucketARN"] == "arn:aws:s3:::a1"
    assert decl.stream["DeliveryStreamName"] == settings.archive_stream  # not renamed with it
    assert decl.functions[0] == "d1"
    assert decl.bucket_lifecycles["a1"]["Rules"][0]["ID"] == "archive-tiering"


def test_local_chalice_stage_is_the_local_declarations(chalice_config: dict[str, Any]) -> None:
    env = _stage_env(chalice_config, "local")
    decl = local_declarations(Settings())
    assert {k: env[k] for k in decl.environment} == decl.environment
    assert Settings.from_env(env) == Settings()  # the rest are Settings' defaults, spelled out


def test_prod_chalice_stage_agrees_with_the_template(
    chalice_config: dict[str, Any], template: dict[str, Any], resolver: Resolver
) -> None:
    env = _stage_env(chalice_config, STAGE)
    declared = _template_env(template, resolver)
    outputs = template["Outputs"]
    for var, output in _meta(template)["Environment"].items():
        if var in env:
            assert env[var] == declared[var], var
        else:
            # Account-specific: imported by the pipeline package, set by infra.deploy.
            assert "Export" in outputs[output], f"{var} is neither in config.json nor exported"
    assert {v for v in _meta(template)["Environment"] if v not in env} == {
        "BROKER_ARCHIVE_BUCKET",
        "BROKER_CLAIM_BUCKET",
        "BROKER_METRICS_LOCATION",
    }
    settings = Settings.from_env({**env, **declared})
    assert settings.local_mode is False
    assert settings.stage == STAGE


def _chalice_function_names(stage: str) -> dict[str, str]:
    """Function -> Lambda name, as Chalice's own deployer computes them (in a subprocess: it
    imports app.py with the stage's environment)."""
    script = (
        "import json, sys\n"
        "from chalice.cli.factory import CLIFactory\n"
        "from chalice.deploy import models\n"
        "from chalice.deploy.appgraph import ApplicationGraphBuilder, DependencyBuilder\n"
        "factory = CLIFactory(project_dir=sys.argv[1])\n"
        "config = factory.create_config_obj(chalice_stage_name=sys.argv[2])\n"
        "graph = ApplicationGraphBuilder().build(config, sys.argv[2])\n"
        "deps = DependencyBuilder().build_dependencies(graph)\n"
        "print(json.dumps({r.resource_name: r.function_name for r in deps\n"
        "                  if isinstance(r, models.LambdaFunction)}))\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("BROKER_")}
    env["AWS_DEFAULT_REGION"] = REGION
    out = subprocess.run(
        [sys.executable, "-c", script, str(REPO), stage],
        env=env,
        check=True,
        capture_output=True,
        text=True,
        timeout=120,
    )
    names: dict[str, str] = json.loads(out.stdout)
    return names


def test_deployed_function_names_are_the_ones_the_stack_prepares_for(
    chalice_config: dict[str, Any], template: dict[str, Any], resolver: Resolver
) -> None:
    names = _chalice_function_names(STAGE)
    functions = _meta(template)["Functions"]
    assert sorted(names) == sorted(functions)
    for fn, name in names.items():
        assert chalice_project.function_name(chalice_config, STAGE, fn) == name
    log_groups = {
        resolver.properties(k)["LogGroupName"]
        for k, v in template["Resources"].items()
        if v["Type"] == "AWS::Logs::LogGroup" and "/aws/lambda/" in str(v["Properties"])
    }
    assert log_groups == {f"/aws/lambda/{name}" for name in names.values()}
    env = _template_env(template, resolver)
    assert env["BROKER_DELIVERY_FUNCTION"] == names["delivery"]
    assert env["BROKER_DEAD_LETTER_FUNCTION"] == names["dead_letter"]
    assert env["BROKER_KAFKA_FUNCTION"] == names["kafka_ingress"]
    body = resolver.properties("Dashboard")["DashboardBody"]
    assert all(f'"{name}"' in body for name in names.values())


def test_configured_functions_are_the_declared_ones(
    chalice_config: dict[str, Any], template: dict[str, Any]
) -> None:
    functions = _meta(template)["Functions"]
    assert list(chalice_config["stages"][STAGE]["lambda_functions"]) == functions
    assert set(_meta(template)["MappingTargets"]) <= set(functions)


def test_trigger_queue_settings_match_the_control_plane(
    chalice_config: dict[str, Any], template: dict[str, Any]
) -> None:
    queues = _meta(template)["TriggerQueues"]
    functions = chalice_config["stages"][STAGE]["lambda_functions"]
    settings = Settings.from_env(_stage_env(chalice_config, STAGE))
    timeout = settings.delivery_function_timeout_seconds
    assert timeout == queues["DeliveryFunctionTimeout"]
    # the provisioner sizes visibility on one timeout: the longer of the two SQS consumers'
    assert (
        max(functions["delivery"]["lambda_timeout"], functions["dead_letter"]["lambda_timeout"])
        == timeout
    )
    config = reconcile.ProvisioningConfig(
        prefix=settings.queue_prefix,
        delivery_function=settings.delivery_function,
        dead_letter_function=settings.dead_letter_function,
        function_timeout_s=timeout,
    )
    attributes = reconcile.queue_attributes(config)
    assert attributes == queues["Queue"] == queues["DeadLetterQueue"]
    assert int(attributes["VisibilityTimeout"]) >= 6 * timeout
    assert queues["Redrive"]["CrashReceiveMargin"] == CRASH_RECEIVE_MARGIN
    assert reconcile.max_receive_count(10) == 10 + 1 + queues["Redrive"]["CrashReceiveMargin"]
    assert config.batch_size == queues["Mapping"]["BatchSize"]
    assert queues["Mapping"]["FunctionResponseTypes"] == [reconcile.REPORT_BATCH_ITEM_FAILURES]
    # Claims must outlive every queued message.
    claim_days = int(Resolver(template).parameters["ClaimRetentionDays"])
    assert claim_days * 86400 >= int(attributes["MessageRetentionPeriod"])


def test_policies_name_the_stack_and_the_queue_prefix(
    policy_files: dict[str, Any], resolver: Resolver, template: dict[str, Any]
) -> None:
    exports = set(resolver.exports())
    text = json.dumps(policy_files)
    imported = set(re.findall(r'"Fn::ImportValue": "([^"]+)"', text))
    assert imported and imported <= exports
    prefix = _template_env(template, resolver)["BROKER_QUEUE_PREFIX"]
    resolved = json.dumps(resolver.resolve(policy_files))
    assert f":sqs:{REGION}:{ACCOUNT}:{prefix}*" in resolved


def test_metrics_job_reads_the_archive_firehose_writes(resolver: Resolver) -> None:
    args = resolver.properties("MetricsJob")["DefaultArguments"]
    stream = resolver.properties("ArchiveStream")["ExtendedS3DestinationConfiguration"]
    archive_root = stream["Prefix"].split("!{", 1)[0]
    assert args["--archive"] == f"s3://{resolver.ref('ArchiveBucket')}/{archive_root}"
    assert args["--out"].startswith(f"s3://{resolver.ref('MetricsBucket')}/")
    assert args["--runtime"] == "glue"
    assert stream["Prefix"] == "archive/!{timestamp:yyyy/MM/dd/HH}/"  # design.md §3 keys


@pytest.mark.parametrize("path", sorted((REPO / ".chalice").glob("policy-*.json")))
def test_every_policy_file_is_used_by_a_stage(path: Path, chalice_config: dict[str, Any]) -> None:
    used = {
        spec.get("iam_policy_file")
        for stage in chalice_config["stages"].values()
        for spec in stage.get("lambda_functions", {}).values()
    }
    assert path.name in used


def test_registry_may_read_what_the_metrics_job_writes(
    policy_files: dict[str, dict[str, Any]], resolver: Resolver
) -> None:
    from chalicelib.services.event_types import METRICS_FILE

    location = str(resolver.outputs()["MetricsLocation"])
    bucket, _, prefix = location.removeprefix("s3://").partition("/")
    key = f"{prefix.rstrip('/')}/{METRICS_FILE}"
    statements = resolver.resolve(policy_files["api_handler"])["Statement"]
    by_sid = {st["Sid"]: st for st in statements}
    assert by_sid["RegistryEventTypes"]["Resource"] == f"arn:aws:s3:::{bucket}/{key}"
    # ListBucket on that one key makes a missing file a 404, not a 403, before the first run.
    listing = by_sid["RegistryEventTypesMissing"]
    assert listing["Condition"] == {"StringEquals": {"s3:prefix": key}}


@pytest.mark.parametrize("function", ["delivery", "kafka_ingress"])
def test_functions_that_ingest_may_write_only_the_event_type_sample(
    policy_files: dict[str, dict[str, Any]], function: str
) -> None:
    """Replies (delivery) and Kafka records (kafka_ingress) go through the ingress, which
    records the event types it sees; those functions may write that item and no other."""
    from chalicelib.services.event_types import SAMPLE_KIND

    writes = [
        st
        for st in policy_files[function]["Statement"]
        if any(a in st["Action"] for a in ("dynamodb:PutItem", "dynamodb:UpdateItem"))
        and st["Sid"] != "Dedup"  # test_functions_that_ingest_may_claim_dedup_keys
        and st["Sid"] != "RateBuckets"  # test_delivery_may_write_only_rate_buckets_besides
    ]
    assert [st["Action"] for st in writes] == [["dynamodb:PutItem"]]
    leading = writes[0]["Condition"]["ForAllValues:StringLike"]["dynamodb:LeadingKeys"]
    assert leading == [f"{SAMPLE_KIND}#*"]


def test_replays_wait_longer_than_the_archive_buffers(
    chalice_config: dict[str, Any], template: dict[str, Any]
) -> None:
    """A replay starts BROKER_REPLAY_SETTLE_SECONDS after its range ends, when Firehose has
    written every record of it (docs/replay.md): longer than the buffer interval, deployed and
    locally (where the archive is batched for BROKER_ARCHIVE_BATCH_SECONDS=1)."""
    buffer = int(template["Parameters"]["ArchiveBufferSeconds"]["Default"])
    deployed = Settings.from_env(_stage_env(chalice_config, STAGE))
    assert deployed.replay_settle_seconds > buffer
    local = Settings.from_env({"BROKER_STAGE": "local", "BROKER_LOCAL_MODE": "true"})
    assert local.replay_settle_seconds > 1


@pytest.mark.parametrize("function", ["api_handler", "delivery", "kafka_ingress"])
def test_functions_that_ingest_may_claim_dedup_keys(
    policy_files: dict[str, dict[str, Any]], template: dict[str, Any], function: str
) -> None:
    """Every function that ingests (HTTP, replies, Kafka records) claims (source, id) keys of
    brokers with a dedup window (docs/dedup.md): conditional puts, alone or in a transaction (IAM
    checks PutItem for each), and batched deletes to release them; those items and no others.
    Their expiry is the table's TTL attribute, so DynamoDB removes them after the window."""
    from chalicelib.adapters.dynamodb_seen import KEY_PREFIX, TTL_ATTRIBUTE

    by_sid = {st["Sid"]: st for st in policy_files[function]["Statement"]}
    dedup = by_sid["Dedup"]
    assert dedup["Action"] == ["dynamodb:BatchWriteItem", "dynamodb:PutItem"]
    assert dedup["Resource"] == {"Fn::ImportValue": "serverless-broker-prod-TableArn"}
    leading = dedup["Condition"]["ForAllValues:StringLike"]["dynamodb:LeadingKeys"]
    assert leading == [f"{KEY_PREFIX}*"]
    ttl = template["Resources"]["Table"]["Properties"]["TimeToLiveSpecification"]
    assert ttl == {"AttributeName": TTL_ATTRIBUTE, "Enabled": True}


def test_delivery_may_write_only_rate_buckets_besides(
    policy_files: dict[str, dict[str, Any]],
) -> None:
    """The delivery function takes tokens of rate-limited triggers' buckets (docs/flow-control.md):
    a read (the table-wide GetItem) and a conditional PutItem on ``rate#`` items, and no others;
    the dead-letter function, which no rate applies to, none."""
    from chalicelib.adapters.dynamodb_rate import KEY_PREFIX

    by_sid = {st["Sid"]: st for st in policy_files["delivery"]["Statement"]}
    rate = by_sid["RateBuckets"]
    assert rate["Action"] == ["dynamodb:PutItem"]
    assert rate["Resource"] == {"Fn::ImportValue": "serverless-broker-prod-TableArn"}
    leading = rate["Condition"]["ForAllValues:StringLike"]["dynamodb:LeadingKeys"]
    assert leading == [f"{KEY_PREFIX}*"]
    assert "dynamodb:GetItem" in by_sid["Table"]["Action"]
    dead_letter = {st["Sid"] for st in policy_files["dead_letter"]["Statement"]}
    assert "RateBuckets" not in dead_letter
