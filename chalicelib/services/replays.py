"""Replays (docs/replay.md): the resource under its broker, its admission (the broker and named
triggers exist; at most ``rp.MAX_ACTIVE_PER_NAMESPACE`` unfinished replays in a namespace) and its
status from the runner's state. The runner is replay_runner.py (reading: replay_reading.py,
messages: replay_packing.py).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from chalicelib.core.clock import utcnow
from chalicelib.core.errors import ConflictError, NotFoundError, Problem, ValidationError
from chalicelib.core.names import name_problems
from chalicelib.core.resources import replay as rp
from chalicelib.core.resources.broker import Broker
from chalicelib.core.resources.trigger import Trigger
from chalicelib.services.resources import Hooks, Resources, ResourceService, Stored


class ReplayHooks(Hooks[rp.Replay]):
    """A replay's status from the runner's state, and admission: its broker and named triggers
    exist, and (when it is created) its namespace is within its quota of unfinished replays."""

    def __init__(
        self,
        replays: Resources[rp.Replay],
        brokers: Resources[Broker],
        triggers: Resources[Trigger],
        clock: Callable[[], datetime] = utcnow,
        notify: Callable[[], None] = lambda: None,
    ) -> None:
        self.replays = replays
        self._brokers = brokers
        self._triggers = triggers
        self._clock = clock
        self._notify = notify  # a runner in this process (local mode) starts at once

    def saved(self, stored: Stored[rp.Replay], existed: bool) -> Stored[rp.Replay]:
        if not existed:
            self._notify()
        return stored

    def initial_state(self, now: datetime) -> dict[str, Any]:
        return {"phase": rp.PENDING}

    def check(self, resource: rp.Replay) -> None:
        if self._brokers.get(resource.namespace, resource.broker) is None:
            raise NotFoundError(f'broker "{resource.namespace}/{resource.broker}" does not exist')
        missing = self._missing(resource)
        if missing:
            raise ValidationError(
                [
                    Problem(
                        f"spec.triggers[{resource.triggers.index(t)}]",
                        f'broker "{resource.broker}" has no trigger "{t}"',
                    )
                    for t in missing
                ]
            )
        if self.replays.get(resource.namespace, resource.name) is None:
            self._check_quota(resource.namespace)

    def _check_quota(self, namespace: str) -> None:
        """A new replay is refused (409) while its namespace has ``MAX_ACTIVE_PER_NAMESPACE``
        unfinished ones: a namespace cannot queue up work that holds the runner from the others
        (it also runs them round-robin across namespaces: replay_runner.py)."""
        active = sum(1 for s in self.replays.list(namespace) if not rp.is_finished(s.state))
        if active >= rp.MAX_ACTIVE_PER_NAMESPACE:
            raise ConflictError(
                f'namespace "{namespace}" has {active} unfinished replays, the most it may have '
                f"({rp.MAX_ACTIVE_PER_NAMESPACE}); create this one when one of them has "
                "succeeded, failed or been cancelled (deleted)"
            )

    def status(self, stored: Stored[rp.Replay]) -> dict[str, Any]:
        replay = stored.resource
        finished = rp.is_finished(stored.state)
        return rp.replay_status(
            replay,
            stored.state,
            broker_exists=finished
            or self._brokers.get(replay.namespace, replay.broker) is not None,
            missing_triggers=() if finished else self._missing(replay),
            now=self._clock(),
            previous=stored.status,
        )

    def _missing(self, replay: rp.Replay) -> tuple[str, ...]:
        if not replay.triggers:
            return ()
        have = {
            s.resource.name
            for s in self._triggers.list(replay.namespace)
            if s.resource.broker == replay.broker
        }
        return tuple(t for t in replay.triggers if t not in have)


class ReplayService:
    """The generic resource service for replays, addressed under their broker."""

    def __init__(self, service: ResourceService[rp.Replay]) -> None:
        self.service = service

    def list(self, namespace: str, broker: str) -> dict[str, Any]:
        _check_names(broker)
        doc = self.service.list(namespace)
        doc["items"] = [i for i in doc["items"] if i["metadata"].get("broker") == broker]
        return doc

    def get(self, namespace: str, broker: str, name: str) -> dict[str, Any]:
        _check_names(broker, name)
        return self.service.get(namespace, rp.store_name(broker, name))

    def put(
        self, namespace: str, broker: str, name: str, body: Any, dry_run: bool = False
    ) -> tuple[dict[str, Any], bool]:
        return self.service.put(namespace, rp.store_name(broker, name), body, dry_run)

    def delete(self, namespace: str, broker: str, name: str) -> dict[str, Any]:
        """Cancels: the runner stops at its next checkpoint."""
        _check_names(broker, name)
        doc = self.service.delete(namespace, rp.store_name(broker, name))
        doc["details"]["name"] = name
        return doc


def _check_names(broker: str, name: str | None = None) -> None:
    problems = name_problems(broker, "path.broker", what="broker name")
    if name is not None:
        problems += name_problems(name, "path.name")
    if problems:
        raise ValidationError(problems)
