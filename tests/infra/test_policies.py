"""Least privilege, checked on every IAM policy we write: the template's roles and resource
policies, and the functions' policy files (.chalice/policy-prod-*.json), resolved for prod.

Rules for Allow statements: no wildcard in an action, no NotAction/NotResource, and a resource
with a wildcard only when ALLOWLIST names that exact resource, for those actions, with a reason.
Deny statements may use wildcards (they only take permissions away) but must be conditional.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass
from typing import Any

import pytest

from infra import source_policy, target_policy
from infra.cfn import Resolver
from infra.chalice_project import load_config
from tests.infra.conftest import ACCOUNT, REGION, STAGE

_A = f"arn:aws:{{service}}:{REGION}:{ACCOUNT}"
_SUFFIX = f"{ACCOUNT}-{REGION}"
ARCHIVE = f"arn:aws:s3:::serverless-broker-{STAGE}-archive-{_SUFFIX}"
CLAIMS = f"arn:aws:s3:::serverless-broker-{STAGE}-claims-{_SUFFIX}"
METRICS = f"arn:aws:s3:::serverless-broker-{STAGE}-metrics-{_SUFFIX}"
SQS = _A.format(service="sqs")
LOGS = _A.format(service="logs")
LAMBDA = _A.format(service="lambda")
KAFKA = _A.format(service="kafka")
# Deployed Lambda names (Chalice names the API handler <app>-<stage>).
LAMBDAS = (
    f"serverless-broker-{STAGE}",
    *(
        f"serverless-broker-{STAGE}-{fn}"
        for fn in ("delivery", "dead_letter", "reconciler", "replayer")
    ),
    f"serverless-broker-{STAGE}-kafka_ingress",
    f"serverless-broker-{STAGE}-pings",
    f"serverless-broker-{STAGE}-sources",
)
QUEUE_RW = {
    "sqs:ChangeMessageVisibility", "sqs:CreateQueue", "sqs:DeleteMessage", "sqs:DeleteQueue",
    "sqs:GetQueueAttributes", "sqs:GetQueueUrl", "sqs:PurgeQueue", "sqs:ReceiveMessage",
    "sqs:SendMessage", "sqs:SetQueueAttributes",
}  # fmt: skip
ENI = {
    "ec2:CreateNetworkInterface", "ec2:DeleteNetworkInterface", "ec2:DescribeNetworkInterfaces",
    "ec2:DescribeSecurityGroups", "ec2:DescribeSubnets", "ec2:DescribeVpcs",
}  # fmt: skip
# What active tracing needs from each function's role (.chalice/config.json "xray": true).
XRAY = {"xray:PutTelemetryRecords", "xray:PutTraceSegments"}


@dataclass(frozen=True)
class Allowed:
    actions: frozenset[str]
    reason: str


def _allow(actions: set[str] | str, reason: str) -> Allowed:
    return Allowed(frozenset({actions} if isinstance(actions, str) else actions), reason)


ALLOWLIST: dict[str, Allowed] = {
    # ---- run-time resources whose names exist only at run time
    f"{SQS}:sb-{STAGE}-*": _allow(
        QUEUE_RW,
        "per-trigger queues and DLQs are created by the control plane at run time; the stage's "
        "queue prefix is the narrowest name known in advance",
    ),
    f"{SQS}:sb-{STAGE}-*-dlq": _allow(
        {
            "sqs:ChangeMessageVisibility",
            "sqs:DeleteMessage",
            "sqs:GetQueueAttributes",
            "sqs:GetQueueUrl",
            "sqs:ReceiveMessage",
        },
        "the dead-letter function reads only the per-trigger DLQs (prefix + -dlq suffix)",
    ),
    f"{SQS}:sb-{STAGE}-*-dlq.fifo": _allow(
        {
            "sqs:ChangeMessageVisibility",
            "sqs:DeleteMessage",
            "sqs:GetQueueAttributes",
            "sqs:GetQueueUrl",
            "sqs:ReceiveMessage",
        },
        "the DLQs of ordered triggers are FIFO queues, whose names must end in .fifo "
        "(docs/ordering.md)",
    ),
    f"arn:aws:scheduler:{REGION}:{ACCOUNT}:schedule/default/sb-{STAGE}-*": _allow(
        {
            "scheduler:CreateSchedule",
            "scheduler:DeleteSchedule",
            "scheduler:GetSchedule",
            "scheduler:UpdateSchedule",
        },
        "the sources' schedules are created by the control plane at run time (one per "
        "PingSource or timer, docs/sources.md); the stage's queue prefix names them",
    ),
    f"{SQS}:*": _allow(
        "sqs:ListQueues",
        "ListQueues authorises against the account's queue namespace (arn:...:sqs:region:"
        "account:*), not a queue; it returns URLs only, and the code filters by prefix",
    ),
    f"{LAMBDA}:event-source-mapping:*": _allow(
        {
            "lambda:GetEventSourceMapping",
            "lambda:UpdateEventSourceMapping",
            "lambda:DeleteEventSourceMapping",
        },
        "mapping ARNs end in a UUID Lambda assigns; update/delete are further limited by the "
        "lambda:FunctionArn condition to our three mapping targets",
    ),
    "*": _allow(
        {
            "lambda:CreateEventSourceMapping",
            "lambda:ListEventSourceMappings",
            "scheduler:ListSchedules",
            "cloudwatch:PutMetricData",
            *ENI,
            *XRAY,
        },
        "actions with no resource-level permissions: CreateEventSourceMapping (limited by the "
        "lambda:FunctionArn condition), ListEventSourceMappings and ListSchedules (read-only; "
        "the reconciler filters schedules by the stage's prefix), PutMetricData "
        "(limited to the Glue namespace by condition), the ENI actions Lambda needs to reach "
        "a Kafka cluster inside a VPC (AWSLambdaVPCAccessExecutionRole uses * as well), and the "
        "X-Ray writes of active tracing (AWSXRayDaemonWriteAccess uses * as well)",
    ),
    # ---- the key that signs delivery tokens (design.md 2.5), by the alias the stack gives it
    f"arn:aws:kms:{REGION}:{ACCOUNT}:key/*": _allow(
        {"kms:GetPublicKey", "kms:Sign"},
        "KMS generates the signing key's id; the kms:ResourceAliases condition limits the grant "
        "to the key carrying the stage's alias (tested below)",
    ),
    # ---- objects under a prefix of our own buckets
    f"{CLAIMS}/claims/*": _allow(
        {"s3:GetObject", "s3:PutObject"}, "claim-check payloads, one object per large event"
    ),
    f"{ARCHIVE}/archive/*": _allow(
        {"s3:AbortMultipartUpload", "s3:GetObject", "s3:PutObject"},
        "Firehose writes hourly archive objects with generated names; the Glue job and the "
        "replayer read them",
    ),
    f"{ARCHIVE}/archive/*/late-*": _allow(
        {"s3:PutObject"},
        "carrying functions put late records in objects of their own hour (late-<role>-<uuid>.gz:"
        " the name is generated; never over an object Firehose wrote)",
    ),
    f"{ARCHIVE}/archive-payloads/*": _allow(
        {"s3:GetObject", "s3:PutObject"},
        "the archive's copy of each large event, one object per event (docs/replay.md): "
        "written by the functions that ingest, read by the replayer",
    ),
    f"{ARCHIVE}/archive-errors/*": _allow(
        {"s3:AbortMultipartUpload", "s3:GetObject", "s3:PutObject"},
        "Firehose writes records it could not deliver under the error prefix",
    ),
    f"{METRICS}/glue/*": _allow("s3:GetObject", "the job script and spark_glue.zip"),
    f"{METRICS}/metrics/*": _allow(
        {"s3:GetObject", "s3:PutObject", "s3:DeleteObject"},
        "the job rewrites its Parquet partitions, summary.json and report.html",
    ),
    f"{METRICS}/glue-temp/*": _allow(
        {"s3:GetObject", "s3:PutObject", "s3:DeleteObject"}, "Glue's scratch space (--TempDir)"
    ),
    # ---- log streams inside named log groups (stream names are generated)
    **{
        f"{LOGS}:log-group:/aws/lambda/{name}:*": _allow(
            {"logs:CreateLogStream", "logs:PutLogEvents"},
            "the function's own log group (created by the stack); Lambda names the streams",
        )
        for name in LAMBDAS
    },
    **{
        f"{LOGS}:log-group:/aws-glue/jobs/{group}:*": _allow(
            {"logs:CreateLogGroup", "logs:CreateLogStream", "logs:PutLogEvents"},
            "Glue writes job output to these fixed, service-named log groups, a stream per run",
        )
        for group in ("output", "error", "logs-v2")
    },
    # ---- Kafka: names fixed by the operator, suffixes by the service
    f"{KAFKA}:cluster/none/*": _allow(
        {
            "kafka:DescribeClusterV2",
            "kafka:GetBootstrapBrokers",
            "kafka-cluster:Connect",
            "kafka-cluster:DescribeClusterDynamicConfiguration",
        },
        "the named MSK cluster (parameter KafkaClusterName); MSK appends a UUID to its ARN",
    ),
    f"{KAFKA}:topic/none/*": _allow(
        {"kafka-cluster:DescribeTopic", "kafka-cluster:ReadData"},
        "topics of that cluster: the mappings an operator creates name them",
    ),
    f"{KAFKA}:group/none/*": _allow(
        {"kafka-cluster:AlterGroup", "kafka-cluster:DescribeGroup"},
        "consumer groups of that cluster (Lambda names them after the mapping)",
    ),
    f"arn:aws:secretsmanager:{REGION}:{ACCOUNT}:secret:serverless-broker/{STAGE}/kafka/*": _allow(
        "secretsmanager:GetSecretValue",
        "SASL credentials for self-managed Kafka under the stage's prefix; Secrets Manager "
        "appends a random suffix to every secret ARN",
    ),
    f"arn:aws:secretsmanager:{REGION}:{ACCOUNT}:secret:serverless-broker/{STAGE}/connections/*": (
        _allow(
            "secretsmanager:GetSecretValue",
            "Connections' API keys, passwords and client secrets under the stage's prefix "
            "(infra/connection_policy.py); Secrets Manager appends a random suffix to each ARN",
        )
    ),
}


def _resolved(pattern: str) -> str:
    subs = {"${AWS::Region}": REGION, "${AWS::AccountId}": ACCOUNT, "${AWS::Partition}": "aws"}
    for name, value in subs.items():
        pattern = pattern.replace(name, value)
    return pattern


def _target_allowlist() -> dict[str, Allowed]:
    """The stage's target_arn_patterns (docs/targets.md): the ARNs its triggers may deliver to,
    named by the operator; each grants only its service's delivery and describe actions."""
    out: dict[str, Allowed] = {}
    for pattern in target_policy.patterns_of(load_config(), STAGE):
        service = target_policy.service_of(pattern)
        actions = {*target_policy.DELIVERY_ACTIONS[service], *target_policy.CHECK_ACTIONS[service]}
        reason = "an AWS target the stage's target_arn_patterns allow (infra/target_policy.py)"
        out[_resolved(pattern)] = _allow(actions, reason)
        if service == "states":
            execution = pattern.replace(":stateMachine:", ":execution:") + ":*"
            out[_resolved(execution)] = _allow("states:DescribeExecution", reason)
    return out


