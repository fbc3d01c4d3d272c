"""AWS targets (docs/targets.md): a subscriber, dead-letter sink or EventTransform sink given as
an ARN instead of a URL. Pure parts: reading and checking an ARN, the stage's allowed ARN patterns,
what an AWS error means for a delivery, and Step Functions execution names."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase

from chalicelib.core.delivery.outcomes import Outcome
from chalicelib.core.errors import Problem
from chalicelib.core.names import quote

# The ARN forms a target may take: service -> (resource pattern, what it is, the example).
_RESOURCES: dict[str, tuple[re.Pattern[str], str]] = {
    "lambda": (
        re.compile(r"function:[A-Za-z0-9_-]{1,64}(:(\$LATEST|[A-Za-z0-9_-]{1,128}))?"),
        "function:NAME[:QUALIFIER]",
    ),
    "sqs": (re.compile(r"[A-Za-z0-9_-]{1,75}(\.fifo)?"), "QUEUE"),
    "sns": (re.compile(r"[A-Za-z0-9_-]{1,256}(\.fifo)?"), "TOPIC"),
    "states": (re.compile(r"stateMachine:[A-Za-z0-9_-]{1,80}"), "stateMachine:NAME"),
    "events": (re.compile(r"event-bus/[A-Za-z0-9._/-]{1,256}"), "event-bus/NAME"),
    "kinesis": (re.compile(r"stream/[A-Za-z0-9_.-]{1,128}"), "stream/NAME"),
    "firehose": (re.compile(r"deliverystream/[A-Za-z0-9_.-]{1,64}"), "deliverystream/NAME"),
    # A bucket's ARN names neither region nor account (bucket names are global): arn:aws:s3:::B
    "s3": (re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]"), "BUCKET (arn:aws:s3:::BUCKET)"),
}
_GLOBAL = frozenset({"s3"})  # services whose ARNs have an empty region and account
SERVICES = tuple(_RESOURCES)
_ARN = re.compile(
    r"arn:(?P<partition>aws|aws-cn|aws-us-gov):(?P<service>[a-z0-9-]+):"
    r"(?P<region>[a-z]{2}(-[a-z]+)+-[0-9]|):(?P<account>[0-9]{12}|):(?P<resource>.+)"
)
MAX_ARN_CHARS = 512
# The stage setting that lists the ARNs a trigger may deliver to (.chalice/config.json).
PATTERNS_SETTING = "target_arn_patterns"


@dataclass(frozen=True, slots=True)
class TargetArn:
    arn: str
    partition: str
    service: str  # one of SERVICES
    region: str  # "" for S3, whose bucket ARNs name none
    account: str  # "" for S3
    resource: str  # what follows the account: "function:f", "queue-name", "stream/s", ...

    @property
    def name(self) -> str:
        """The function, queue, topic, state machine, bus, stream or delivery stream's name."""
        if self.service == "lambda":
            return self.resource.split(":")[1]
        if self.service in ("sqs", "sns", "s3"):
            return self.resource
        return self.resource.split("/", 1)[-1] if "/" in self.resource else self.resource[13:]

    @property
    def fifo(self) -> bool:
        return self.service in ("sqs", "sns") and self.resource.endswith(".fifo")


def is_arn(uri: str) -> bool:
    return uri[:4].lower() == "arn:"


def is_target(uri: str) -> bool:
    """Whether the send pass hands ``uri`` to services/delivery_aws.py: an ARN, or the ``log:``
    address of an IntegrationSink's log sink (core/delivery/log_sink.py)."""
    return is_arn(uri) or uri[:4] == "log:"


def parse_arn(uri: str) -> TargetArn | None:
    """The target a valid ARN names; None for anything else."""
    if len(uri) > MAX_ARN_CHARS:
        return None
    found = _ARN.fullmatch(uri)
    if found is None:
        return None
    service, resource = found["service"], found["resource"]
    form = _RESOURCES.get(service)
    if form is None or not form[0].fullmatch(resource):
        return None
    named = (bool(found["region"]), bool(found["account"]))
    if named != ((False, False) if service in _GLOBAL else (True, True)):
        return None
    return TargetArn(uri, found["partition"], service, found["region"], found["account"], resource)


def arn_problems(value: str, path: str) -> list[Problem]:
    """Problems with ``value`` (an ``arn:`` URI) as a target: a whole ARN of a service the broker
    delivers to, with its region, account and resource."""
    if parse_arn(value) is not None:
        return []
    found = _ARN.fullmatch(value) if len(value) <= MAX_ARN_CHARS else None
    if found is not None and found["service"] in _GLOBAL and (found["region"] or found["account"]):
        return [
            Problem(
                path,
                f"{quote(value)} names a region or account, which a bucket's ARN does not: "
                "arn:aws:s3:::BUCKET",
            )
        ]
    if (
        found is not None
        and found["service"] not in _GLOBAL
        and not (found["region"] and found["account"])
    ):
        found = None  # said below: the form with its region and account
    if found is not None and found["service"] in _RESOURCES:
        form = _RESOURCES[found["service"]][1]
        return [
            Problem(
                path,
                f"{quote(value)} is not a valid {found['service']} target: the resource must be "
                f"{form}",
            )
        ]
    services = ", ".join(SERVICES)
    return [
        Problem(
            path,
            f"{quote(value)} must be an http(s) URL or the ARN of a target "
            f"(arn:aws:SERVICE:REGION:ACCOUNT:RESOURCE, SERVICE one of {services})",
        )
    ]


