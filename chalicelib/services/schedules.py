"""Sources that fire on a schedule (docs/sources.md): PingSource's cron, IntegrationSource's
timer. One mechanism for both; how to use it from a kind's ``Hooks``:

    from chalicelib.core import cron, senders
    from chalicelib.core.schedules import EventTemplate, Schedule, Sink

    expression, problems = cron.parse_cron(spec_schedule, spec_timezone, "spec.schedule",
                                           "spec.timezone")        # at parse: 400 with the why
    # or cron.Rate(seconds); schedule_problems(expression, path) says what Scheduler cannot run
    schedule = Schedule(
        key=f"pingsource/{ns}/{name}",          # unique per resource; its kind word first
        expression=expression,
        template=EventTemplate({"type": ..., "source": ...}, data),   # no id, no time
        sink=Sink(ns, broker="default"),        # or Sink(ns, uri="https://...")
        sender=senders.source(ns, "PingSource", name),  # the EventPolicy identity
    )
    scheduling.ensure(schedule)     # Hooks.saved: created, or replaced when it differs
    scheduling.deployed(schedule)   # Hooks.status: True when it exists as wanted
    scheduling.remove(key)          # Hooks.removing
    scheduling.reconcile("pingsource/", wanted)  # the reconciler: the owner's others removed

Deployed, each schedule is one EventBridge Scheduler schedule (adapters/scheduler_schedules.py)
whose target is the ``pings`` function (app.py), invoked with ``Schedule.input()``: the template
and sink, and the scheduled time Scheduler substitutes. ``Pings.handle`` stamps a fresh id and
that time, then stores the event through ingress's own path (a broker sink, with the sender) or
POSTs it in binary mode through the HTTP sender and its address guard (a uri sink). Locally
brokerctl/local_schedules.py reads the same schedules from the embedded endpoint and invokes the
same function when they are due.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Iterable
from typing import Any

from chalicelib.core.cloudevents import codec
from chalicelib.core.cloudevents.event import CloudEvent
from chalicelib.core.cron import Expression, Rate
from chalicelib.core.delivery.outcomes import Outcome
from chalicelib.core.delivery.policy import classify
from chalicelib.core.errors import BrokerError, ForbiddenError, Problem, UnavailableError
from chalicelib.core.schedules import (
    EventTemplate,
    Firing,
    Schedule,
    Sink,
    owner_prefix,
    read_firing,
    schedule_name,
)
from chalicelib.ports import DeployedSchedule, HttpSender, Schedules
from chalicelib.services.ingress import Ingress
from chalicelib.services.metrics import Metrics
from chalicelib.services.routing import ConfigCache

log = logging.getLogger("broker.pings")

# A uri sink's POST: attempts and the backoff between them (Knative's PingSource retries five
# times from 50 ms, all within a minute); then the invocation fails and Lambda retries it.
POST_ATTEMPTS = 3
POST_BACKOFF_SECONDS = 0.05
POST_TIMEOUT_SECONDS = 10.0
FAILURE_METRIC = "source_failure_count"


def schedule_problems(expression: Expression, path: str) -> list[Problem]:
    """What EventBridge Scheduler cannot run of ``expression`` (a 400 at PUT, locally too)."""
    try:
        expression.scheduler()
    except ValueError as exc:
        return [Problem(path, str(exc))]
    return []


class Scheduling:
    """The stage's schedules through the ``Schedules`` port, named from their keys."""

    def __init__(self, schedules: Schedules, prefix: str, *, seconds: bool = False) -> None:
        """``seconds``: write rates that are no whole minutes as ``rate(N seconds)``, for the
        local runtime (brokerctl/local_schedules.py) to fire; Scheduler refuses them, so a
        deployed stage refuses such a period at PUT (``schedule_problems``)."""
        self._schedules = schedules
        self._prefix = prefix
        self._seconds = seconds

    def name(self, key: str) -> str:
        return schedule_name(self._prefix, key)

    def ensure(self, schedule: Schedule) -> bool:
        """Make the deployed schedule what ``schedule`` says; True when it had to change."""
        wanted = self._deployed_form(schedule)
        if self._schedules.get(wanted.name) == wanted:
            return False
        self._schedules.put(wanted)
        return True

    def deployed(self, schedule: Schedule) -> bool:
        """Whether the schedule exists as ``schedule`` says."""
        wanted = self._deployed_form(schedule)
        return self._schedules.get(wanted.name) == wanted

    def remove(self, key: str) -> None:
        self._schedules.delete(self.name(key))

    def reconcile(self, owner: str, wanted: Iterable[Schedule]) -> list[str]:
        """The scheduled repair for one owner (the key prefix of its kind, ``pingsource/``):
        each wanted schedule as it should be, the owner's others removed. What was done."""
        done: list[str] = []
        keep: set[str] = set()
        for schedule in wanted:
            keep.add(self.name(schedule.key))
            try:
                if self.ensure(schedule):
                    done.append(f"put schedule {self.name(schedule.key)}")
            except BrokerError as exc:  # the next run tries again; the others go on
                log.warning("schedule %s: %s", schedule.key, exc.detail)
        for name in self._schedules.names(owner_prefix(self._prefix, owner)):
            if name not in keep:
                self._schedules.delete(name)
                done.append(f"delete schedule {name}")
        return done

    def _deployed_form(self, schedule: Schedule) -> DeployedSchedule:
        given = schedule.expression
        if isinstance(given, Rate):
            expression, timezone = given.scheduler(seconds=self._seconds)
        else:
            expression, timezone = given.scheduler()
        return DeployedSchedule(self.name(schedule.key), expression, timezone, schedule.input())