ALLOWLIST.update(_target_allowlist())


def _source_allowlist() -> dict[str, Allowed]:
    """The stage's source_arn_patterns (docs/sources.md): the queues, tables' streams and
    buckets its IntegrationSources may read or wire, and the rules named with its prefix
    (infra/source_policy.py; tests/infra/test_source_policy.py checks each role's part)."""
    reason = "an IntegrationSource the stage's source_arn_patterns allow (infra/source_policy.py)"
    out: dict[str, Allowed] = {}
    for pattern in source_policy.patterns_of(load_config(), STAGE):
        service = source_policy.service_of(pattern)
        actions = {*source_policy.WIRE_ACTIONS[service]}
        if service == "sqs":
            actions |= set(source_policy.READ_ACTIONS["sqs"])
        if service == "dynamodb":
            streams = source_policy.READ_ACTIONS["dynamodb"]
            out[_resolved(pattern + "/stream/*")] = _allow(set(streams), reason)
        out[_resolved(pattern)] = _allow(actions, reason)
    rules = f"arn:aws:events:{REGION}:{ACCOUNT}:rule/sb-{STAGE}-s3-*"
    out[rules] = _allow(set(source_policy.RULE_ACTIONS), reason)
    return out


ALLOWLIST.update(_source_allowlist())


