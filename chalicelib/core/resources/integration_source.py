"""IntegrationSource (Knative's ``sources.knative.dev/v1alpha1``; docs/sources.md): events from a
timer or from an AWS service, to a Broker of its namespace or a URI. Parsing (every problem said),
admission, JSON and the status. Pure; the records' events are core/integration_records.py.

    spec.timer:          {period (ms), message, contentType?}
    spec.aws.sqs:        {arn, region?}   a queue's messages
    spec.aws.s3:         {arn, region?}   a bucket's object events
    spec.aws.ddbStreams: {table, region?} a table's stream records
    spec.sink:           ref to a Broker of the namespace, or uri

Exactly one of the four. ``region`` may be left out (the stage's region); when given with an ARN
that names one, the two must agree. Knative's ``aws.auth`` is refused: AWS access here is the
stage's role, narrowed by its allowed source ARN patterns.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from chalicelib.core import integration_records as records
from chalicelib.core import senders
from chalicelib.core.cloudevents.context_attributes import is_media_type
from chalicelib.core.cron import Rate
from chalicelib.core.errors import Problem, ValidationError
from chalicelib.core.names import quote
from chalicelib.core.resources import meta
from chalicelib.core.resources.fields import json_object as _object
from chalicelib.core.resources.fields import unknown_fields as _unknown
from chalicelib.core.resources.kind import ResourceKind
from chalicelib.core.resources.source_sink import SourceSink, parse_sink, source_status
from chalicelib.core.schedules import EventTemplate, Schedule, Sink

API_VERSION = "sources.knative.dev/v1alpha1"
KIND = "IntegrationSource"
PLURAL = "integrationsources"
MAX_PERIOD_MS = 31_536_000_000  # a year
SCHEDULE_OWNER = "integrationsource/"  # the key prefix of its timers' schedules
MAX_MESSAGE_CHARS = 65_536
MAX_CONTENT_TYPE_CHARS = 256
MAX_NAME_CHARS = 2_048
_REGION = re.compile(r"^[a-z]{2}(-[a-z]+)+-\d{1,2}$")
_SQS_ARN = re.compile(r"^arn:aws[a-z-]*:sqs:([a-z0-9-]+):(\d{12}):([A-Za-z0-9_-]{1,75}(\.fifo)?)$")
_S3_ARN = re.compile(r"^arn:aws[a-z-]*:s3:::([a-z0-9][a-z0-9.-]{1,61}[a-z0-9])$")
_TABLE = re.compile(r"^[A-Za-z0-9_.-]{3,255}$")


@dataclass(frozen=True, slots=True)
class Timer:
    period_ms: int
    message: str
    content_type: str | None = None


@dataclass(frozen=True, slots=True)
class AwsSource:
    """``connector``: records.SQS, records.S3 or records.DDB_STREAMS; ``resource``: the queue or
    bucket ARN, or the table's name."""

    connector: str
    resource: str
    region: str | None = None


@dataclass(frozen=True, slots=True)
class IntegrationSource:
    namespace: str
    name: str
    # Set at admission (meta.admitted); a parsed body has none yet.
    uid: str = field(default="", kw_only=True)
    generation: int = field(default=0, kw_only=True)
    creation_timestamp: str = field(default="", kw_only=True)
    sink: SourceSink
    timer: Timer | None = None
    aws: AwsSource | None = None
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)

    @property
    def connector(self) -> str:
        return self.aws.connector if self.aws is not None else records.TIMER

    @property
    def sender(self) -> str:
        """Who its events come from, for the broker's EventPolicies (core/senders.py)."""
        return senders.source(self.namespace, KIND, self.name)

    @property
    def target(self) -> Sink:
        return Sink(self.namespace, broker=self.sink.broker, uri=self.sink.uri)


_AWS_FIELDS = {"sqs": records.SQS, "s3": records.S3, "ddbStreams": records.DDB_STREAMS}


