"""An in-memory Schedules (chalicelib/ports.py): EventBridge Scheduler's schedules of one group as
a dict, or refusing as an unreachable Scheduler does. tests/contract/test_schedules.py runs the
same suite on it and on the Scheduler adapter (moto)."""

from __future__ import annotations

from chalicelib.core.errors import UnavailableError
from chalicelib.ports import DeployedSchedule


class MemorySchedules:
    def __init__(self) -> None:
        self.schedules: dict[str, DeployedSchedule] = {}
        self.puts = 0  # create or update calls, as Scheduler would bill them
        self.fail = False  # answer as a Scheduler that cannot be reached

    def put(self, schedule: DeployedSchedule) -> None:
        self._check()
        self.puts += 1
        self.schedules[schedule.name] = schedule

    def get(self, name: str) -> DeployedSchedule | None:
        self._check()
        return self.schedules.get(name)

    def names(self, prefix: str) -> list[str]:
        self._check()
        return sorted(n for n in self.schedules if n.startswith(prefix))

    def delete(self, name: str) -> None:
        self._check()
        self.schedules.pop(name, None)

    def _check(self) -> None:
        if self.fail:
            raise UnavailableError("Scheduler: ServiceUnavailable")