def allowed(arn: str, patterns: Sequence[str]) -> bool:
    """Whether ``arn`` matches one of the stage's patterns (IAM's wildcards: ``*`` any run of
    characters, ``?`` one character; ``[`` is literal, as IAM reads it)."""
    escaped = arn.replace("[", "[[]")
    return any(fnmatchcase(escaped, pattern.replace("[", "[[]")) for pattern in patterns)


def not_allowed_problem(arn: str, path: str) -> Problem:
    return Problem(
        path,
        f"{quote(arn)} is not among the ARNs this stage may deliver to: add a pattern that "
        f"matches it to {PATTERNS_SETTING} of the stage in .chalice/config.json (docs/targets.md)",
    )


# ---- what an AWS answer means --------------------------------------------------------------------

_ACCESS_DENIED = frozenset(
    {
        "AccessDenied",
        "AccessDeniedException",
        "AuthorizationError",  # SNS
        "AuthorizationErrorException",
        "KMSAccessDeniedException",
        "KMS.AccessDeniedException",
        "UnrecognizedClientException",
        "InvalidClientTokenId",
    }
)
_NOT_FOUND = frozenset(
    {
        "ResourceNotFoundException",
        "AWS.SimpleQueueService.NonExistentQueue",
        "QueueDoesNotExist",
        "NotFound",
        "NotFoundException",
        "StateMachineDoesNotExist",
        "StateMachineDeleting",
        "NoSuchBucket",
    }
)
_THROTTLED = frozenset(
    {
        "Throttling",
        "ThrottlingException",
        "ThrottledException",
        "TooManyRequestsException",
        "RequestLimitExceeded",
        "ProvisionedThroughputExceededException",
        "LimitExceededException",
        "KMSThrottlingException",
        "RequestThrottled",
        "ServiceUnavailable",
        "ServiceUnavailableException",
        "EC2ThrottledException",
        "ResourceConflictException",  # Lambda: the function is being updated (Pending)
        "ResourceNotReadyException",
        "ExecutionLimitExceeded",
    }
)
# Step Functions: a retry whose execution already started. Same name and same input: the first
# attempt's execution is this event's (StartExecution is idempotent then); it is a success.
EXECUTION_EXISTS = "ExecutionAlreadyExists"
FUNCTION_ERROR = "FunctionError"  # a Lambda function that raised: Knative retries a 5xx too
TIMEOUT = "Timeout"  # the call was not answered in the attempt's time; sent or not, unknown


@dataclass(frozen=True, slots=True)
class Verdict:
    outcome: Outcome
    status: int | None  # what the archive, the metrics and knativeerrorcode record


def classify_error(code: str, http_status: int | None) -> Verdict:
    """An AWS error's outcome: access denied, not found and validation dead-letter at once (403,
    404, 400: another try cannot succeed); throttling, a server error, a timeout and a function
    that raised are retried."""
    if code in _ACCESS_DENIED or http_status == 403:
        return Verdict(Outcome.DEAD_LETTER, 403)
    if code in _NOT_FOUND or http_status == 404:
        return Verdict(Outcome.DEAD_LETTER, 404)
    if code == TIMEOUT or http_status is None:
        return Verdict(Outcome.RETRY, None)
    if code == FUNCTION_ERROR:
        return Verdict(Outcome.RETRY, 502)
    if code in _THROTTLED or http_status == 429:
        return Verdict(Outcome.RETRY, 429)
    if http_status >= 500:
        return Verdict(Outcome.RETRY, http_status)
    # Any other 4xx: the request is what the service refuses (validation, a message too large, a
    # FIFO topic without a group id): the same request fails the same way.
    return Verdict(Outcome.DEAD_LETTER, 400)


# ---- Step Functions execution names --------------------------------------------------------------

_NAME_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")
MAX_EXECUTION_NAME = 80


def execution_name(source: str, event_id: str) -> str:
    """The execution name of one event: the same for every attempt (so that a retry finds the
    first attempt's execution instead of starting a second), within Step Functions' 80 characters
    of letters, digits, ``-`` and ``_``. A readable prefix of the id, then a hash of source and
    id (events are unique by the pair)."""
    digest = hashlib.sha256(f"{len(source)}:{source}{event_id}".encode()).hexdigest()[:40]
    readable = _NAME_UNSAFE.sub("_", event_id)[: MAX_EXECUTION_NAME - len(digest) - 1]
    return f"{readable}-{digest}" if readable else digest


# ---- S3 object keys ------------------------------------------------------------------------------

_ARRIVAL = re.compile(r"(\d{4})-(\d{2})-(\d{2})T(\d{2})")


def object_key(source: str, event_id: str, arrival: str | None) -> str:
    """The key of one event's object in an S3 target: ``YYYY/MM/DD/HH/<hash>.json``, the hour it
    arrived at the broker (``knativearrivaltime``, else ``undated/``) and a hash of source and id,
    so that every attempt writes the same object (a retry overwrites it with the same bytes)."""
    digest = hashlib.sha256(f"{len(source)}:{source}{event_id}".encode()).hexdigest()
    found = _ARRIVAL.match(arrival or "")
    prefix = "/".join(found.groups()) if found else "undated"
    return f"{prefix}/{digest}.json"