def parse_integration_source(
    namespace: str, body: object, *, path_name: str | None
) -> IntegrationSource:
    """Validate an IntegrationSource body; raises ValidationError naming every problem."""
    problems: list[Problem] = []
    name, labels, annotations, spec = meta.envelope(
        namespace, body, API_VERSION, KIND, path_name, problems
    )
    _unknown(spec, ("timer", "aws", "sink"), "spec", problems)
    timer = _timer(spec["timer"], problems) if "timer" in spec else None
    aws = _aws(spec["aws"], problems) if "aws" in spec else None
    if "timer" in spec and "aws" in spec:
        problems.append(Problem("spec", "set one of timer and aws, not both"))
    elif "timer" not in spec and "aws" not in spec:
        problems.append(Problem("spec", "needs one of timer, aws.sqs, aws.s3 or aws.ddbStreams"))
    sink = parse_sink(spec.get("sink"), namespace, problems)
    if problems:
        raise ValidationError(problems)
    return IntegrationSource(
        namespace, name, sink, timer, aws, labels=labels, annotations=annotations
    )


def _timer(value: object, problems: list[Problem]) -> Timer | None:
    raw = _object(value, "spec.timer", problems)
    _unknown(raw, ("period", "message", "contentType"), "spec.timer", problems)
    before = len(problems)
    period = raw.get("period")
    if (
        isinstance(period, bool)
        or not isinstance(period, int)
        or not 1000 <= period <= MAX_PERIOD_MS
        or period % 1000
    ):
        # Whole seconds: the schedule mechanism's unit (core/cron.Rate); a deployed stage narrows
        # it to whole minutes, EventBridge Scheduler's (services/schedules.schedule_problems).
        problems.append(
            Problem(
                "spec.timer.period",
                f"must be milliseconds in whole seconds, 1000 to {MAX_PERIOD_MS}",
            )
        )
    message = raw.get("message")
    if not isinstance(message, str) or len(message) > MAX_MESSAGE_CHARS:
        problems.append(
            Problem("spec.timer.message", f"must be a string of at most {MAX_MESSAGE_CHARS}")
        )
    content_type = raw.get("contentType")
    if content_type is not None and (
        not isinstance(content_type, str)
        or len(content_type) > MAX_CONTENT_TYPE_CHARS
        or not is_media_type(content_type)
    ):
        problems.append(Problem("spec.timer.contentType", "must be a media type"))
    if len(problems) > before:
        return None
    assert isinstance(period, int) and isinstance(message, str)
    return Timer(period, message, content_type or None)


def _aws(value: object, problems: list[Problem]) -> AwsSource | None:
    raw = _object(value, "spec.aws", problems)
    if "auth" in raw:
        problems.append(
            Problem(
                "spec.aws.auth",
                "is not used here: AWS access is the stage's role, within its allowed "
                "source ARN patterns (BROKER_SOURCE_ARN_PATTERNS); remove it",
            )
        )
    _unknown(raw, (*_AWS_FIELDS, "auth"), "spec.aws", problems)
    given = [key for key in _AWS_FIELDS if key in raw]
    if len(given) != 1:
        problems.append(Problem("spec.aws", "needs exactly one of sqs, s3 and ddbStreams"))
        return None
    key = given[0]
    path = f"spec.aws.{key}"
    source = _object(raw[key], path, problems)
    resource_field = "table" if key == "ddbStreams" else "arn"
    _unknown(source, (resource_field, "region"), path, problems)
    before = len(problems)
    region = source.get("region")
    if region is not None and (not isinstance(region, str) or not _REGION.fullmatch(region)):
        problems.append(Problem(f"{path}.region", f"{quote(region)} is not an AWS region"))
    resource = source.get(resource_field)
    arn_region = _resource_problems(key, resource, f"{path}.{resource_field}", problems)
    if arn_region and isinstance(region, str) and region != arn_region:
        problems.append(Problem(f"{path}.region", f"must be the ARN's region {arn_region!r}"))
    if len(problems) > before:
        return None
    return AwsSource(_AWS_FIELDS[key], str(resource), region or arn_region or None)


