"""IntegrationSinks (docs/targets.md) as a resource kind of the generic service: nothing to
provision (the delivery function calls the target itself), so the hooks check the ARN against the
stage's target_arn_patterns, give the status (the target's describe call says whether it is
reachable, as for an ARN subscriber), and make every broker's routes read again, since a
trigger's route carries the target of the sink it names."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from chalicelib.config import Settings
from chalicelib.core.clock import utcnow
from chalicelib.core.resources.integration_sink import IntegrationSink, integration_sink_status
from chalicelib.services.control_plane import check_destinations
from chalicelib.services.resources import Hooks, Stored
from chalicelib.services.routing import ConfigCache
from chalicelib.services.target_checks import TargetChecks


class IntegrationSinkHooks(Hooks[IntegrationSink]):
    def __init__(
        self,
        cache: ConfigCache,
        settings: Settings,
        target_checks: TargetChecks | None = None,
        clock: Callable[[], datetime] = utcnow,
    ) -> None:
        self._cache = cache
        self._settings = settings
        self._target_checks = target_checks
        self._clock = clock

    def check(self, resource: IntegrationSink) -> None:
        if resource.aws is not None:
            check_destinations(self._settings, [(f"spec.aws.{resource.aws}.arn", resource.arn)])

    def status(self, stored: Stored[IntegrationSink]) -> dict[str, Any]:
        sink = stored.resource
        checks = self._target_checks
        return integration_sink_status(
            sink,
            now=self._clock(),
            target_problem=checks.problem(sink.target) if checks is not None else None,
            previous=stored.status,
        )

    def saved(self, stored: Stored[IntegrationSink], existed: bool) -> Stored[IntegrationSink]:
        # This container's routes see the change at once; others within the cache TTL (the
        # store's epoch moves with every write of a routing kind).
        self._cache.invalidate()
        return stored

    def removed(self, stored: Stored[IntegrationSink]) -> None:
        self._cache.invalidate()
