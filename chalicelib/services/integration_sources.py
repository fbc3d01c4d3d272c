"""IntegrationSources (docs/sources.md) as a resource kind of the generic service. A timer has one
schedule (services/schedules.py, fired through ``pings``); an AWS source has its plumbing
(``SourcePlumbing``: an event source mapping on the queue or the table's stream into ``sources``,
or the bucket's EventBridge rule), made when it is saved, removed with the last source that reads
it, and repaired by the reconciler. PUT refuses an ARN outside the stage's source_arn_patterns
(400 naming the setting) and, on a deployed stage, a period Scheduler cannot run. Ready when its
sink resolves and its plumbing was made; a missing queue, bucket or stream, or one that refuses
the role, is Ready=False with the reason."""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime
from typing import Any, Protocol

from chalicelib.config import Settings
from chalicelib.core.clock import utcnow
from chalicelib.core.delivery.aws_targets import allowed
from chalicelib.core.errors import (
    BrokerError,
    ForbiddenError,
    NotFoundError,
    Problem,
    ValidationError,
)
from chalicelib.core.names import quote
from chalicelib.core.resources.broker import Broker
from chalicelib.core.resources.integration_source import (
    SCHEDULE_OWNER,
    AwsSource,
    IntegrationSource,
    integration_source_status,
    schedule_of,
)
from chalicelib.services.resources import Resources, Stored
from chalicelib.services.schedules import Scheduling, schedule_problems
from chalicelib.services.source_hooks import SourceHooks

log = logging.getLogger("broker.integrationsources")
PATTERNS_SETTING = "source_arn_patterns"


class SourcePlumbing(Protocol):
    """What AWS runs an IntegrationSource's records on. Errors: NotFoundError (the queue, bucket,
    table or its stream does not exist), ForbiddenError (it refuses the role), UnavailableError."""

    def resource_arn(self, aws: AwsSource) -> str | None:
        """The ARN the stage's patterns are checked against (a table's: None while unknown)."""
        ...

    def ensure(self, aws: AwsSource) -> None:
        """Make the mapping or rule that reads ``aws`` into the sources function (idempotent)."""
        ...

    def remove(self, aws: AwsSource) -> None: ...


class IntegrationSourceHooks(SourceHooks[IntegrationSource]):
    def __init__(
        self,
        sources: Resources[IntegrationSource],
        brokers: Resources[Broker],
        scheduling: Scheduling,
        plumbing: SourcePlumbing,
        settings: Settings,
        clock: Callable[[], datetime] = utcnow,
    ) -> None:
        super().__init__(sources, brokers, scheduling, settings, clock)
        self._plumbing = plumbing

    def check(self, resource: IntegrationSource) -> None:
        problems: list[Problem] = []
        if resource.timer is not None and not self._settings.local_mode:
            # The local runtime fires any whole-seconds period; Scheduler only whole minutes.
            problems += schedule_problems(schedule_of(resource).expression, "spec.timer.period")
        if resource.aws is not None:
            arn = self._plumbing.resource_arn(resource.aws)
            if arn is not None and not allowed(arn, self._settings.source_arn_patterns):
                problems.append(_not_allowed(resource.aws, arn))
        if problems:
            raise ValidationError(problems)

    def saved(self, stored: Stored[IntegrationSource], existed: bool) -> Stored[IntegrationSource]:
        source = stored.resource
        state: dict[str, Any] = {"deployed": True, "reason": "", "message": ""}
        try:
            if source.timer is not None:
                self._scheduling.ensure(schedule_of(source))
            else:
                assert source.aws is not None
                self._plumbing.ensure(source.aws)
        except BrokerError as exc:  # the reconciler tries again; the status says why meanwhile
            log.warning("integrationsource %s/%s: %s", source.namespace, source.name, exc)
            state.update(deployed=False, reason=_reason(exc, source), message=exc.detail)
        return self.sources.with_state(stored, state)

    def removing(self, stored: Stored[IntegrationSource]) -> dict[str, Any]:
        source = stored.resource
        if source.timer is not None:
            self._scheduling.remove(schedule_of(source).key)
        elif source.aws is not None and not self._shared(stored):
            self._plumbing.remove(source.aws)
        return {}

    def status(self, stored: Stored[IntegrationSource]) -> dict[str, Any]:
        source = stored.resource
        return integration_source_status(
            source,
            sink_uri=self._sink_uri(source),
            deployed=bool(stored.state.get("deployed")),
            deploy_reason=str(stored.state.get("reason") or "NotDeployed"),
            deploy_message=str(stored.state.get("message") or "Not deployed yet"),
            now=self._clock(),
            previous=stored.status,
        )

    def reconcile_all(self) -> list[str]:
        """The scheduled repair: every timer's schedule and every AWS source's plumbing as it
        should be (a source once refused is tried again, its status updated), orphans removed."""
        stored = self.sources.list()
        wanted = [schedule_of(s.resource) for s in stored if s.resource.timer is not None]
        done = self._scheduling.reconcile(SCHEDULE_OWNER, wanted)
        for item in stored:
            if item.resource.aws is not None:
                was = item.state.get("deployed")
                now = self.saved(item, existed=True)
                if now.state.get("deployed") != was:
                    done.append(f"integrationsource {item.namespace}/{item.name} deployed")
        if done:
            log.warning("integrationsource reconciler: %s", "; ".join(done))
        return done

    def _shared(self, stored: Stored[IntegrationSource]) -> bool:
        """Whether another source reads the same queue, bucket or table."""
        aws = stored.resource.aws
        return any(
            other.resource.aws == aws
            for other in self.sources.list()
            if (other.namespace, other.name) != (stored.namespace, stored.name)
        )


def _reason(exc: BrokerError, source: IntegrationSource) -> str:
    what = {"aws-sqs": "Queue", "aws-s3": "Bucket", "aws-ddb-streams": "Stream"}
    noun = what.get(source.connector, "Schedule")
    if isinstance(exc, NotFoundError):
        return f"{noun}DoesNotExist"
    if isinstance(exc, ForbiddenError):
        return f"{noun}RefusesRole"
    return "ProvisioningFailed"


def _not_allowed(aws: AwsSource, arn: str) -> Problem:
    field = "table" if aws.connector == "aws-ddb-streams" else "arn"
    key = {"aws-sqs": "sqs", "aws-s3": "s3", "aws-ddb-streams": "ddbStreams"}[aws.connector]
    return Problem(
        f"spec.aws.{key}.{field}",
        f"{quote(arn)} is not among the ARNs this stage may read: add a pattern that matches it "
        f"to {PATTERNS_SETTING} of the stage in .chalice/config.json (docs/sources.md)",
    )
