"""The IntegrationSink kind (Knative's ``sinks.knative.dev/v1alpha1``; docs/targets.md): a named
sink a trigger's ``subscriber.ref`` or ``deadLetterSink.ref`` names. ``spec.aws.sqs|sns|s3|
eventbridge`` ``{arn, region}`` delivers to that AWS target as an ARN subscriber would (S3: one
object per event); ``spec.log`` writes each event to the delivery function's log. Knative runs a
Camel deployment for it; here there is nothing to deploy: the sink's address is the target's ARN
or a ``log:`` URI, and the trigger's route carries it (services/routing.py)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from chalicelib.core.delivery import log_sink
from chalicelib.core.delivery.aws_targets import arn_problems, parse_arn
from chalicelib.core.errors import Problem, ValidationError
from chalicelib.core.names import name_problems, quote
from chalicelib.core.resources import meta
from chalicelib.core.resources.conditions import ADDRESSABLE, ConditionSet, previous_conditions
from chalicelib.core.resources.fields import json_object as _object
from chalicelib.core.resources.fields import unknown_fields as _unknown_fields
from chalicelib.core.resources.kind import ResourceKind

API_VERSION = "sinks.knative.dev/v1alpha1"
KIND = "IntegrationSink"
PLURAL = "integrationsinks"
TARGET_REACHABLE = "TargetReachable"
SINK_CONDITIONS = ConditionSet((ADDRESSABLE, TARGET_REACHABLE))
# spec.aws's members: the service of the ARN each takes.
AWS_SINKS = {"sqs": "sqs", "sns": "sns", "s3": "s3", "eventbridge": "events"}
_REGION = re.compile(r"[a-z]{2}(-[a-z]+)+-[0-9]")
_LOG_FLAGS = ("showHeaders", "showBody", "multiline", "logMask")


@dataclass(frozen=True, slots=True)
class IntegrationSink:
    namespace: str
    name: str
    # Set at admission (meta.admitted); a parsed body has none yet.
    uid: str = field(default="", kw_only=True)
    generation: int = field(default=0, kw_only=True)
    creation_timestamp: str = field(default="", kw_only=True)
    aws: str | None = None  # "sqs", "sns", "s3" or "eventbridge"; None: a log sink
    arn: str = ""
    region: str = ""
    # spec.aws.auth.secret.ref.name: Knative's credentials secret. Kept for its manifests, not
    # used: the broker calls AWS as its delivery role (target_arn_patterns, docs/targets.md).
    auth_secret: str | None = None
    log: log_sink.LogSpec | None = None
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)

    @property
    def target(self) -> str:
        """Where its events go: the ARN, or the log sink's ``log:`` URI."""
        return self.log.uri() if self.log is not None else self.arn


def parse_integration_sink(
    namespace: str, body: object, *, path_name: str | None
) -> IntegrationSink:
    """Validate an IntegrationSink body; raises ValidationError naming every problem."""
    problems: list[Problem] = []
    name, labels, annotations, spec = meta.envelope(
        namespace, body, API_VERSION, KIND, path_name, problems
    )
    _unknown_fields(spec, ("aws", "log"), "spec", problems)
    aws = _object(spec.get("aws"), "spec.aws", problems)
    _unknown_fields(aws, (*AWS_SINKS, "auth"), "spec.aws", problems)
    chosen = [f"spec.aws.{k}" for k in AWS_SINKS if aws.get(k) is not None]
    chosen += ["spec.log"] if spec.get("log") is not None else []
    if len(chosen) != 1:
        said = "none is" if not chosen else f"{', '.join(chosen)} are"
        problems.append(
            Problem(
                "spec",
                "must set exactly one sink: aws.sqs, aws.sns, aws.s3, aws.eventbridge or log "
                f"({said} set)",
            )
        )
    kind = next((k for k in AWS_SINKS if aws.get(k) is not None), None)
    arn, region = _aws_target(aws, kind, problems) if kind else ("", "")
    auth = _auth(aws.get("auth"), problems)
    log = _log(spec.get("log"), problems) if spec.get("log") is not None else None
    if problems:
        raise ValidationError(problems)
    return IntegrationSink(
        namespace=namespace,
        name=name,
        aws=kind if log is None else None,
        arn=arn,
        region=region,
        auth_secret=auth,
        log=log,
        labels=labels,
        annotations=annotations,
    )


def _aws_target(aws: Mapping[str, Any], kind: str, problems: list[Problem]) -> tuple[str, str]:
    path = f"spec.aws.{kind}"
    raw = _object(aws.get(kind), path, problems)
    _unknown_fields(raw, ("arn", "region"), path, problems)
    arn, region = raw.get("arn"), raw.get("region")
    if not isinstance(region, str) or not _REGION.fullmatch(region):
        problems.append(Problem(f"{path}.region", "is required: an AWS region such as us-east-1"))
        region = None
    if not isinstance(arn, str) or not arn:
        problems.append(Problem(f"{path}.arn", f"is required: the ARN of the {kind} target"))
        return "", region or ""
    found = arn_problems(arn, f"{path}.arn")
    target = parse_arn(arn)
    if target is not None and target.service != AWS_SINKS[kind]:
        found.append(Problem(f"{path}.arn", f"{quote(arn)} is not the ARN of an {kind} target"))
    elif target is not None and region and target.region not in ("", region):
        found.append(
            Problem(f"{path}.region", f"must be the ARN's region ({quote(target.region)})")
        )
    problems += found
    return ("" if found else arn), region or ""