def test_target_statements_are_generated_from_the_stage_patterns(
    policy_files: dict[str, dict[str, Any]], resolver: Resolver
) -> None:
    """The delivery and dead_letter roles may call each target service's delivery action, the
    API role its describe call (readiness), on the stage's target_arn_patterns and nothing else:
    the committed policies hold exactly what ``python -m infra.target_policy`` generates, no
    target statement has a ``*`` resource, and every ARN a pattern allows is granted."""
    patterns = target_policy.patterns_of(load_config(), STAGE)
    assert patterns, "the prod stage names the ARNs it delivers to"
    for fn, role in target_policy.ROLES.items():
        found = [
            st
            for st in policy_files[fn]["Statement"]
            if str(st.get("Sid", "")).startswith(target_policy.SID_PREFIX)
        ]
        assert found == target_policy.statements(patterns, role), fn
        granted = resolver.resolve(found)
        assert all(r != "*" for st in granted for r in _as_list(st["Resource"]))
        for pattern in patterns:
            arn = _resolved(pattern).replace("*", "x")
            service = target_policy.service_of(pattern)
            actions = (
                target_policy.DELIVERY_ACTIONS if role == "deliver" else target_policy.CHECK_ACTIONS
            )[service]
            assert any(
                set(actions) <= set(st["Action"])
                and any(fnmatch.fnmatchcase(arn, r) for r in _as_list(st["Resource"]))
                for st in granted
            ), (fn, arn)
    for fn in set(policy_files) - set(target_policy.ROLES):
        assert not any(
            str(st.get("Sid", "")).startswith(target_policy.SID_PREFIX)
            for st in policy_files[fn]["Statement"]
        ), fn


