"""Deploy a stage to AWS in one command, or remove it, or build the package pipelines deploy.

    python -m infra.deploy --stage prod [--region eu-west-1] [--alarm-email ops@example.com]
    python -m infra.deploy --stage prod --destroy [--delete-data]
    python -m infra.deploy --stage prod --package-only [--out build/package-prod]
    python -m infra.deploy --stage local      # into LocalStack (LOCALSTACK_HOST / AWS_ENDPOINT_URL)

Deploy: the shared stack (infra/template.yaml) is created or updated and followed to completion
(created again after a destroy, it adopts the table and buckets the destroy kept: ``retained``);
its outputs become the stage's environment (build/chalice-<stage>/, see infra/chalice_project.py);
`chalice deploy` runs there; the metrics job's script and spark_glue.zip are uploaded to the
script location; the ingress base URL is printed. Chalice's record of what it deployed is kept in
the metrics bucket (deploy/), so a teammate's next deploy updates the same functions and API.

The ``local`` stage is the one ``make run`` runs in process; deployed, it goes into LocalStack and
only there (local mode opens the control plane, so it never reaches AWS): the endpoint is resolved
by localstack-client (``AWS_ENDPOINT_URL``, else ``LOCALSTACK_HOST``, default localhost:4566) and
must answer as LocalStack. The Glue job is left out (``CreateMetricsJob=false``: Glue is not in
LocalStack's free tier), and the URL printed is LocalStack's form for API Gateway.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

from infra import (
    api_protection,
    chalice_project,
    function_url,
    gateway_responses,
    source_policy,
    spool_layer,
    stack,
    target_policy,
)
from infra.cfn import TEMPLATE_PATH, Resolver, UnresolvableError, load_template

REPO = chalice_project.REPO
APP_NAME = "serverless-broker"
GLUE_PREFIX = "glue/"
STATE_PREFIX = "deploy/"


LOCAL_STAGE = "local"
# The local stage in LocalStack: emulator-friendly archive settings, private bucket names, no Glue.
LOCALSTACK_PARAMETERS = {"CreateMetricsJob": "false"}


def use_localstack() -> str | None:
    """Points this process (boto3 and the chalice it runs) at LocalStack, as localstack-client
    resolves it; a problem, or None. Never lets the local stage fall through to AWS."""
    import urllib.request

    from localstack_client.config import get_service_endpoint

    endpoint = str(get_service_endpoint("cloudformation"))
    try:
        with urllib.request.urlopen(f"{endpoint}/_localstack/health", timeout=5) as answer:
            healthy = answer.status == 200
    except OSError:
        healthy = False
    if not healthy:
        return (
            f"the local stage deploys into LocalStack only, and none answers at {endpoint} "
            "(set LOCALSTACK_HOST or AWS_ENDPOINT_URL; `make run` runs the local stage in process)"
        )
    os.environ["AWS_ENDPOINT_URL"] = endpoint
    for name, value in (("AWS_ACCESS_KEY_ID", "test"), ("AWS_SECRET_ACCESS_KEY", "test")):
        os.environ.setdefault(name, value)
    os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
    print(f"LocalStack at {endpoint}")
    return None


def localstack_api_url(endpoint: str, api_id: str, api_stage: str) -> str:
    """The URL LocalStack gives a REST API: ``http://<id>.execute-api.localhost.localstack.cloud:<port>/<stage>``
    (the name resolves to 127.0.0.1)."""
    from urllib.parse import urlsplit

    parts = urlsplit(endpoint)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    return f"{parts.scheme}://{api_id}.execute-api.localhost.localstack.cloud:{port}/{api_stage}"


def stack_name(stage: str) -> str:
    return f"{APP_NAME}-{stage}"


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.stage == LOCAL_STAGE and not args.package_only:
        problem = use_localstack()
        if problem:
            print(f"error: {problem}", file=sys.stderr)
            return 2
    try:
        if args.package_only:
            package(
                args.stage,
                args.region,
                Path(args.out or REPO / "build" / f"package-{args.stage}"),
                args.public_url,
            )
        elif args.destroy:
            destroy(_session(args), args.stage, delete_data=args.delete_data)
        else:
            deploy(_session(args), args.stage, _parameters(args), args.public_url)
    except (stack.StackError, subprocess.CalledProcessError, KeyError, FileNotFoundError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        if args.stage == LOCAL_STAGE and isinstance(exc, subprocess.CalledProcessError):
            print(
                "note: LocalStack runs Lambda functions in Docker; one started without it (host "
                "mode) creates the shared stack but no function (State: Failed), and so no REST "
                "API (docs/deploy.md: what host mode verifies)",
                file=sys.stderr,
            )
        return 1
    except Exception as exc:
        problem = credentials_problem(exc)
        if problem is None:
            raise
        print(f"error: {problem}", file=sys.stderr)
        return 1
    return 0


# The answers botocore and AWS give for credentials that are missing, expired or not valid.
_CREDENTIAL_ERRORS = (
    "NoCredentialsError",
    "PartialCredentialsError",
    "TokenRetrievalError",
    "SSOTokenLoadError",
    "UnauthorizedSSOTokenError",
    "CredentialRetrievalError",
)
_CREDENTIAL_CODES = (
    "ExpiredToken",
    "ExpiredTokenException",
    "InvalidClientTokenId",
    "UnrecognizedClientException",
    "RequestExpired",
    "SignatureDoesNotMatch",
)


def credentials_problem(exc: BaseException) -> str | None:
    """One line for an error that means "your AWS credentials": missing, expired or invalid."""
    code = str(getattr(exc, "response", {}).get("Error", {}).get("Code", ""))
    if type(exc).__name__ not in _CREDENTIAL_ERRORS and code not in _CREDENTIAL_CODES:
        return None
    what = code or type(exc).__name__
    return (
        f"AWS credentials are missing, expired or not valid ({what}): sign in again "
        "(`aws sso login`, `aws configure`) or choose a profile with --profile / AWS_PROFILE"
    )


# ---------------------------------------------------------------------------------------- deploy
def deploy(session: Any, stage: str, parameters: dict[str, str], public_url: str | None) -> str:
    template = load_template()
    config = chalice_project.load_config()
    chalice_project.stage_functions(config, stage)  # fails early on an unknown stage
    region = session.region_name
    account = session.client("sts").get_caller_identity()["Account"]
    print(f"account {account}, region {region}, stage {stage}")

    cfn = session.client("cloudformation")
    name = stack_name(stage)
    if stage == LOCAL_STAGE:
        from infra.declarations import LOCAL_PARAMETERS

        parameters = {**LOCAL_PARAMETERS, **LOCALSTACK_PARAMETERS, **parameters}
    parameters = {**parameters, **retained(session, template, stage, parameters, account)}
    stack.deploy(
        cfn,
        name,
        TEMPLATE_PATH.read_text(encoding="utf-8"),
        {"Stage": stage, **parameters},
        tags={"app": APP_NAME, "stage": stage},
    )
    outputs = stack.outputs(cfn, name)
    resolver = Resolver(
        template,
        {"Stage": stage},
        account_id=account,
        region=region,
        stack_name=name,
        imports=stack.exports(cfn, name),
    )
    project = REPO / "build" / f"chalice-{stage}"
    s3 = session.client("s3")
    state_key = f"{STATE_PREFIX}chalice-{stage}.json"
    _fetch_state(s3, outputs["MetricsBucketName"], state_key, project, stage)
    url = public_url or _deployed_url(project, stage)

    environment = chalice_project.stage_environment(template, outputs)
    # What the Function URL serves (infra/function_url.py): read by the API function.
    environment.update(function_url.FunctionUrl.of_stage(config, stage).environment())
    # The ARNs the stage delivers to (infra/target_policy.py), resolved for this account.
    for variable, value in target_policy.environment(config, stage).items():
        environment[variable] = str(resolver.resolve(value))
    # What IntegrationSources may read (infra/source_policy.py), resolved the same way.
    for variable, value in source_policy.environment(config, stage).items():
        environment[variable] = str(resolver.resolve(value))
    layers = None
    if spool_layer.carrying(config, stage):  # carried archive records' shutdown extension
        name = spool_layer.layer_name(APP_NAME, stage)
        layers = [spool_layer.publish(session.client("lambda"), name)]
    for attempt in (1, 2):
        if url:
            environment["BROKER_PUBLIC_URL"] = url.rstrip("/")
        chalice_project.prepare(project, stage, environment, resolver, layers=layers)
        _chalice(project, region, session.profile_name, "deploy", "--stage", stage)
        _store_state(s3, outputs["MetricsBucketName"], state_key, project, stage)
        deployed = _deployed_url(project, stage)
        if public_url or attempt == 2 or (url or "").rstrip("/") == (deployed or "").rstrip("/"):
            break
        # First deploy: the API's URL exists only now; the functions need it to answer with
        # their own address (status.address.url), so deploy once more with it.
        print(f"setting BROKER_PUBLIC_URL={deployed} and updating the functions")
        url = deployed

    rest_api = _deployed_rest_api(project, stage)
    if rest_api is not None:
        # chalice deploy has no place for gateway responses: unknown paths answer 404, not 403.
        gateway_responses.put_on(session.client("apigateway"), *rest_api)
        protection = api_protection.ApiProtection.of_stage(config, stage)
        api_protection.put_on(
            session.client("apigateway"),
            *rest_api,
            protection,
            outputs.get(api_protection.ACCESS_LOG_EXPORT),
        )
    # The cheaper ingress beside API Gateway (docs/cost.md); chalice deploy has no place for it.
    url_config = function_url.FunctionUrl.of_stage(config, stage)
    lambda_url = None
    if stage != LOCAL_STAGE:
        api_function = chalice_project.function_name(config, stage, chalice_project.API_FUNCTION)
        lambda_url = function_url.put_on(session.client("lambda"), api_function, url_config)
    if "GlueJobName" in outputs:  # CreateMetricsJob=false: run it locally (python -m spark_glue)
        upload_glue(s3, outputs)
    base = (public_url or _deployed_url(project, stage) or "").rstrip("/")
    print()
    print(f"ingress base URL: {base}/<namespace>/<broker>")
    if lambda_url:
        print(
            f"function URL:     {lambda_url.rstrip('/')}/<namespace>/<broker>"
            f"  (AuthType {url_config.auth_type}; cheaper, no API Gateway throttling: docs/cost.md)"
        )
    print(f"control plane:    {base}/apis/eventing.knative.dev/v1/namespaces/<namespace>/brokers")
    if stage != LOCAL_STAGE:
        console = f"https://{region}.console.aws.amazon.com/cloudwatch/home?region={region}"
        print(f"dashboard:        {console}#dashboards:name={outputs['DashboardName']}")
    if "GlueJobName" in outputs:
        print(f"metrics job:      {outputs['GlueJobName']} -> {outputs['MetricsLocation']}")
    return base


# ------------------------------------------------------------------------------------- adoption
# The resources a destroy keeps (DeletionPolicy: Retain), the template parameter that hands each
# back to a new stack, and what it is.
RETAINED = (
    ("Table", "ExistingTableName", "table"),
    ("ArchiveBucket", "ExistingArchiveBucketName", "bucket"),
    ("MetricsBucket", "ExistingMetricsBucketName", "bucket"),
)
# Stack states in which the next deploy creates the stack (infra/stack.py deletes a
# ROLLBACK_COMPLETE one first; REVIEW_IN_PROGRESS is a stack that only has a change set).
_TO_BE_CREATED = ("ROLLBACK_COMPLETE", "REVIEW_IN_PROGRESS")


def retained(
    session: Any,
    template: dict[str, Any],
    stage: str,
    parameters: dict[str, str],
    account: str,
    say: stack.Say = print,
) -> dict[str, str]:
    """The ``Existing...`` parameters for the retained resources of an earlier deploy of the stage.

    Only when the stack is about to be created: an existing stack keeps its parameters (and its
    resources). Each resource is looked up under the name the template gives it for this stage,
    account and region; one the template would create and that already exists is adopted (the
    stack uses it and never changes it), after checking that the broker can use it. A parameter
    given explicitly (even empty) is left as given.
    """
    described = stack.describe(session.client("cloudformation"), stack_name(stage))
    if described is not None and described["StackStatus"] not in _TO_BE_CREATED:
        return {}
    try:
        r = Resolver(
            template,
            {"Stage": stage, **parameters},
            account_id=account,
            region=session.region_name,
            stack_name=stack_name(stage),
        )
    except UnresolvableError as exc:  # e.g. a --parameter the template does not declare
        raise stack.StackError(f"the stack's parameters: {exc}") from exc
    adopted: dict[str, str] = {}
    for logical_id, parameter, kind in RETAINED:
        if parameter in parameters:
            continue
        name = str(r.ref(logical_id))
        if kind == "table":
            found = _retained_table(session.client("dynamodb"), name, r.properties(logical_id), say)
        else:
            found = _retained_bucket(session.client("s3"), name)
        if found:
            say(f"adopting {kind} {name}, kept by an earlier destroy")
            adopted[parameter] = name
    return adopted


def _retained_table(ddb: Any, name: str, declared: dict[str, Any], say: stack.Say) -> bool:
    """Whether the table exists (and is one the broker can use: same keys; else StackError).
    A TTL other than the template's is reported, not changed."""
    try:
        table = ddb.describe_table(TableName=name)["Table"]
    except ddb.exceptions.ResourceNotFoundException:
        return False
    if table.get("TableStatus") == "DELETING":
        raise stack.StackError(f"table {name} is being deleted; deploy again once it is gone")
    keys = sorted((k["AttributeName"], k["KeyType"]) for k in table["KeySchema"])
    wanted = sorted((k["AttributeName"], k["KeyType"]) for k in declared["KeySchema"])
    if keys != wanted:
        raise stack.StackError(
            f"table {name} exists with keys {keys}, not the broker's {wanted}: it cannot be "
            "adopted (rename or delete it, or pass --parameter ExistingTableName=<another>)"
        )
    ttl = ddb.describe_time_to_live(TableName=name).get("TimeToLiveDescription", {})
    want_ttl = declared.get("TimeToLiveSpecification", {}).get("AttributeName")
    if want_ttl and (ttl.get("TimeToLiveStatus"), ttl.get("AttributeName")) != (
        "ENABLED",
        want_ttl,
    ):
        say(
            f"warning: table {name} has no TTL on {want_ttl} (expired records are not removed); "
            "the stack does not change an adopted table: aws dynamodb update-time-to-live "
            f"--table-name {name} "
            f"--time-to-live-specification Enabled=true,AttributeName={want_ttl}"
        )
    return True