class Pings:
    """The ``pings`` function: one schedule's firing becomes one event at its sink."""

    def __init__(
        self,
        cache: ConfigCache,
        ingress: Ingress,
        sender: HttpSender,
        metrics: Metrics,
        ids: Callable[[], str] = lambda: str(uuid.uuid4()),
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._cache = cache
        self._ingress = ingress
        self._sender = sender
        self._metrics = metrics
        self._ids = ids
        self._sleep = sleep

    def handle(self, event: Any, context: Any = None) -> dict[str, Any]:
        """Send the event of one firing. Raises what a retry may cure (the invocation fails and
        Lambda retries it); what it cannot is counted in ``source_failure_count``, logged, and
        answered ``{"sent": false}``."""
        try:
            firing = read_firing(event)
        except ValueError as exc:
            log.error("pings: an input no schedule of ours makes: %s", exc)
            self._metrics.count(FAILURE_METRIC, {"namespace": "unknown", "reason": "input"})
            self._metrics.flush()
            return {"sent": False, "reason": str(exc)}
        cloud_event = firing.event(self._ids())
        try:
            reason = self._send(firing, cloud_event)
        except UnavailableError as exc:
            self._failed(firing, cloud_event.id, "unavailable", f"{exc.detail}; Lambda retries")
            raise
        else:
            if reason is not None:
                self._failed(firing, cloud_event.id, "refused", reason)
        finally:
            self._metrics.flush()
        if reason is not None:
            return {"sent": False, "id": cloud_event.id, "reason": reason}
        log.debug("pings: %s sent %s for %s", firing.key, cloud_event.id, firing.time)
        return {"sent": True, "id": cloud_event.id}

    def send(self, sink: Sink, sender: str | None, event: CloudEvent) -> str | None:
        """One event to ``sink`` as a firing's goes (IntegrationSource's records take this path
        too): None when sent, else why it never will be; UnavailableError when a retry may cure
        it."""
        return self._send(Firing("", sink, sender, EventTemplate({}), ""), event)

    def _send(self, firing: Firing, event: CloudEvent) -> str | None:
        """None when sent, else why it never will be."""
        if firing.sink.broker is not None:
            return self._store(firing, event)
        return self._post(firing, event)

    def _store(self, firing: Firing, event: CloudEvent) -> str | None:
        sink = firing.sink
        assert sink.broker is not None
        config = self._cache.get(sink.namespace, sink.broker)
        if config is None:
            return f'broker "{sink.namespace}/{sink.broker}" does not exist'
        try:
            # The source's identity, which the broker's EventPolicies admit or refuse.
            self._ingress.ingest(config, [event], {}, sender=firing.sender)
        except UnavailableError:
            raise
        except ForbiddenError as exc:  # archived and counted as ingress does (docs/security.md)
            self._ingress.refuse(sink.namespace, sink.broker, "unauthorized", exc, [event])
            return f"{type(exc).__name__}: {exc.detail}"
        except BrokerError as exc:  # refused (the broker's limits): not retried
            return f"{type(exc).__name__}: {exc.detail}"
        return None

    def _post(self, firing: Firing, event: CloudEvent) -> str | None:
        """The answers mean what they mean to delivery (design.md §2.3): a 2xx is sent, a 400 or
        a 3xx never will be, the rest is tried again."""
        uri = firing.sink.uri
        assert uri is not None
        headers, body = codec.encode_binary(event)
        answer = ""
        for attempt in range(POST_ATTEMPTS):
            if attempt:
                self._sleep(POST_BACKOFF_SECONDS * 2 ** (attempt - 1))
            response = self._sender.post(uri, headers, body, POST_TIMEOUT_SECONDS)
            outcome = classify(response.status, has_reply_event=False, reply_invalid=False)
            if outcome is Outcome.SUCCESS:
                return None
            answer = str(response.status or response.error)
            if outcome is Outcome.DEAD_LETTER:
                return f"{uri} answered {answer}"
        raise UnavailableError(f"{uri} answered {answer} {POST_ATTEMPTS} times")

    def _failed(self, firing: Firing, event_id: str, reason: str, detail: str) -> None:
        self._metrics.count(FAILURE_METRIC, {"namespace": firing.sink.namespace, "reason": reason})
        log.warning("pings: %s event %s (%s) not sent: %s", firing.key, event_id, firing.time,
                    detail)  # fmt: skip
