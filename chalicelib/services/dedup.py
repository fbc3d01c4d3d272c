"""Deduplication at ingress (docs/dedup.md): which events of a request to store, claimed pending
before they are stored and confirmed after, so that a request that dies in between (a timeout, an
OOM, a killed container) holds its keys for ``hold_s`` only, never for the window: a 202 always
means stored, for a duplicate too."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

from chalicelib.core import archive
from chalicelib.core.cloudevents.event import CloudEvent
from chalicelib.core.errors import BrokerError, InFlightError, UnavailableError
from chalicelib.ports import SeenEvents
from chalicelib.services.metrics import Metrics
from chalicelib.services.routing import BrokerConfig

# How long a pending claim holds its keys: past the longest timeout of the functions that ingest
# (api_handler 29 s, delivery and kafka_ingress 60 s), so a claimant still storing is not
# overtaken; one that died is overtaken after it (a duplicate at worst, never a loss).
HOLD_SECONDS = 90.0

Key = tuple[str, str]  # (source, id)


@dataclass(frozen=True)
class Sorted:
    """A request's events after their claim: ``kept`` to store (their ``keys`` now pending),
    the archive records of the ``duplicates``, and, when some keys are held by a request still
    storing them, the ``retry_after`` to answer with once the rest is stored."""

    kept: list[CloudEvent]
    keys: list[Key]
    duplicates: list[bytes]
    held: int = 0
    retry_after: int = 0

    def in_flight(self, scope: str) -> InFlightError:
        return InFlightError(
            f"{self.held} event(s) of this request are being stored by another request to "
            f"{scope} (same source and id); retry after {self.retry_after} s",
            self.retry_after,
        )


class Dedup:
    def __init__(
        self,
        seen: SeenEvents | None,
        metrics: Metrics,
        log: Callable[[str], None],
        hold_s: float = HOLD_SECONDS,
    ) -> None:
        self._seen = seen
        self._metrics = metrics
        self._log = log
        self._hold_s = hold_s

    def claim(self, config: BrokerConfig, events: Sequence[CloudEvent], now: datetime) -> Sorted:
        """Repeats inside the request are collapsed first (the first copy wins): one claim call
        per request."""
        if self._seen is None:
            raise UnavailableError("deduplication is configured but no dedup store is wired")
        first: dict[Key, int] = {}
        for i, event in enumerate(events):
            first.setdefault((event.source, event.id), i)
        keys = list(first)
        at = now.timestamp()
        claimed = self._seen.claim(_scope(config), keys, self._hold_s, at)
        fresh = {keys[i] for i in claimed.fresh}
        held = {keys[i]: until for i, until in claimed.held.items()}
        kept: list[CloudEvent] = []
        records: list[bytes] = []
        for i, event in enumerate(events):
            key = (event.source, event.id)
            if key in fresh and first[key] == i:
                kept.append(event)
            elif key not in held:
                record = archive.duplicate_record(
                    config.namespace, config.name, event.id, event.type, event.source, now
                )
                records.append(archive.encode_line(record))
        waits = [self._retry_after(until - at) for until in held.values()]
        return Sorted(
            kept, [k for k in keys if k in fresh], records, len(held), max(waits, default=0)
        )

    def _retry_after(self, remaining: float) -> int:
        """A second while the other request's claim is young (it is storing the event right
        now), then as long as it has been held, never past its end: a backoff that doubles."""
        age = self._hold_s - remaining
        return max(1, min(math.ceil(age), math.ceil(remaining)))

    def confirm(self, config: BrokerConfig, keys: list[Key], until: float) -> None:
        """The events of ``keys`` are stored; a failure here refuses nothing (their keys stay
        pending until the hold ends, and a repeat after that is stored again: a duplicate)."""
        if keys and self._seen is not None:
            self._settle(config, keys, "confirm", lambda s: s.confirm(_scope(config), keys, until))

    def release(self, config: BrokerConfig, keys: list[Key]) -> None:
        """The events of ``keys`` were not stored: the producer's retry need not wait for the
        hold to end. A failure leaves them pending until it does (retries answered 503)."""
        if keys and self._seen is not None:
            self._settle(config, keys, "release", lambda s: s.release(_scope(config), keys))

    def _settle(
        self,
        config: BrokerConfig,
        keys: list[Key],
        what: str,
        call: Callable[[SeenEvents], None],
    ) -> None:
        assert self._seen is not None
        try:
            call(self._seen)  # the adapter retries
        except BrokerError as exc:
            dims = {"namespace": config.namespace, "broker": config.name}
            self._metrics.count(f"dedup_{what}_failure_count", dims, len(keys))
            self._log(
                f"dedup: could not {what} {len(keys)} claim(s) of {_scope(config)} "
                f"({exc.detail}); they stay pending for up to {self._hold_s:g} s: "
                + ", ".join(f"{source} {event_id}" for source, event_id in keys[:10])
            )


def _scope(config: BrokerConfig) -> str:
    return f"{config.namespace}/{config.name}"
