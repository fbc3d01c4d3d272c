"""Writing archive records (DESIGN.md §3) for ingress and delivery: retried, counted, logged.

The archive feeds analytics, so its outage never refuses an event already stored. But a record it
loses is not silent either: each write is tried ``attempts`` times with backoff, and what still
fails is counted in ``archive_failure_count`` and logged with the event ids it carried.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Sequence

from chalicelib.core.errors import BrokerError
from chalicelib.ports import Archive
from chalicelib.services.metrics import Metrics

log = logging.getLogger(__name__)

ATTEMPTS = 3
BACKOFF_SECONDS = (0.05, 0.2)  # before the 2nd and 3rd attempts
_MAX_LOGGED_IDS = 20


class Archiver:
    def __init__(
        self,
        sink: Archive,
        metrics: Metrics,
        role: str,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._sink = sink
        self._metrics = metrics
        self._role = role  # "ingress" or "delivery": the metric's dimension
        self._sleep = sleep

    def write(self, records: Sequence[bytes]) -> bool:
        """Archive ``records``; False (counted and logged) when they could not be."""
        if not records:
            return True
        error: BrokerError | None = None
        for attempt in range(ATTEMPTS):
            if attempt:
                self._sleep(BACKOFF_SECONDS[min(attempt, len(BACKOFF_SECONDS)) - 1])
            try:
                self._sink.put(records)
                return True
            except BrokerError as exc:
                error = exc
        self._metrics.count("archive_failure_count", {"function": self._role}, len(records))
        log.error(
            "archive failed after %d attempts, %d records not archived (event ids %s): %s",
            ATTEMPTS,
            len(records),
            _event_ids(records),
            error,
        )
        return False


def _event_ids(records: Sequence[bytes]) -> list[str]:
    ids: list[str] = []
    for line in records[:_MAX_LOGGED_IDS]:
        try:
            record = json.loads(line)
        except ValueError:
            continue
        event = record.get("event") if isinstance(record, dict) else None
        event_id = event.get("id") if isinstance(event, dict) else record.get("event_id")
        if isinstance(event_id, str):
            ids.append(event_id)
    return ids