def _retained_bucket(s3: Any, name: str) -> bool:
    """Whether the bucket exists in this account; StackError if the name is someone else's."""
    from botocore.exceptions import ClientError

    try:
        s3.head_bucket(Bucket=name)
    except ClientError as exc:
        code = str(exc.response.get("Error", {}).get("Code", ""))
        if code in ("404", "NoSuchBucket", "NotFound"):
            return False
        if code in ("403", "AccessDenied", "Forbidden"):
            raise stack.StackError(
                f"bucket {name} exists but this account may not use it (another account's?): "
                "the stack cannot create it either"
            ) from exc
        raise
    return True


def upload_glue(s3: Any, outputs: dict[str, str], source: Path = REPO / "spark_glue") -> None:
    """Uploads the job script and the package it imports to the job's script location. The
    script is ``spark_glue/__main__.py``: it picks the Glue runtime from the job's default
    argument ``--runtime glue`` and runs ``spark_glue.job`` from the package zip."""
    script = source / "__main__.py"
    if not script.is_file():
        raise FileNotFoundError(f"{script} is missing; the metrics job cannot be uploaded")
    bucket = outputs["MetricsBucketName"]
    s3.put_object(Bucket=bucket, Key=f"{GLUE_PREFIX}job.py", Body=script.read_bytes())
    s3.put_object(Bucket=bucket, Key=f"{GLUE_PREFIX}spark_glue.zip", Body=spark_glue_zip(source))
    print(f"uploaded {outputs['GlueScriptLocation']} and {outputs['GlueExtraPyFiles']}")


