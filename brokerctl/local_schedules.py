"""Fires the sources' schedules on time in local mode, as EventBridge Scheduler does on AWS
(docs/sources.md): the schedules are the ones the control plane made on the embedded endpoint
(the same Scheduler calls as deployed); this reads them back (ListSchedules with the stage's
prefix, GetSchedule each), works out when each is next due (core/cron.py), and invokes the same
``pings`` function with the schedule's input, ``<aws.scheduler.scheduled-time>`` substituted.

They are read again at once when the control plane creates, updates or deletes one (``poke``,
on the Scheduler client's after-call events), and every ``refresh_seconds`` for changes made
elsewhere. A firing runs on a thread of its own, so a slow sink delays no other schedule. Like
Scheduler, nothing is fired for times that passed while the runtime was not running.

``fire_due(now)`` does one round with a given time: tests drive the clock with it."""

from __future__ import annotations

import threading
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from brokerctl.lambda_context import LocalLambdaContext
from chalicelib.core.clock import utcnow
from chalicelib.core.cron import Cron, Expression, from_scheduler
from chalicelib.core.schedules import scheduled_input
from chalicelib.ports import Schedules

Handler = Callable[[dict[str, Any], Any], Any]
REFRESH_SECONDS = 30.0
SCHEDULE_OPERATIONS = ("CreateSchedule", "UpdateSchedule", "DeleteSchedule")


@dataclass
class _Due:
    input: str
    expression: Expression
    anchor: datetime  # when this runtime first saw it: a rate's first period starts there
    next_at: datetime | None


class LocalSchedules(threading.Thread):
    def __init__(
        self,
        schedules: Schedules,
        prefix: str,
        handler: Handler,
        log: Callable[[str], None],
        clock: Callable[[], datetime] = utcnow,
        refresh_seconds: float = REFRESH_SECONDS,
        function_name: str = "pings",
    ) -> None:
        super().__init__(name="scheduler-pings", daemon=True)
        self._schedules = schedules
        self._prefix = prefix
        self._handler = handler
        self._log = log
        self._clock = clock
        self._refresh = refresh_seconds
        self._function = function_name
        self._due: dict[str, _Due] = {}
        self._lock = threading.Lock()
        self._halt = threading.Event()
        self._wake = threading.Event()
        self._stale = True
        self._last_error: str | None = None
        self.fired = 0

    def poke(self, **_: Any) -> None:
        """A schedule changed: read them again now."""
        self._stale = True
        self._wake.set()

    def stop(self) -> None:
        self._halt.set()
        self._wake.set()

    def run(self) -> None:
        read_at = 0.0
        while not self._halt.is_set():
            now = self._clock()
            if self._stale or now.timestamp() - read_at >= self._refresh:
                self._stale = False
                read_at = now.timestamp()
                self.reload(now)
            self.fire_due(now, wait=False)
            upcoming = [d.next_at for d in self._due.values() if d.next_at is not None]
            until = min([read_at + self._refresh, *(t.timestamp() for t in upcoming)])
            self._wake.wait(max(0.0, min(until - self._clock().timestamp(), self._refresh)))
            self._wake.clear()

    def reload(self, now: datetime) -> None:
        """The schedules as the endpoint has them; a schedule kept keeps its next time."""
        try:
            names = self._schedules.names(self._prefix)
            found = {n: s for n in names if (s := self._schedules.get(n)) is not None}
        except Exception as exc:  # the endpoint may be stopping; read again at the next refresh
            said = f"schedules: not read: {type(exc).__name__}: {exc}"
            if said != self._last_error:  # once, not every refresh (an emulator without Scheduler)
                self._log(said)
            self._last_error = said
            return
        self._last_error = None
        with self._lock:
            fresh: dict[str, _Due] = {}
            for name, schedule in found.items():
                kept = self._due.get(name)
                try:
                    expression = from_scheduler(schedule.expression, schedule.timezone)
                except ValueError as exc:
                    self._log(f"schedule {name}: not fired here: {exc}")
                    continue
                if kept is not None and (kept.input, kept.expression) == (
                    schedule.input,
                    expression,
                ):
                    fresh[name] = kept
                    continue
                anchor = kept.anchor if kept is not None else now
                due = _Due(schedule.input, expression, anchor, None)
                due.next_at = _next(due, now)
                fresh[name] = due
            self._due = fresh

    def fire_due(self, now: datetime, *, wait: bool = True) -> int:
        """Fire every schedule due at or before ``now``, once each (a time missed by more than one
        period fires once, as the latest); ``wait``: until their functions return."""
        started: list[threading.Thread] = []
        with self._lock:
            for name, due in self._due.items():
                if due.next_at is None or due.next_at > now:
                    continue
                at = due.next_at
                due.next_at = _next(due, now)
                thread = threading.Thread(
                    target=self._fire, args=(name, due.input, at), name=f"ping-{name[-8:]}",
                    daemon=True,
                )  # fmt: skip
                thread.start()
                started.append(thread)
        if wait:
            for thread in started:
                thread.join()
        return len(started)

    def _fire(self, name: str, input_text: str, at: datetime) -> None:
        try:
            answer = self._handler(
                scheduled_input(input_text, at), LocalLambdaContext(self._function)
            )
            self.fired += 1
            if isinstance(answer, dict) and answer.get("sent") is False:
                self._log(f"schedule {name}: event not sent: {answer.get('reason')}")
        except Exception as exc:  # Lambda would retry the invocation; logged here
            self._log(f"schedule {name}: {type(exc).__name__}: {exc}")
            self._log("".join(traceback.format_exception(exc)[-3:]).rstrip())


def _next(due: _Due, after: datetime) -> datetime | None:
    if isinstance(due.expression, Cron):
        return due.expression.next_after(after)
    return due.expression.next_after(after, due.anchor)