def _resource_problems(key: str, value: object, path: str, problems: list[Problem]) -> str:
    """The problems of the queue ARN, bucket ARN or table name; the ARN's region when it has one."""
    text = value if isinstance(value, str) and len(value) <= MAX_NAME_CHARS else None
    if key == "sqs":
        match = _SQS_ARN.fullmatch(text or "")
        if match is None:
            problems.append(Problem(path, "must be a queue ARN: arn:aws:sqs:REGION:ACCOUNT:NAME"))
            return ""
        return match.group(1)
    if key == "s3":
        if _S3_ARN.fullmatch(text or "") is None:
            problems.append(Problem(path, "must be a bucket ARN: arn:aws:s3:::BUCKET"))
        return ""
    if _TABLE.fullmatch(text or "") is None:
        problems.append(Problem(path, "must be a table name (3 to 255 of A-Z a-z 0-9 _ . -)"))
    return ""


def admit_integration_source(
    parsed: IntegrationSource, existing: IntegrationSource | None, *, uid: str, now: datetime
) -> IntegrationSource:
    return meta.admitted(parsed, existing, uid=uid, now=now, configuration=spec_json)


def spec_json(source: IntegrationSource) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if source.timer is not None:
        timer: dict[str, Any] = {"period": source.timer.period_ms, "message": source.timer.message}
        if source.timer.content_type is not None:
            timer["contentType"] = source.timer.content_type
        spec["timer"] = timer
    if source.aws is not None:
        key = next(k for k, v in _AWS_FIELDS.items() if v == source.aws.connector)
        resource_field = "table" if key == "ddbStreams" else "arn"
        aws: dict[str, Any] = {resource_field: source.aws.resource}
        if source.aws.region is not None:
            aws["region"] = source.aws.region
        spec["aws"] = {key: aws}
    spec["sink"] = source.sink.to_json()
    return spec


def schedule_of(source: IntegrationSource) -> Schedule:
    """A timer's schedule: every ``period``, its message as a timer event (records.TIMER)."""
    assert source.timer is not None
    timer = source.timer
    attributes = records.attributes(records.TIMER)
    del attributes["specversion"]  # the template adds it
    if timer.content_type is not None:
        attributes["datacontenttype"] = timer.content_type
    return Schedule(
        key=f"{SCHEDULE_OWNER}{source.namespace}/{source.name}",
        expression=Rate(timer.period_ms // 1000),
        template=EventTemplate(attributes, timer.message.encode()),
        sink=source.target,
        sender=source.sender,
    )


def integration_source_status(
    source: IntegrationSource,
    *,
    sink_uri: str | None,
    deployed: bool,
    deploy_reason: str,
    deploy_message: str,
    now: datetime,
    previous: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """``sink_uri``: where its events go, None when its broker does not exist;
    ``deployed``: its mapping, rule or schedule runs, else why not (a missing queue, a refusal)."""
    attributes = records.attributes(source.connector)
    return source_status(
        source.generation,
        source.sink,
        sink_uri=sink_uri,
        deployed=deployed,
        deploy_reason=deploy_reason,
        deploy_message=deploy_message,
        ce_attributes={"type": attributes["type"], "source": attributes["source"]},
        now=now,
        previous=previous,
    )


INTEGRATION_SOURCES: ResourceKind[IntegrationSource] = ResourceKind(
    store_kind="integrationsource",
    api_version=API_VERSION,
    kind=KIND,
    plural=PLURAL,
    parse=lambda namespace, body, name: parse_integration_source(namespace, body, path_name=name),
    admit=lambda parsed, old, uid, now: admit_integration_source(parsed, old, uid=uid, now=now),
    spec_json=spec_json,
)