def spark_glue_zip(source: Path) -> bytes:
    """The spark_glue package as --extra-py-files wants it: the package directory at the top."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for path in sorted(source.rglob("*.py")):
            if "__pycache__" not in path.parts:
                zf.write(path, Path(source.name) / path.relative_to(source))
    return buf.getvalue()


# --------------------------------------------------------------------------------------- destroy
def destroy(session: Any, stage: str, *, delete_data: bool = False) -> None:
    """Removes the functions, the API, the run-time queues and mappings, then the stack.

    The table, the archive and the metrics bucket are retained by the stack (DeletionPolicy);
    ``delete_data`` deletes them as well, after the stack.
    """
    cfn = session.client("cloudformation")
    name = stack_name(stage)
    outputs = stack.outputs(cfn, name) if stack.describe(cfn, name) else {}
    project = REPO / "build" / f"chalice-{stage}"
    s3 = session.client("s3")
    state_key = f"{STATE_PREFIX}chalice-{stage}.json"
    if outputs:
        _fetch_state(s3, outputs["MetricsBucketName"], state_key, project, stage)
        _delete_mappings(session.client("lambda"), load_template(), stage)
    if (project / ".chalice" / "deployed" / f"{stage}.json").is_file():
        chalice_project.copy_app(project)  # a fresh clone has no build/ yet
        _chalice(project, session.region_name, session.profile_name, "delete", "--stage", stage)
        if outputs:
            _store_state(s3, outputs["MetricsBucketName"], state_key, project, stage)
    spool_layer.delete(session.client("lambda"), spool_layer.layer_name(APP_NAME, stage))
    if outputs:
        _delete_queues(session.client("sqs"), outputs["QueuePrefix"])
        _empty_bucket(s3, outputs["ClaimBucketName"])
    stack.delete(cfn, name)
    retained = [
        ("table", outputs.get("TableName")),
        ("bucket", outputs.get("ArchiveBucketName")),
        ("bucket", outputs.get("MetricsBucketName")),
    ]
    for kind, resource in retained:
        if not resource:
            continue
        if not delete_data:
            print(f"kept {kind} {resource} (its data outlives the stack; --delete-data removes it)")
        elif kind == "table":
            session.client("dynamodb").delete_table(TableName=resource)
            print(f"deleted table {resource}")
        else:
            _empty_bucket(s3, resource)
            s3.delete_bucket(Bucket=resource)
            print(f"deleted bucket {resource}")


def _delete_mappings(lam: Any, template: dict[str, Any], stage: str) -> None:
    """The mappings the control plane created at run time (neither Chalice nor the stack knows)."""
    for function in template["Metadata"]["ServerlessBroker"]["MappingTargets"]:
        fn = f"{APP_NAME}-{stage}-{function}"
        try:
            pages = lam.get_paginator("list_event_source_mappings").paginate(FunctionName=fn)
            for page in pages:
                for mapping in page.get("EventSourceMappings", []):
                    lam.delete_event_source_mapping(UUID=mapping["UUID"])
                    print(f"deleted mapping {mapping['UUID']} -> {fn}")
        except lam.exceptions.ResourceNotFoundException:
            continue


def _delete_queues(sqs: Any, prefix: str) -> None:
    from chalicelib.core.names import is_owned_queue

    for page in sqs.get_paginator("list_queues").paginate(QueueNamePrefix=prefix):
        for url in page.get("QueueUrls", []):
            if is_owned_queue(prefix, url.rsplit("/", 1)[-1]):
                sqs.delete_queue(QueueUrl=url)
                print(f"deleted queue {url.rsplit('/', 1)[-1]}")


def _empty_bucket(s3: Any, bucket: str) -> None:
    for page in s3.get_paginator("list_object_versions").paginate(Bucket=bucket):
        keys = [
            {"Key": v["Key"], "VersionId": v["VersionId"]}
            for v in page.get("Versions", []) + page.get("DeleteMarkers", [])
        ]
        if keys:
            s3.delete_objects(Bucket=bucket, Delete={"Objects": keys, "Quiet": True})


# --------------------------------------------------------------------------------------- package
def package(stage: str, region: str | None, out: Path, public_url: str | None) -> Path:
    """``chalice package`` for pipelines, patched to import the shared stack's exports.

    Needs no AWS access: deploy the shared stack first (same stage), then deploy ``out/sam.json``
    with `aws cloudformation package` and `aws cloudformation deploy --capabilities CAPABILITY_IAM`.
    """
    if not public_url:
        # Without it the functions would advertise the local default (http://127.0.0.1:8080) as
        # every broker's status.address.url; `make deploy` learns the URL, a package cannot.
        raise SystemExit(
            "error: a package needs the broker's public URL: make package "
            "DEPLOY_ARGS='--public-url https://events.example.com' (your API's or domain's URL)"
        )
    config = chalice_project.load_config()
    chalice_project.stage_functions(config, stage)
    out.mkdir(parents=True, exist_ok=True)
    # Packaged from a copy, where the tracing SDK is vendored (chalice_project.vendor_tracing);
    # the policy files keep their CloudFormation references, which the template resolves.
    project = chalice_project.copy_app(REPO / "build" / f"package-src-{stage}")
    for policy in (REPO / ".chalice").glob("policy-*.json"):
        shutil.copy2(policy, project / ".chalice" / policy.name)
    chalice_project.vendor_tracing(project)
    _chalice(project, region or "us-east-1", None, "package", "--stage", stage, str(out))
    sam_path = out / "sam.json"
    sam = json.loads(sam_path.read_text(encoding="utf-8"))
    patched = chalice_project.patch_package(sam, config, stage, load_template(), public_url)
    sam_path.write_text(json.dumps(patched, indent=2) + "\n")
    extra = "deployment.zip"
    if spool_layer.LAYER_ID in patched["Resources"]:
        extra += f", {spool_layer.write_zip(out).name}"
    print(f"package: {sam_path} (+ {extra})")
    return sam_path


# ---------------------------------------------------------------------------------------- chalice
def _chalice(project: Path, region: str | None, profile: str | None, *args: str) -> None:
    env = dict(os.environ)
    if region:
        env["AWS_DEFAULT_REGION"] = region
    command = [sys.executable, "-c", "import sys; from chalice.cli import main; sys.exit(main())"]
    command += ["--project-dir", str(project)]
    if profile and profile != "default":
        command += ["--profile", profile]
    where = project.relative_to(REPO) if project.is_relative_to(REPO) else project
    print(f"$ chalice {' '.join(args)}  (in {where})")
    subprocess.run([*command, *args], check=True, env=env)


def _deployed_url(project: Path, stage: str) -> str | None:
    path = project / ".chalice" / "deployed" / f"{stage}.json"
    if not path.is_file():
        return None
    if stage == LOCAL_STAGE:  # Chalice records AWS's form of the URL; LocalStack serves its own
        rest_api = _deployed_rest_api(project, stage)
        endpoint = os.environ.get("AWS_ENDPOINT_URL", "")
        return localstack_api_url(endpoint, *rest_api) if rest_api and endpoint else None
    for resource in json.loads(path.read_text(encoding="utf-8")).get("resources", []):
        if resource.get("resource_type") == "rest_api":
            return str(resource["rest_api_url"])
    return None


def _deployed_rest_api(project: Path, stage: str) -> tuple[str, str] | None:
    """(rest API id, API Gateway stage) of the deployed API, from Chalice's deployed state."""
    path = project / ".chalice" / "deployed" / f"{stage}.json"
    if not path.is_file():
        return None
    for resource in json.loads(path.read_text(encoding="utf-8")).get("resources", []):
        if resource.get("resource_type") == "rest_api":
            config = chalice_project.load_config(project)
            api_stage = config["stages"][stage].get("api_gateway_stage", "api")
            return str(resource["rest_api_id"]), str(api_stage)
    return None


