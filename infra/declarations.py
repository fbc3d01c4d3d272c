"""What the shared stack declares, in the form the local bootstrap applies with boto3.

Everything here is read from ``infra/template.yaml`` and resolved for the local stage, so local
mode and AWS cannot drift: the table's keys, billing, point-in-time recovery and TTL, the buckets
and their lifecycle rules, the Firehose stream (prefixes, buffering, compression), the functions
event source mappings may target, and the per-trigger queue settings. Only the template's
parameters that make sense for an emulator differ (``LOCAL_PARAMETERS``).

Names: where ``Settings`` carries a name the app will use (``BROKER_TABLE`` and friends, see the
template's ``Metadata.ServerlessBroker.Environment``), that name wins over the template's, so the
bootstrap creates what the app talks to; with default Settings the two are equal (tested).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from chalicelib.config import Settings
from infra.cfn import Resolver, load_template

# Template parameters for an emulator: bucket names need no account/region suffix (its namespace
# is private), and the archive is written uncompressed and promptly for people reading it locally.
LOCAL_PARAMETERS: dict[str, str] = {
    "GloballyUniqueBucketNames": "false",
    "ArchiveCompression": "UNCOMPRESSED",
    "ArchiveBufferSeconds": "60",
    "ArchiveBufferMegabytes": "1",
}

# Environment variable (template Metadata) -> the Settings field chalicelib/config.py reads it into.
SETTINGS_FIELDS: dict[str, str] = {
    "BROKER_STAGE": "stage",
    "BROKER_TABLE": "table_name",
    "BROKER_QUEUE_PREFIX": "queue_prefix",
    "BROKER_ARCHIVE_STREAM": "archive_stream",
    "BROKER_ARCHIVE_BUCKET": "archive_bucket",
    "BROKER_CLAIM_BUCKET": "claim_bucket",
    "BROKER_DELIVERY_FUNCTION": "delivery_function",
    "BROKER_DEAD_LETTER_FUNCTION": "dead_letter_function",
    "BROKER_KAFKA_FUNCTION": "kafka_function",
}

_BUCKETS = ("ArchiveBucket", "ClaimBucket", "MetricsBucket")


@dataclass(frozen=True)
class Declarations:
    table: dict[str, Any]  # CreateTable kwargs
    table_ttl_attribute: str | None
    buckets: list[str]
    stream: dict[str, Any]  # CreateDeliveryStream kwargs
    role_name: str  # the Firehose delivery role
    functions: list[str] = field(default_factory=list)  # Lambda functions mappings may target
    table_point_in_time_recovery: bool = False
    bucket_lifecycles: dict[str, dict[str, Any]] = field(default_factory=dict)  # bucket -> config
    queue_prefix: str = ""
    queue_attributes: dict[str, str] = field(default_factory=dict)  # CreateQueue Attributes
    dead_letter_queue_attributes: dict[str, str] = field(default_factory=dict)
    redrive: dict[str, Any] = field(default_factory=dict)  # maxReceiveCount = retry + 1 + margin
    mapping: dict[str, Any] = field(default_factory=dict)  # CreateEventSourceMapping settings
    environment: dict[str, str] = field(default_factory=dict)  # what the stack tells the app
    metrics_job_arguments: dict[str, str] = field(default_factory=dict)  # Glue DefaultArguments
    signing_key: dict[str, Any] = field(default_factory=dict)  # KMS CreateKey kwargs
    signing_alias: str = ""  # the alias the functions find the key by (Settings.signing_key)


def local_declarations(settings: Settings, account_id: str = "123456789012") -> Declarations:
    template = load_template()
    meta = template["Metadata"]["ServerlessBroker"]
    parameters = {"Stage": settings.stage, **LOCAL_PARAMETERS}

    def resolver(names: dict[str, str] | None = None) -> Resolver:
        return Resolver(
            template,
            parameters,
            account_id=account_id,
            region=settings.region,
            stack_name=f"serverless-broker-{settings.stage}",
            names=names,
        )

    declared = _environment(resolver(), meta)
    wanted = {var: str(getattr(settings, attr)) for var, attr in SETTINGS_FIELDS.items()}
    names = {
        logical_id: wanted[var]
        for var, logical_id in _named_resources(template, meta).items()
        if wanted[var] != declared[var]
    }
    r = resolver(names)
    # Outputs that are not resource names (function names, prefixes) follow Settings as well.
    environment = {var: wanted.get(var, value) for var, value in _environment(r, meta).items()}
    by_declared = {value: environment[var] for var, value in declared.items()}

    table = r.properties("Table")
    stream = r.properties("ArchiveStream")
    stream.pop("DeliveryStreamEncryptionConfigurationInput", None)  # emulators ignore it
    buckets = [r.ref(b) for b in _BUCKETS]
    app_stage = f"{r.ref('AppName')}-{settings.stage}"
    queues = meta["TriggerQueues"]
    return Declarations(
        table={
            k: table[k] for k in ("TableName", "KeySchema", "AttributeDefinitions", "BillingMode")
        },
        table_ttl_attribute=_ttl_attribute(table),
        table_point_in_time_recovery=bool(
            table.get("PointInTimeRecoverySpecification", {}).get("PointInTimeRecoveryEnabled")
        ),
        buckets=buckets,
        bucket_lifecycles={
            r.ref(b): lifecycle_configuration(r.properties(b)["LifecycleConfiguration"])
            for b in _BUCKETS
        },
        stream={
            "DeliveryStreamName": stream["DeliveryStreamName"],
            "DeliveryStreamType": stream["DeliveryStreamType"],
            "ExtendedS3DestinationConfiguration": {
                k: v
                for k, v in stream["ExtendedS3DestinationConfiguration"].items()
                if k != "CloudWatchLoggingOptions"
            },
        },
        role_name=r.ref("FirehoseRole"),
        # A function with no output of its own (sources) is named from the stage, as Settings.
        functions=[
            by_declared.get(f"{app_stage}-{fn}", f"{app_stage}-{fn}")
            for fn in meta["MappingTargets"]
        ],
        queue_prefix=environment["BROKER_QUEUE_PREFIX"],
        queue_attributes=dict(queues["Queue"]),
        dead_letter_queue_attributes=dict(queues["DeadLetterQueue"]),
        redrive=dict(queues["Redrive"]),
        mapping=dict(queues["Mapping"]),
        environment=environment,
        metrics_job_arguments=dict(r.properties("MetricsJob")["DefaultArguments"]),
        signing_key={
            k: v
            for k, v in r.properties("SigningKey").items()
            if k in ("Description", "KeySpec", "KeyUsage")
        },
        signing_alias=str(r.properties("SigningKeyAlias")["AliasName"]),
    )


def _environment(r: Resolver, meta: dict[str, Any]) -> dict[str, str]:
    outputs = r.outputs()
    return {var: str(outputs[output]) for var, output in meta["Environment"].items()}


def _named_resources(template: dict[str, Any], meta: dict[str, Any]) -> dict[str, str]:
    """Environment variables whose output is a resource's own name (``!Ref <resource>``, or
    ``!If [Adopt..., !Ref Existing..., !Ref <resource>]`` for the ones a deploy may adopt)."""
    out = {}
    for var, output in meta["Environment"].items():
        value = template["Outputs"][output]["Value"]
        if isinstance(value, dict) and "Fn::If" in value:
            value = value["Fn::If"][2]  # the stack's own resource (local mode adopts nothing)
        if isinstance(value, dict) and value.get("Ref") in template["Resources"]:
            out[var] = value["Ref"]
    return out


def _ttl_attribute(table: dict[str, Any]) -> str | None:
    ttl = table.get("TimeToLiveSpecification") or {}
    return str(ttl["AttributeName"]) if ttl.get("Enabled") else None


def lifecycle_configuration(cfn: dict[str, Any]) -> dict[str, Any]:
    """CloudFormation's LifecycleConfiguration as S3's PutBucketLifecycleConfiguration takes it."""
    rules = []
    for rule in cfn["Rules"]:
        api: dict[str, Any] = {
            "ID": rule["Id"],
            "Status": rule["Status"],
            "Filter": {"Prefix": rule.get("Prefix", "")},
        }
        if "ExpirationInDays" in rule:
            api["Expiration"] = {"Days": int(rule["ExpirationInDays"])}
        if "Transitions" in rule:
            api["Transitions"] = [
                {"Days": int(t["TransitionInDays"]), "StorageClass": t["StorageClass"]}
                for t in rule["Transitions"]
            ]
        if "AbortIncompleteMultipartUpload" in rule:
            days = rule["AbortIncompleteMultipartUpload"]["DaysAfterInitiation"]
            api["AbortIncompleteMultipartUpload"] = {"DaysAfterInitiation": int(days)}
        rules.append(api)
    return {"Rules": rules}