def _auth(value: object, problems: list[Problem]) -> str | None:
    if value is None:
        return None
    auth = _object(value, "spec.aws.auth", problems)
    _unknown_fields(auth, ("secret",), "spec.aws.auth", problems)
    secret = _object(auth.get("secret"), "spec.aws.auth.secret", problems)
    _unknown_fields(secret, ("ref",), "spec.aws.auth.secret", problems)
    ref = _object(secret.get("ref"), "spec.aws.auth.secret.ref", problems)
    _unknown_fields(ref, ("name",), "spec.aws.auth.secret.ref", problems)
    found = name_problems(ref.get("name"), "spec.aws.auth.secret.ref.name", what="secret name")
    problems += found
    return None if found else str(ref.get("name"))


def _log(value: object, problems: list[Problem]) -> log_sink.LogSpec:
    raw = _object(value, "spec.log", problems)
    _unknown_fields(raw, ("loggerName", "level", "marker", *_LOG_FLAGS), "spec.log", problems)
    default = log_sink.LogSpec()
    logger = raw.get("loggerName", default.logger_name)
    if not isinstance(logger, str) or not log_sink.LOGGER_NAME.fullmatch(logger):
        problems.append(
            Problem("spec.log.loggerName", "must be 1 to 128 of letters, digits, '.', '_', '-'")
        )
    level = meta.choice(
        raw.get("level", default.level), tuple(log_sink.LEVELS), "spec.log.level", problems
    )
    marker = raw.get("marker")
    if marker is not None and (
        not isinstance(marker, str) or not log_sink.MARKER.fullmatch(marker)
    ):
        problems.append(
            Problem("spec.log.marker", "must be 1 to 64 of letters, digits, '.', '_', '-'")
        )
    flags: dict[str, bool] = {}
    for flag in _LOG_FLAGS:
        given = raw.get(flag)
        if given is not None and not isinstance(given, bool):
            problems.append(Problem(f"spec.log.{flag}", "must be true or false"))
        flags[flag] = given if isinstance(given, bool) else flag == "showBody"
    return log_sink.LogSpec(
        logger_name=str(logger),
        level=level or default.level,
        show_headers=flags["showHeaders"],
        show_body=flags["showBody"],
        multiline=flags["multiline"],
        log_mask=flags["logMask"],
        marker=marker if isinstance(marker, str) else None,
    )


def admit_integration_sink(
    parsed: IntegrationSink, existing: IntegrationSink | None, *, uid: str, now: datetime
) -> IntegrationSink:
    return meta.admitted(parsed, existing, uid=uid, now=now, configuration=spec_json)


def spec_json(sink: IntegrationSink) -> dict[str, Any]:
    if sink.log is not None:
        log = sink.log
        out: dict[str, Any] = {
            "loggerName": log.logger_name,
            "level": log.level,
            "showHeaders": log.show_headers,
            "showBody": log.show_body,
            "multiline": log.multiline,
            "logMask": log.log_mask,
        }
        if log.marker is not None:
            out["marker"] = log.marker
        return {"log": out}
    assert sink.aws is not None
    aws: dict[str, Any] = {sink.aws: {"arn": sink.arn, "region": sink.region}}
    if sink.auth_secret is not None:
        aws["auth"] = {"secret": {"ref": {"name": sink.auth_secret}}}
    return {"aws": aws}


def integration_sink_status(
    sink: IntegrationSink,
    *,
    now: datetime,
    target_problem: tuple[str, str] | None = None,
    previous: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Addressable as soon as stored (its address is its target); TargetReachable unless the
    target's describe call said it does not exist or refuses the broker (``target_problem``:
    SubscriberNotFound, SubscriberNotAuthorized, as for an ARN subscriber)."""
    manager = SINK_CONDITIONS.manage(previous_conditions(previous), now)
    manager.mark_true(ADDRESSABLE)
    if target_problem is None:
        manager.mark_true(TARGET_REACHABLE)
    else:
        manager.mark_false(TARGET_REACHABLE, *target_problem)
    return {
        "observedGeneration": sink.generation,
        "address": {"url": sink.target},
        "conditions": manager.to_json(),
    }


def address_path(namespace: str, name: str) -> str:
    """The sink's own path in the API: a dead letter's knativeerrordest once it is deleted."""
    return f"/apis/{API_VERSION}/namespaces/{namespace}/{PLURAL}/{name}"


INTEGRATION_SINKS: ResourceKind[IntegrationSink] = ResourceKind(
    store_kind="integrationsink",
    api_version=API_VERSION,
    kind=KIND,
    plural=PLURAL,
    parse=lambda namespace, body, name: parse_integration_sink(namespace, body, path_name=name),
    admit=lambda parsed, old, uid, now: admit_integration_sink(parsed, old, uid=uid, now=now),
    spec_json=spec_json,
)