def _fetch_state(s3: Any, bucket: str, key: str, project: Path, stage: str) -> None:
    path = project / ".chalice" / "deployed" / f"{stage}.json"
    try:
        body = s3.get_object(Bucket=bucket, Key=key)["Body"].read()
    except s3.exceptions.NoSuchKey:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(body)


def _store_state(s3: Any, bucket: str, key: str, project: Path, stage: str) -> None:
    path = project / ".chalice" / "deployed" / f"{stage}.json"
    if path.is_file():
        s3.put_object(Bucket=bucket, Key=key, Body=path.read_bytes())


# ------------------------------------------------------------------------------------------- cli
def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m infra.deploy", description=__doc__.split("\n")[0])
    p.add_argument(
        "--stage", required=True, help="Chalice stage (prod, ...; local: into LocalStack)"
    )
    p.add_argument("--region", help="AWS region (default: your profile's)")
    p.add_argument("--profile", help="AWS profile")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--destroy", action="store_true", help="remove the stage from AWS")
    mode.add_argument("--package-only", action="store_true", help="build the pipeline package")
    p.add_argument(
        "--delete-data", action="store_true", help="with --destroy: table and buckets too"
    )
    p.add_argument("--out", help="with --package-only: output directory")
    p.add_argument("--public-url", help="the broker's public base URL (a custom domain)")
    p.add_argument("--alarm-email", help="subscribe this address to the alarms")
    p.add_argument("--glue-workers", type=int, help="G.1X workers of the metrics job")
    p.add_argument("--kafka-cluster", help="MSK cluster name kafka_ingress may read")
    p.add_argument(
        "--parameter", action="append", default=[], metavar="KEY=VALUE", help="any stack parameter"
    )
    return p


def _parameters(args: argparse.Namespace) -> dict[str, str]:
    params = dict(item.split("=", 1) for item in args.parameter)
    if args.alarm_email is not None:
        params["AlarmEmail"] = args.alarm_email
    if args.glue_workers is not None:
        params["GlueWorkers"] = str(args.glue_workers)
    if args.kafka_cluster is not None:
        params["KafkaClusterName"] = args.kafka_cluster
    return params


def _session(args: argparse.Namespace) -> Any:
    import boto3

    session = boto3.Session(profile_name=args.profile, region_name=args.region)
    if not session.region_name:
        raise SystemExit("no region: pass --region or set AWS_REGION / a profile region")
    return session


if __name__ == "__main__":
    raise SystemExit(main())
