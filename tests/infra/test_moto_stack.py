"""The template deployed to an embedded moto server, through infra/stack.py as a deploy does.

moto's CloudFormation models only some resource types and ignores some properties of the types
it models. The stack is deployed with the rest cut out (references to them replaced by the
values the resolver computes); the cut resources, and the ignored properties, are then applied
through their own APIs with the template's resolved properties, so botocore still validates
their shapes and moto stores them. Then everything is read back and compared with the template.
"""

from __future__ import annotations

import json
import zipfile
from collections.abc import Callable, Iterator
from io import BytesIO
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from moto.cloudformation.parsing import get_model_map
from moto.server import ThreadedMotoServer

from infra import chalice_project, deploy, stack
from infra.cfn import Resolver
from infra.declarations import lifecycle_configuration
from tests.infra.conftest import ACCOUNT, REGION, prod_resolver

pytestmark = pytest.mark.slow

PARAMETERS = {"Stage": "prod", "AlarmEmail": "ops@example.com", "GlueWorkers": "4"}
# Resource types moto's CloudFormation does not model: applied by API below. A new type in the
# template fails the test until it is handled here.
API_APPLIED = {
    "AWS::S3::BucketPolicy",
    "AWS::Logs::LogStream",
    "AWS::KinesisFirehose::DeliveryStream",
    "AWS::Glue::Job",
    "AWS::Glue::Trigger",
    "AWS::SNS::TopicPolicy",
    "AWS::SNS::Subscription",
    "AWS::CloudWatch::Alarm",
}


@pytest.fixture(scope="module")
def endpoint() -> Iterator[str]:
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    yield f"http://{host}:{port}"
    server.stop()


@pytest.fixture(scope="module")
def session(endpoint: str) -> Iterator[Any]:
    mp = pytest.MonkeyPatch()
    mp.setenv("AWS_ENDPOINT_URL", endpoint)
    mp.setenv("AWS_ACCESS_KEY_ID", "testing")
    mp.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    yield boto3.Session(region_name=REGION)
    mp.undo()


def moto_parts(template: dict[str, Any], r: Resolver) -> tuple[dict[str, Any], list[str]]:
    """The template moto's CloudFormation can take, and the logical ids left for the APIs."""
    modelled = set(get_model_map())
    cut = [k for k, v in template["Resources"].items() if v["Type"] not in modelled]

    def literal(node: Any) -> Any:
        if isinstance(node, list):
            return [literal(x) for x in node]
        if not isinstance(node, dict):
            return node
        if len(node) == 1:
            ((key, arg),) = node.items()
            text = json.dumps(arg)
            if (key == "Ref" and arg in cut) or (key == "Fn::GetAtt" and arg[0] in cut):
                return r.resolve(node)
            if key == "Fn::Sub" and any(f"${{{c}" in text or f'"{c}"' in text for c in cut):
                return r.resolve(node)
        return {k: literal(v) for k, v in node.items()}

    body = {k: v for k, v in template.items() if k not in {"Resources", "Outputs"}}
    body["Resources"] = {k: literal(v) for k, v in template["Resources"].items() if k not in cut}
    body["Outputs"] = literal(template["Outputs"])
    return body, cut