def test_functions_read_the_patterns_they_are_granted() -> None:
    value = target_policy.environment(load_config(), STAGE)[target_policy.VARIABLE]
    assert value == {"Fn::Sub": ",".join(target_policy.patterns_of(load_config(), STAGE))}
    with pytest.raises(SystemExit, match="target service"):
        target_policy.statements(["arn:*"], "deliver")


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def violations(
    statements: list[tuple[str, dict[str, Any]]], allowlist: dict[str, Allowed]
) -> tuple[list[str], set[str]]:
    """Problems found in ``(where, statement)`` pairs, and the allowlist entries they used."""
    problems: list[str] = []
    used: set[str] = set()
    for where, st in statements:
        if st.get("Effect") == "Deny":
            if not st.get("Condition"):
                problems.append(f"{where}: unconditional Deny {st.get('Sid')}")
            continue
        for key in ("NotAction", "NotResource", "NotPrincipal"):
            if key in st:
                problems.append(f"{where}: Allow with {key}")
        actions = [str(a) for a in _as_list(st.get("Action", []))]
        problems += [f"{where}: wildcard action {a}" for a in actions if "*" in a or "?" in a]
        principal = st.get("Principal")
        if principal == "*" or (
            isinstance(principal, dict) and "*" in _as_list(principal.get("AWS"))
        ):
            problems.append(f"{where}: Allow to any principal")
        for resource in (str(r) for r in _as_list(st.get("Resource", []))):
            if "*" not in resource and "?" not in resource:
                continue
            entry = allowlist.get(resource)
            if entry is None:
                problems.append(f"{where}: wildcard resource {resource} is not allowlisted")
                continue
            used.add(resource)
            extra = set(actions) - entry.actions
            if extra:
                problems.append(f"{where}: {sorted(extra)} not allowlisted on {resource}")
    return problems, used


def _documents(node: Any, where: str) -> list[tuple[str, dict[str, Any]]]:
    """Every PolicyDocument under ``node`` (roles' inline policies, bucket and topic policies)."""
    found: list[tuple[str, dict[str, Any]]] = []
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "PolicyDocument" and isinstance(value, dict):
                found.append((where, value))
            else:
                found += _documents(value, f"{where}.{key}")
    elif isinstance(node, list):
        for i, value in enumerate(node):
            found += _documents(value, f"{where}[{i}]")
    return found


def template_statements(
    template: dict[str, Any], resolver: Resolver
) -> list[tuple[str, dict[str, Any]]]:
    out = []
    for logical_id in template["Resources"]:
        props = resolver.resolve(template["Resources"][logical_id].get("Properties", {}))
        for where, doc in _documents(props, logical_id):
            out += [(where, st) for st in doc["Statement"]]
    return out


def file_statements(
    files: dict[str, dict[str, Any]], resolver: Resolver
) -> list[tuple[str, dict[str, Any]]]:
    out = []
    for fn, doc in files.items():
        out += [(f"policy-{STAGE}-{fn}.json", st) for st in resolver.resolve(doc)["Statement"]]
    return out


