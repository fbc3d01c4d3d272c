"""IntegrationSources' plumbing on AWS (services/integration_sources.SourcePlumbing): an event
source mapping on an SQS queue or a DynamoDB table's stream into the ``sources`` function, with
partial batch failures; for a bucket, its notifications to EventBridge turned on and one rule of
ours sending its object events to the same function, which EventBridge may invoke for that rule
only (a permission named as the rule; docs/sources.md says why EventBridge)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from typing import Any

from chalicelib.adapters.aws_clients import AwsClients
from chalicelib.adapters.aws_errors import error_code, translated
from chalicelib.core import integration_records as records
from chalicelib.core.errors import ForbiddenError, NotFoundError, UnavailableError
from chalicelib.core.resources.integration_source import AwsSource

BATCH_SIZE = 10
PARTIAL = ["ReportBatchItemFailures"]
S3_EVENTS = ["Object Created"]
_REFUSED = {"AccessDenied", "AccessDeniedException", "AuthorizationError"}


class AwsSourcePlumbing:
    def __init__(self, clients: AwsClients, function_name: str, rule_prefix: str) -> None:
        self._clients = clients
        self._function = function_name
        self._rule_prefix = rule_prefix

    def _client(self, service: str) -> Any:
        return self._clients.client(service)

    def resource_arn(self, aws: AwsSource) -> str | None:
        if aws.connector != records.DDB_STREAMS:
            return aws.resource
        try:
            return self._table(aws)["TableArn"]  # type: ignore[no-any-return]
        except NotFoundError:
            return None  # the status says it is missing; the check runs again on each PUT

    def ensure(self, aws: AwsSource) -> None:
        if aws.connector == records.S3:
            self._ensure_rule(aws)
            return
        arn = self._queue_arn(aws) if aws.connector == records.SQS else self._stream_arn(aws)
        if any(m.get("EventSourceArn") == arn for m in self._mappings()):
            return
        request: dict[str, Any] = {
            "EventSourceArn": arn,
            "FunctionName": self._function,
            "BatchSize": BATCH_SIZE,
            "FunctionResponseTypes": PARTIAL,
        }
        if aws.connector == records.DDB_STREAMS:
            request["StartingPosition"] = "LATEST"
        try:
            with _refusals(f"create mapping {arn} -> {self._function}"):
                self._client("lambda").create_event_source_mapping(**request)
        except NotFoundError as exc:  # the queue or stream was found: it is our function
            raise UnavailableError(f"{exc.detail} (the function {self._function})") from exc

    def remove(self, aws: AwsSource) -> None:
        if aws.connector == records.S3:
            events = self._client("events")
            name = self._rule_name(aws)
            with _refusals(f"remove rule {name}"):
                try:
                    events.remove_targets(Rule=name, Ids=["sources"])
                    events.delete_rule(Name=name)
                except events.exceptions.ResourceNotFoundException:
                    pass  # already gone
            lam = self._client("lambda")
            gone = lam.exceptions.ResourceNotFoundException  # already removed
            with _refusals(f"remove permission {name} of {self._function}"), suppress(gone):
                lam.remove_permission(FunctionName=self._function, StatementId=name)
            return
        try:
            arn = self._queue_arn(aws) if aws.connector == records.SQS else self._stream_arn(aws)
        except NotFoundError:
            arn = None  # the queue or table went first: find its mapping by what it names
        for mapping in self._mappings():
            source = str(mapping.get("EventSourceArn", ""))
            if source == arn or (arn is None and _names(source, aws)):
                with _refusals(f"delete mapping {mapping['UUID']}"):
                    self._client("lambda").delete_event_source_mapping(UUID=mapping["UUID"])

    def _mappings(self) -> Iterator[dict[str, Any]]:
        kwargs: dict[str, Any] = {"FunctionName": self._function}
        with _refusals(f"list mappings of {self._function}"):
            while True:
                out = self._client("lambda").list_event_source_mappings(**kwargs)
                yield from (
                    m for m in out.get("EventSourceMappings", []) if m.get("State") != "Deleting"
                )
                if not out.get("NextMarker"):
                    return
                kwargs["Marker"] = out["NextMarker"]

    def _queue_arn(self, aws: AwsSource) -> str:
        _, _, _, _, account, name = aws.resource.split(":", 5)
        with _refusals(f"queue {aws.resource}"):
            self._client("sqs").get_queue_url(QueueName=name, QueueOwnerAWSAccountId=account)
        return aws.resource

    def _table(self, aws: AwsSource) -> dict[str, Any]:
        with _refusals(f"table {aws.resource}"):
            out = self._client("dynamodb").describe_table(TableName=aws.resource)
        return dict(out["Table"])

    def _stream_arn(self, aws: AwsSource) -> str:
        table = self._table(aws)
        arn, spec = table.get("LatestStreamArn"), table.get("StreamSpecification") or {}
        if not arn or not spec.get("StreamEnabled"):
            raise NotFoundError(f"table {aws.resource} has no stream: enable its stream")
        return str(arn)

    def _rule_name(self, aws: AwsSource) -> str:
        digest = hashlib.sha256(aws.resource.encode()).hexdigest()[:16]
        return f"{self._rule_prefix}s3-{digest}"

    def _ensure_rule(self, aws: AwsSource) -> None:
        bucket = aws.resource.rsplit(":", 1)[-1]
        s3 = self._client("s3")
        with _refusals(f"bucket {bucket} notifications"):
            config = s3.get_bucket_notification_configuration(Bucket=bucket)
            config.pop("ResponseMetadata", None)
            if "EventBridgeConfiguration" not in config:
                config["EventBridgeConfiguration"] = {}
                s3.put_bucket_notification_configuration(
                    Bucket=bucket, NotificationConfiguration=config
                )
        pattern = {
            "source": ["aws.s3"],
            "detail-type": S3_EVENTS,
            "detail": {"bucket": {"name": [bucket]}},
        }
        name = self._rule_name(aws)
        events = self._client("events")
        lam = self._client("lambda")
        with _refusals(f"rule {name}"):
            function = lam.get_function(FunctionName=self._function)
            rule = events.put_rule(Name=name, EventPattern=json.dumps(pattern), State="ENABLED")
            # EventBridge may invoke the function for this rule only; the statement id is the
            # rule's name, so a conflict is the grant of an earlier PUT.
            with suppress(lam.exceptions.ResourceConflictException):
                lam.add_permission(
                    FunctionName=self._function,
                    StatementId=name,
                    Action="lambda:InvokeFunction",
                    Principal="events.amazonaws.com",
                    SourceArn=rule["RuleArn"],
                )
            events.put_targets(
                Rule=name,
                Targets=[{"Id": "sources", "Arn": function["Configuration"]["FunctionArn"]}],
            )


def _names(source_arn: str, aws: AwsSource) -> bool:
    if aws.connector == records.SQS:
        return source_arn == aws.resource
    return f":table/{aws.resource}/stream/" in source_arn


@contextmanager
def _refusals(what: str) -> Iterator[None]:
    """``translated``, with a refusal of the role as ForbiddenError (Ready=False saying so)."""
    from botocore.exceptions import ClientError

    try:
        with translated(what):
            yield
    except (NotFoundError, ForbiddenError):
        raise
    except Exception as exc:
        cause = exc.__cause__
        if isinstance(cause, ClientError) and error_code(cause) in _REFUSED:
            raise ForbiddenError(f"{what}: refuses the role ({error_code(cause)})", "aws") from exc
        raise