def apply_by_api(session: Any, template: dict[str, Any], r: Resolver, cut: list[str]) -> None:
    client = session.client
    appliers: dict[str, Callable[[dict[str, Any]], Any]] = {
        "AWS::S3::BucketPolicy": lambda p: client("s3").put_bucket_policy(
            Bucket=p["Bucket"], Policy=json.dumps(p["PolicyDocument"])
        ),
        "AWS::Logs::LogStream": lambda p: client("logs").create_log_stream(
            logGroupName=p["LogGroupName"], logStreamName=p["LogStreamName"]
        ),
        "AWS::KinesisFirehose::DeliveryStream": lambda p: client("firehose").create_delivery_stream(
            **p
        ),
        "AWS::Glue::Job": lambda p: client("glue").create_job(**p),
        "AWS::Glue::Trigger": lambda p: client("glue").create_trigger(**p),
        "AWS::SNS::TopicPolicy": lambda p: [
            client("sns").set_topic_attributes(
                TopicArn=t, AttributeName="Policy", AttributeValue=json.dumps(p["PolicyDocument"])
            )
            for t in p["Topics"]
        ],
        "AWS::SNS::Subscription": lambda p: client("sns").subscribe(**p),
        "AWS::CloudWatch::Alarm": lambda p: client("cloudwatch").put_metric_alarm(**p),
    }
    assert {template["Resources"][k]["Type"] for k in cut} == API_APPLIED
    for logical_id in cut:
        resource = template["Resources"][logical_id]
        if "Condition" in resource and not r.condition(resource["Condition"]):
            continue
        appliers[resource["Type"]](r.properties(logical_id))
    # Properties moto's CloudFormation accepts but does not apply.
    table = r.properties("Table")
    ddb = client("dynamodb")
    ddb.update_time_to_live(
        TableName=table["TableName"], TimeToLiveSpecification=table["TimeToLiveSpecification"]
    )
    ddb.update_continuous_backups(
        TableName=table["TableName"],
        PointInTimeRecoverySpecification=table["PointInTimeRecoverySpecification"],
    )
    s3 = client("s3")
    for logical_id in ("ArchiveBucket", "ClaimBucket", "MetricsBucket"):
        bucket = r.properties(logical_id)
        name = bucket["BucketName"]
        s3.put_public_access_block(
            Bucket=name, PublicAccessBlockConfiguration=bucket["PublicAccessBlockConfiguration"]
        )
        s3.put_bucket_ownership_controls(Bucket=name, OwnershipControls=bucket["OwnershipControls"])
        s3.put_bucket_lifecycle_configuration(
            Bucket=name,
            LifecycleConfiguration=lifecycle_configuration(bucket["LifecycleConfiguration"]),
        )


@pytest.fixture(scope="module")
def r(template: dict[str, Any]) -> Resolver:
    return prod_resolver(template, **{k: v for k, v in PARAMETERS.items() if k != "Stage"})


@pytest.fixture(scope="module")
def moto_template(template: dict[str, Any], r: Resolver) -> tuple[str, list[str]]:
    body, cut = moto_parts(template, r)
    return json.dumps(body), cut


@pytest.fixture(scope="module")
def deployed(
    session: Any, template: dict[str, Any], r: Resolver, moto_template: tuple[str, list[str]]
) -> dict[str, str]:
    body, cut = moto_template
    lines: list[str] = []
    status = stack.deploy(
        session.client("cloudformation"),
        "serverless-broker-prod",
        body,
        PARAMETERS,
        tags={"app": "serverless-broker"},
        say=lines.append,
        poll_seconds=0.05,
    )
    assert status == "CREATE_COMPLETE"
    # moto records stack-level events only; AWS adds one per resource.
    assert any("CREATE_COMPLETE" in line and "serverless-broker-prod" in line for line in lines)
    apply_by_api(session, template, r, cut)
    return stack.outputs(session.client("cloudformation"), "serverless-broker-prod")


def test_outputs_and_exports_are_what_the_resolver_computes(
    deployed: dict[str, str], session: Any, r: Resolver
) -> None:
    assert deployed == {k: str(v) for k, v in r.outputs().items()}
    cfn = session.client("cloudformation")
    assert stack.exports(cfn, "serverless-broker-prod") == r.exports()
    assert deployed["ArchiveBucketName"] == f"serverless-broker-prod-archive-{ACCOUNT}-{REGION}"