def test_every_policy_is_least_privilege(
    template: dict[str, Any], resolver: Resolver, policy_files: dict[str, dict[str, Any]]
) -> None:
    statements = template_statements(template, resolver) + file_statements(policy_files, resolver)
    assert len(statements) > 30  # the walk found the documents
    problems, used = violations(statements, ALLOWLIST)
    assert problems == []
    assert set(ALLOWLIST) - used == set(), "allowlist entries no policy needs any more"


def test_every_allowlist_entry_has_a_reason() -> None:
    assert all(len(entry.reason) > 20 for entry in ALLOWLIST.values())


@pytest.mark.parametrize(
    ("statement", "expected"),
    [
        (
            {"Effect": "Allow", "Action": "s3:*", "Resource": f"{CLAIMS}/claims/*"},
            "wildcard action",
        ),
        ({"Effect": "Allow", "Action": "*", "Resource": "*"}, "wildcard action"),
        (
            {"Effect": "Allow", "Action": "s3:GetObject", "Resource": f"{CLAIMS}/*"},
            "not allowlisted",
        ),
        ({"Effect": "Allow", "Action": "sqs:DeleteQueue", "Resource": "*"}, "not allowlisted on"),
        ({"Effect": "Allow", "NotAction": "iam:*", "Resource": "*"}, "NotAction"),
        ({"Effect": "Deny", "Action": "s3:*", "Resource": "*"}, "unconditional Deny"),
        (
            {"Effect": "Allow", "Principal": "*", "Action": "sns:Publish", "Resource": "x"},
            "any principal",
        ),
    ],
)
def test_the_checker_catches(statement: dict[str, Any], expected: str) -> None:
    problems, _ = violations([("test", statement)], ALLOWLIST)
    assert any(expected in p for p in problems), problems


def test_conditional_wildcards_keep_their_conditions(
    policy_files: dict[str, dict[str, Any]],
) -> None:
    """The '*' grants that are safe only because of a condition still carry it."""
    for fn in ("api_handler", "reconciler"):
        by_sid = {st["Sid"]: st for st in policy_files[fn]["Statement"]}
        for sid in ("CreateMappings", "ChangeMappings"):
            targets = by_sid[sid]["Condition"]["StringEquals"]["lambda:FunctionArn"]
            assert [t["Fn::Sub"].rsplit(":", 1)[-1] for t in targets] == [
                f"serverless-broker-{STAGE}-{f}"
                for f in ("delivery", "dead_letter", "kafka_ingress", "sources")
            ]


def test_every_function_may_write_its_traces(policy_files: dict[str, dict[str, Any]]) -> None:
    for fn, doc in policy_files.items():
        granted = {
            str(action)
            for st in doc["Statement"]
            if st["Effect"] == "Allow" and st["Resource"] == "*"
            for action in _as_list(st["Action"])
        }
        assert granted >= XRAY, f"{fn} cannot send its X-Ray segments"


def test_trust_policies_name_one_service(template: dict[str, Any], resolver: Resolver) -> None:
    roles = [r for r in template["Resources"].values() if r["Type"] == "AWS::IAM::Role"]
    assert roles
    for role in roles:
        doc = resolver.resolve(role["Properties"]["AssumeRolePolicyDocument"])
        for st in doc["Statement"]:
            assert st["Action"] == "sts:AssumeRole"
            assert set(st["Principal"]) == {"Service"}
            assert str(st["Principal"]["Service"]).endswith(".amazonaws.com")


@pytest.mark.parametrize(
    ("fn", "sid", "queue"),
    [
        ("delivery", "TriggerQueues", "sb-{stage}-orders-0123456789abcdef.fifo"),
        ("delivery", "TriggerQueues", "sb-{stage}-orders-0123456789abcdef-dlq.fifo"),
        ("dead_letter", "DeadLetterQueues", "sb-{stage}-orders-0123456789abcdef-dlq.fifo"),
        ("dead_letter", "DeadLetterQueues", "sb-{stage}-orders-0123456789abcdef-dlq"),
    ],
)
def test_functions_reach_the_fifo_queues_of_ordered_triggers(
    policy_files: dict[str, dict[str, Any]], resolver: Resolver, fn: str, sid: str, queue: str
) -> None:
    by_sid = {st["Sid"]: st for st in resolver.resolve(policy_files[fn])["Statement"]}
    resources = by_sid[sid]["Resource"]
    resources = resources if isinstance(resources, list) else [resources]
    arn = f"{SQS}:{queue.format(stage=STAGE)}"
    assert any(fnmatch.fnmatchcase(arn, r) for r in resources), (arn, resources)


