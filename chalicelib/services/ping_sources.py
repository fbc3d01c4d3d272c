"""PingSources (docs/sources.md) as a resource kind of the generic service: each has one schedule
(services/schedules.py), created or replaced when it is saved, removed with it, and repaired by
the reconciler. Ready when its sink resolves (its broker exists, or a uri) and its schedule exists
as wanted."""

from __future__ import annotations

import logging
from typing import Any

from chalicelib.core.errors import BrokerError
from chalicelib.core.resources.ping_source import (
    SCHEDULE_OWNER,
    PingSource,
    ping_source_status,
    schedule_of,
)
from chalicelib.services.resources import Stored
from chalicelib.services.source_hooks import SourceHooks

log = logging.getLogger("broker.pingsources")


class PingSourceHooks(SourceHooks[PingSource]):
    def saved(self, stored: Stored[PingSource], existed: bool) -> Stored[PingSource]:
        state: dict[str, Any] = {"deployed": True, "message": ""}
        source = stored.resource
        try:
            self._scheduling.ensure(schedule_of(source))
        except BrokerError as exc:  # the reconciler tries again; the status says why meanwhile
            log.warning("pingsource %s/%s: schedule: %s", source.namespace, source.name, exc)
            state.update(deployed=False, message=f"Provisioning failed: {exc.detail}")
        return self.sources.with_state(stored, state)

    def removing(self, stored: Stored[PingSource]) -> dict[str, Any]:
        self._scheduling.remove(stored.resource.key)
        return {}

    def status(self, stored: Stored[PingSource]) -> dict[str, Any]:
        source = stored.resource
        deployed, message = self._deployed(stored)
        return ping_source_status(
            source,
            sink_uri=self._sink_uri(source),
            deployed=deployed,
            deploy_message=message,
            now=self._clock(),
            previous=stored.status,
        )

    def _deployed(self, stored: Stored[PingSource]) -> tuple[bool, str]:
        """Read from Scheduler each time (the reconciler may have repaired it since)."""
        try:
            if self._scheduling.deployed(schedule_of(stored.resource)):
                return True, ""
        except BrokerError as exc:
            return False, f"The schedule could not be read: {exc.detail}"
        why = str(stored.state.get("message") or "Its schedule is missing or differs")
        return False, f"{why}; the reconciler repairs it."

    def reconcile_all(self) -> list[str]:
        """The scheduled repair: every source's schedule as it should be, and the schedules of
        sources that no longer exist removed."""
        wanted = [schedule_of(s.resource) for s in self.sources.list()]
        done = self._scheduling.reconcile(SCHEDULE_OWNER, wanted)
        if done:
            log.warning("pingsource reconciler repaired drift: %s", "; ".join(done))
        return done