def test_table(deployed: dict[str, str], session: Any, r: Resolver) -> None:
    ddb = session.client("dynamodb")
    declared = r.properties("Table")
    table = ddb.describe_table(TableName=deployed["TableName"])["Table"]
    assert table["KeySchema"] == declared["KeySchema"]
    assert table["AttributeDefinitions"] == declared["AttributeDefinitions"]
    assert table["BillingModeSummary"]["BillingMode"] == "PAY_PER_REQUEST"
    ttl = ddb.describe_time_to_live(TableName=deployed["TableName"])["TimeToLiveDescription"]
    assert ttl == {"TimeToLiveStatus": "ENABLED", "AttributeName": "expires_at"}
    backups = ddb.describe_continuous_backups(TableName=deployed["TableName"])
    pitr = backups["ContinuousBackupsDescription"]["PointInTimeRecoveryDescription"]
    assert pitr["PointInTimeRecoveryStatus"] == "ENABLED"


@pytest.mark.parametrize("output", ["ArchiveBucketName", "ClaimBucketName", "MetricsBucketName"])
def test_buckets(deployed: dict[str, str], session: Any, output: str) -> None:
    s3 = session.client("s3")
    bucket = deployed[output]
    rules = s3.get_bucket_encryption(Bucket=bucket)["ServerSideEncryptionConfiguration"]["Rules"]
    assert rules[0]["ApplyServerSideEncryptionByDefault"]["SSEAlgorithm"] == "AES256"
    block = s3.get_public_access_block(Bucket=bucket)["PublicAccessBlockConfiguration"]
    assert all(block.values()) and len(block) == 4
    policy = json.loads(s3.get_bucket_policy(Bucket=bucket)["Policy"])
    assert policy["Statement"][0]["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
    lifecycle = s3.get_bucket_lifecycle_configuration(Bucket=bucket)["Rules"]
    assert any("AbortIncompleteMultipartUpload" in rule for rule in lifecycle)


def test_archive_tiering_and_claim_expiry(deployed: dict[str, str], session: Any) -> None:
    s3 = session.client("s3")
    archive = s3.get_bucket_lifecycle_configuration(Bucket=deployed["ArchiveBucketName"])
    tiering = next(rule for rule in archive["Rules"] if rule["ID"] == "archive-tiering")
    assert [(t["Days"], t["StorageClass"]) for t in tiering["Transitions"]] == [
        (30, "STANDARD_IA"),
        (180, "GLACIER_IR"),
    ]
    claims = s3.get_bucket_lifecycle_configuration(Bucket=deployed["ClaimBucketName"])
    expiry = next(rule for rule in claims["Rules"] if rule["ID"] == "claims-expiry")
    assert expiry["Filter"]["Prefix"] == deployed["ClaimPrefix"]
    assert expiry["Expiration"]["Days"] == 14


def test_archive_stream(deployed: dict[str, str], session: Any) -> None:
    description = session.client("firehose").describe_delivery_stream(
        DeliveryStreamName=deployed["ArchiveStreamName"]
    )["DeliveryStreamDescription"]
    assert description["DeliveryStreamARN"] == deployed["ArchiveStreamArn"]
    (destination,) = description["Destinations"]
    s3 = destination["ExtendedS3DestinationDescription"]
    assert s3["BucketARN"] == deployed["ArchiveBucketArn"]
    assert s3["Prefix"] == "archive/!{timestamp:yyyy/MM/dd/HH}/"
    assert s3["CompressionFormat"] == "GZIP"
    assert s3["BufferingHints"] == {"SizeInMBs": 64, "IntervalInSeconds": 300}
    role = s3["RoleARN"].rsplit("/", 1)[-1]
    iam = session.client("iam")
    assert iam.list_role_policies(RoleName=role)["PolicyNames"] == ["archive-delivery"]


def test_metrics_job_and_schedule(deployed: dict[str, str], session: Any) -> None:
    glue = session.client("glue")
    job = glue.get_job(JobName=deployed["GlueJobName"])["Job"]
    assert (job["GlueVersion"], job["WorkerType"], job["NumberOfWorkers"]) == ("5.0", "G.1X", 4)
    assert job["Command"]["ScriptLocation"] == deployed["GlueScriptLocation"]
    args = job["DefaultArguments"]
    assert args["--runtime"] == "glue"
    assert args["--archive"] == f"s3://{deployed['ArchiveBucketName']}/archive/"
    assert args["--out"] == f"s3://{deployed['MetricsBucketName']}/metrics/"
    assert args["--extra-py-files"] == deployed["GlueExtraPyFiles"]
    assert args["--job-bookmark-option"] == "job-bookmark-enable"
    role = job["Role"].rsplit("/", 1)[-1]
    assert session.client("iam").list_role_policies(RoleName=role)["PolicyNames"] == ["metrics-job"]
    trigger = glue.get_trigger(Name="serverless-broker-prod-metrics-hourly")["Trigger"]
    assert trigger["Type"] == "SCHEDULED"
    assert trigger["Schedule"] == "cron(15 * * * ? *)"
    assert trigger["Actions"] == [{"JobName": deployed["GlueJobName"]}]


def test_log_groups_have_retention(deployed: dict[str, str], session: Any) -> None:
    groups = {
        g["logGroupName"]: g.get("retentionInDays")
        for g in session.client("logs").describe_log_groups()["logGroups"]
    }
    for fn in ("", "-delivery", "-dead_letter", "-reconciler", "-kafka_ingress", "-replayer"):
        assert groups[f"/aws/lambda/serverless-broker-prod{fn}"] == 30


def test_alarms_dashboard_and_notifications(deployed: dict[str, str], session: Any) -> None:
    cw = session.client("cloudwatch")
    alarms = {a["AlarmName"]: a for a in cw.describe_alarms()["MetricAlarms"]}
    names = {f"serverless-broker-prod-{n}" for n in ("dead-lettered", "delivery-errors")}
    names |= {f"serverless-broker-prod-{n}" for n in ("ingress-5xx", "archive-stale")}
    names |= {"serverless-broker-prod-metrics-job-failed"}
    assert names <= set(alarms)
    for alarm in alarms.values():
        assert alarm["AlarmActions"] == [deployed["AlarmTopicArn"]]
    query = alarms["serverless-broker-prod-dead-lettered"]["Metrics"][0]["Expression"]
    assert query.startswith('SELECT SUM(dead_letter_count) FROM "ServerlessBroker"')
    body = json.loads(cw.get_dashboard(DashboardName=deployed["DashboardName"])["DashboardBody"])
    alarm_widget = next(w for w in body["widgets"] if w["type"] == "alarm")
    assert len(alarm_widget["properties"]["alarms"]) == len(names)
    events = session.client("events")
    rule = events.describe_rule(Name="serverless-broker-prod-metrics-job-failed")
    assert json.loads(rule["EventPattern"])["detail"]["jobName"] == [deployed["GlueJobName"]]
    targets = events.list_targets_by_rule(Rule=rule["Name"])["Targets"]
    assert [t["Arn"] for t in targets] == [deployed["AlarmTopicArn"]]
    sns = session.client("sns")
    subs = sns.list_subscriptions_by_topic(TopicArn=deployed["AlarmTopicArn"])["Subscriptions"]
    assert [(s["Protocol"], s["Endpoint"]) for s in subs] == [("email", "ops@example.com")]


def test_update_keeps_previous_parameters(
    deployed: dict[str, str], session: Any, moto_template: tuple[str, list[str]]
) -> None:
    cfn = session.client("cloudformation")
    text = moto_template[0]
    lines: list[str] = []
    given = {"Stage": "prod", "LogRetentionDays": "14"}
    status = stack.deploy(
        cfn, "serverless-broker-prod", text, given, say=lines.append, poll_seconds=0.05
    )
    assert status == "UPDATE_COMPLETE"
    described = stack.describe(cfn, "serverless-broker-prod")
    assert described is not None
    params = {p["ParameterKey"]: p["ParameterValue"] for p in described["Parameters"]}
    assert params["LogRetentionDays"] == "14"
    assert (params["GlueWorkers"], params["AlarmEmail"]) == ("4", "ops@example.com")


def test_a_repeated_deploy_is_a_no_op(session: Any) -> None:
    # moto compares Number parameters typed with strings, so the no-op path needs a template
    # with String parameters only to be seen.
    body = json.dumps(
        {
            "Parameters": {"Stage": {"Type": "String"}},
            "Resources": {"Queue": {"Type": "AWS::SQS::Queue"}},
        }
    )
    cfn = session.client("cloudformation")
    lines: list[str] = []
    for _ in range(2):
        status = stack.deploy(cfn, "no-op", body, {"Stage": "x"}, say=lines.append, poll_seconds=0)
    assert (status, lines[-1]) == ("CREATE_COMPLETE", "stack no-op is up to date")


def test_deploy_project_gets_the_stack_outputs_and_resolved_policies(
    deployed: dict[str, str], session: Any, template: dict[str, Any], tmp_path: Path
) -> None:
    cfn = session.client("cloudformation")
    resolver = Resolver(
        template,
        {"Stage": "prod"},
        account_id=ACCOUNT,
        region=REGION,
        imports=stack.exports(cfn, "serverless-broker-prod"),
    )
    env = chalice_project.stage_environment(template, deployed)
    layer = "arn:aws:lambda:us-east-1:123456789012:layer:serverless-broker-prod-archive-spool:1"
    project = chalice_project.prepare(tmp_path / "project", "prod", env, resolver, layers=[layer])
    config = json.loads((project / ".chalice" / "config.json").read_text())
    assert config["stages"]["prod"]["layers"] == [layer]  # the spool extension (spool_layer.py)
    stage_env = config["stages"]["prod"]["environment_variables"]
    assert stage_env["BROKER_CLAIM_BUCKET"] == deployed["ClaimBucketName"]
    assert stage_env["BROKER_TABLE"] == deployed["TableName"]
    assert (project / "app.py").is_file() and (project / "chalicelib" / "config.py").is_file()
    policy = json.loads((project / ".chalice" / "policy-prod-delivery.json").read_text())
    resources = json.dumps([st["Resource"] for st in policy["Statement"]])
    assert deployed["TableArn"] in resources and deployed["ArchiveStreamArn"] in resources
    assert f"{deployed['ClaimBucketArn']}/claims/*" in resources


def test_buckets_refuse_plain_http(deployed: dict[str, str], session: Any) -> None:
    """moto evaluates bucket policies: the DenyInsecureTransport statement bites over http://."""
    s3 = session.client("s3")
    for output in ("ArchiveBucketName", "ClaimBucketName", "MetricsBucketName"):
        with pytest.raises(ClientError, match=r"Forbidden|AccessDenied"):
            s3.put_object(Bucket=deployed[output], Key="claims/x", Body=b"x")


def test_upload_glue(deployed: dict[str, str], session: Any, tmp_path: Path) -> None:
    # The metrics bucket refuses this test's plain-HTTP endpoint; a policy-free stand-in.
    s3 = session.client("s3")
    s3.create_bucket(Bucket="glue-upload-test")
    outputs = {**deployed, "MetricsBucketName": "glue-upload-test"}
    source = tmp_path / "spark_glue"
    source.mkdir()
    (source / "__init__.py").write_text("")
    (source / "__main__.py").write_text("from spark_glue import job\n")
    (source / "job.py").write_text("from spark_glue import transforms\n")
    (source / "transforms.py").write_text("X = 1\n")
    deploy.upload_glue(s3, outputs, source)
    bucket = outputs["MetricsBucketName"]
    script = s3.get_object(Bucket=bucket, Key="glue/job.py")["Body"].read()
    assert script == b"from spark_glue import job\n"
    archive = s3.get_object(Bucket=bucket, Key="glue/spark_glue.zip")["Body"].read()
    with zipfile.ZipFile(BytesIO(archive)) as zf:
        assert sorted(zf.namelist()) == [
            "spark_glue/__init__.py",
            "spark_glue/__main__.py",
            "spark_glue/job.py",
            "spark_glue/transforms.py",
        ]


def test_destroy_removes_run_time_queues_and_the_stack(
    session: Any, template: dict[str, Any]
) -> None:
    """A separate stage, so the other tests' stack stays."""
    qa = prod_resolver(template, Stage="qa")
    body, _ = moto_parts(template, qa)
    cfn = session.client("cloudformation")
    stack.deploy(cfn, "serverless-broker-qa", json.dumps(body), {"Stage": "qa"}, say=lambda _: None)
    outputs = stack.outputs(cfn, "serverless-broker-qa")
    sqs = session.client("sqs")
    owned = ["sb-qa-orders-0123456789abcdef", "sb-qa-orders-0123456789abcdef-dlq"]
    for name in [*owned, "sb-qaz-other-0123456789abcdef", "unrelated"]:
        sqs.create_queue(QueueName=name)
    s3 = session.client("s3")
    s3.put_object(Bucket=outputs["ClaimBucketName"], Key="claims/e1", Body=b"x")
    deploy.destroy(session, "qa")
    left = [u.rsplit("/", 1)[-1] for u in sqs.list_queues().get("QueueUrls", [])]
    assert not set(owned) & set(left)
    assert {"sb-qaz-other-0123456789abcdef", "unrelated"} <= set(left)
    assert stack.describe(cfn, "serverless-broker-qa") is None


def test_deployed_api_answers_unknown_paths_with_a_404_problem(session: Any) -> None:
    from infra import gateway_responses

    apigw = session.client("apigateway")
    api = apigw.create_rest_api(name="gateway-responses")["id"]
    root = apigw.get_resources(restApiId=api)["items"][0]["id"]
    # API Gateway deploys no API without a method (Chalice's always has its routes).
    apigw.put_method(restApiId=api, resourceId=root, httpMethod="GET", authorizationType="NONE")
    apigw.put_integration(restApiId=api, resourceId=root, httpMethod="GET", type="MOCK")
    gateway_responses.put_on(apigw, api, "api")
    response = apigw.get_gateway_response(
        restApiId=api, responseType="MISSING_AUTHENTICATION_TOKEN"
    )
    assert response["statusCode"] == "404"
    assert response["responseParameters"] == {
        "gatewayresponse.header.Content-Type": "'application/problem+json'"
    }
    problem = json.loads(response["responseTemplates"]["application/json"])
    assert (problem["status"], problem["title"]) == (404, "No such route")
    assert "POST /{namespace}/{broker}" in problem["detail"]
    assert [s["stageName"] for s in apigw.get_stages(restApiId=api)["item"]] == ["api"]


def moto_leftovers(session: Any, template: dict[str, Any], r: Resolver) -> list[str]:
    """Deletes what moto's stack deletion leaves and AWS's deletes (DeletionPolicy: Delete): the
    log groups, the claim bucket and a role it skips (the scheduler role). Returns their names."""
    logs, s3, iam = session.client("logs"), session.client("s3"), session.client("iam")
    left = []
    for logical_id, resource in template["Resources"].items():
        if resource.get("DeletionPolicy") == "Retain":
            continue
        if resource["Type"] == "AWS::Logs::LogGroup":
            group = r.ref(logical_id)
            if logs.describe_log_groups(logGroupNamePrefix=group)["logGroups"]:
                logs.delete_log_group(logGroupName=group)
                left.append(group)
        elif resource["Type"] == "AWS::S3::Bucket":
            bucket = r.ref(logical_id)
            if bucket in {b["Name"] for b in s3.list_buckets()["Buckets"]}:
                s3.delete_bucket(Bucket=bucket)
                left.append(bucket)
        elif resource["Type"] == "AWS::IAM::Role":
            role = r.ref(logical_id)
            if role in {x["RoleName"] for x in iam.list_roles()["Roles"]}:
                for policy in iam.list_role_policies(RoleName=role)["PolicyNames"]:
                    iam.delete_role_policy(RoleName=role, PolicyName=policy)
                iam.delete_role(RoleName=role)
                left.append(role)
    return left


def test_a_destroyed_stage_deploys_again_on_the_table_and_buckets_it_kept(
    session: Any, template: dict[str, Any]
) -> None:
    """deploy -> destroy -> deploy: the second stack adopts what the first one retained, the
    data is still there and the outputs name the same table and buckets. A stage of its own."""
    stage, name = "again", deploy.stack_name("again")
    cfn, ddb, s3 = (session.client(s) for s in ("cloudformation", "dynamodb", "s3"))
    lines: list[str] = []

    def deploy_stack() -> tuple[dict[str, str], Resolver]:
        # What infra.deploy.deploy does before `chalice deploy`, with moto's cut of the template.
        params = {"Stage": stage}
        params |= deploy.retained(session, template, stage, params, ACCOUNT, say=lines.append)
        r = prod_resolver(template, **params)
        body, _ = moto_parts(template, r)
        stack.deploy(cfn, name, json.dumps(body), params, say=lines.append, poll_seconds=0.05)
        return stack.outputs(cfn, name), r

    first, first_r = deploy_stack()
    assert not [line for line in lines if line.startswith("adopting")]
    ttl = first_r.properties("Table")["TimeToLiveSpecification"]  # moto's stack ignores it
    ddb.update_time_to_live(TableName=first["TableName"], TimeToLiveSpecification=ttl)
    item = {"pk": {"S": "broker#default/b1"}, "sk": {"S": "spec"}}
    ddb.put_item(TableName=first["TableName"], Item=item)
    s3.put_object(Bucket=first["ArchiveBucketName"], Key="archive/2026/11/26/02/e1", Body=b"e1")
    s3.put_object(Bucket=first["MetricsBucketName"], Key="metrics/summary.json", Body=b"{}")

    deploy.destroy(session, stage)
    assert stack.describe(cfn, name) is None
    moto_leftovers(session, template, first_r)
    lines.clear()
    second, r = deploy_stack()

    assert [line for line in lines if line.startswith(("adopting", "warning"))] == [
        f"adopting table {first['TableName']}, kept by an earlier destroy",
        f"adopting bucket {first['ArchiveBucketName']}, kept by an earlier destroy",
        f"adopting bucket {first['MetricsBucketName']}, kept by an earlier destroy",
    ]
    assert second == first  # same names, ARNs and locations: the functions' settings hold
    described = stack.describe(cfn, name)
    assert described is not None and described["StackStatus"] == "CREATE_COMPLETE"
    managed = {  # moto lists a resource whose condition is false as an empty entry
        res.get("LogicalResourceId")
        for res in cfn.describe_stack_resources(StackName=name)["StackResources"]
    }
    assert not {"Table", "ArchiveBucket", "MetricsBucket"} & managed
    assert {"ClaimBucket", "FirehoseRole", "AlarmTopic"} <= managed
    assert ddb.get_item(TableName=second["TableName"], Key=item)["Item"] == item
    archived = s3.get_object(Bucket=second["ArchiveBucketName"], Key="archive/2026/11/26/02/e1")
    assert archived["Body"].read() == b"e1"
    assert s3.head_object(Bucket=second["MetricsBucketName"], Key="metrics/summary.json")

    # The archive stream the new stack creates writes into the adopted bucket.
    firehose = session.client("firehose")
    firehose.create_delivery_stream(**r.properties("ArchiveStream"))
    firehose.put_record(
        DeliveryStreamName=second["ArchiveStreamName"], Record={"Data": b'{"id": "e2"}\n'}
    )
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket=second["ArchiveBucketName"])["Contents"]]
    assert len(keys) == 2 and all(k.startswith("archive/") for k in keys)

    # Updates keep the Existing... parameters as any other (test_update_keeps_previous_parameters;
    # moto fails to update a stack whose bucket's condition is false). --delete-data still deletes.
    firehose.delete_delivery_stream(DeliveryStreamName=second["ArchiveStreamName"])
    deploy.destroy(session, stage, delete_data=True)
    assert first["TableName"] not in ddb.list_tables()["TableNames"]
    left = {b["Name"] for b in s3.list_buckets()["Buckets"]}
    assert not {first["ArchiveBucketName"], first["MetricsBucketName"]} & left