def test_functions_that_carry_archive_records_may_put_late_ones_under_archive(
    policy_files: dict[str, dict[str, Any]],
    resolver: Resolver,
    chalice_config: dict[str, Any],
    template: dict[str, Any],
) -> None:
    """A carrying stage's functions (and their shutdown extension, which runs with the function's
    role and environment) put late archive records straight into ``archive/`` of the archive
    bucket (chalicelib/services/late_archive.py): every function that carries may PutObject
    there, only under a ``late-`` name (never over an object Firehose wrote), nothing more, and
    no other function may (kafka_ingress writes the archive stream but never carries). The carry
    is opt-in per stage (docs/cost.md); the policy files grant it whether or not prod opts in,
    so that opting in is one environment variable."""
    environment = template["Metadata"]["ServerlessBroker"]["Environment"]
    assert environment["BROKER_ARCHIVE_BUCKET"] == "ArchiveBucketName"  # what they read
    writers = []
    for fn, doc in policy_files.items():
        statements = resolver.resolve(doc)["Statement"]
        late = [st for st in statements if st.get("Sid") == "LateArchive"]
        writes = any("firehose:PutRecordBatch" in _as_list(st["Action"]) for st in statements)
        if not writes or fn == "kafka_ingress":
            assert late == [], fn
            continue
        writers.append(fn)
        assert late == [
            {
                "Sid": "LateArchive",
                "Effect": "Allow",
                "Action": ["s3:PutObject"],
                "Resource": f"{ARCHIVE}/archive/*/late-*",
            }
        ], fn
    assert sorted(writers) == ["api_handler", "dead_letter", "delivery", "pings", "sources"]


@pytest.mark.parametrize("fn", ["api_handler", "reconciler"])
def test_the_control_plane_may_commit_a_kafka_sources_initial_offsets(
    policy_files: dict[str, dict[str, Any]], resolver: Resolver, fn: str
) -> None:
    """A KafkaSource with ``initialOffset: latest`` is Ready only once the control plane (a PUT,
    or the reconciler's retry) has committed its group's offsets at the log end
    (adapters/kafka_offsets.py): it finds the MSK brokers, reads the topic's partitions and
    commits the group's offsets, nothing more (it never reads records)."""
    granted: dict[str, set[str]] = {}
    for st in resolver.resolve(policy_files[fn])["Statement"]:
        if st["Effect"] == "Allow":
            for resource in _as_list(st["Resource"]):
                granted.setdefault(resource, set()).update(_as_list(st["Action"]))
    assert granted[f"{KAFKA}:cluster/none/*"] == {
        "kafka:GetBootstrapBrokers",
        "kafka-cluster:Connect",
    }
    assert granted[f"{KAFKA}:topic/none/*"] == {"kafka-cluster:DescribeTopic"}
    assert granted[f"{KAFKA}:group/none/*"] == {
        "kafka-cluster:AlterGroup",
        "kafka-cluster:DescribeGroup",
    }
    assert "kafka-cluster:ReadData" not in set().union(*granted.values())


def test_the_signing_key_is_granted_by_its_alias_only(
    policy_files: dict[str, dict[str, Any]], resolver: Resolver
) -> None:
    """Sign for the functions that deliver, GetPublicKey for them and the API's (the JWKS), on
    the key that carries the stage's alias (the template's SigningKeyAlias) and no other."""
    alias = resolver.properties("SigningKeyAlias")["AliasName"]
    wanted = {
        "api_handler": ["kms:GetPublicKey"],
        "delivery": ["kms:GetPublicKey", "kms:Sign"],
        "dead_letter": ["kms:GetPublicKey", "kms:Sign"],
    }
    for fn, doc in policy_files.items():
        found = [st for st in doc["Statement"] if any("kms:" in a for a in _as_list(st["Action"]))]
        if fn not in wanted:
            assert found == [], fn
            continue
        [st] = found
        assert st["Action"] == wanted[fn]
        assert st["Condition"] == {"ForAnyValue:StringEquals": {"kms:ResourceAliases": alias}}
