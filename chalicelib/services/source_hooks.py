"""What the sources that deliver themselves (PingSource, IntegrationSource; docs/sources.md) share
as kinds of the generic service: their schedules and where their sink resolves."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Protocol, TypeVar

from chalicelib.config import Settings
from chalicelib.core.clock import utcnow
from chalicelib.core.resources.broker import Broker
from chalicelib.core.resources.meta import ResourceMeta
from chalicelib.core.resources.source_sink import SourceSink
from chalicelib.services.resources import Hooks, Resources
from chalicelib.services.schedules import Scheduling


class _Source(ResourceMeta, Protocol):
    @property
    def sink(self) -> SourceSink: ...


S = TypeVar("S", bound=_Source)


class SourceHooks(Hooks[S]):
    def __init__(
        self,
        sources: Resources[S],
        brokers: Resources[Broker],
        scheduling: Scheduling,
        settings: Settings,
        clock: Callable[[], datetime] = utcnow,
    ) -> None:
        self.sources = sources
        self._brokers = brokers
        self._scheduling = scheduling
        self._settings = settings
        self._clock = clock

    def _sink_uri(self, source: S) -> str | None:
        """Its status's ``sinkUri``: None while its broker does not exist."""
        return source.sink.resolved_uri(
            source.namespace,
            self._settings.public_url,
            lambda broker: self._brokers.get(source.namespace, broker) is not None,
        )
