"""EventTransforms (docs/transforms.md) as a resource kind of the generic service: nothing to
provision (delivery evaluates the expression), so the hooks give the status and make every
broker's routes read again, since a trigger's route carries the transform it refers to."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from chalicelib.config import Settings
from chalicelib.core.clock import utcnow
from chalicelib.core.resources.event_transform import EventTransform, event_transform_status
from chalicelib.services.control_plane import check_destinations
from chalicelib.services.resources import Hooks, Resources, Stored
from chalicelib.services.routing import ConfigCache


class EventTransformHooks(Hooks[EventTransform]):
    def __init__(
        self,
        transforms: Resources[EventTransform],
        cache: ConfigCache,
        settings: Settings,
        clock: Callable[[], datetime] = utcnow,
    ) -> None:
        self.transforms = transforms
        self._cache = cache
        self._settings = settings
        self._clock = clock

    def check(self, resource: EventTransform) -> None:
        check_destinations(self._settings, [("spec.sink.uri", resource.sink_uri)])

    def status(self, stored: Stored[EventTransform]) -> dict[str, Any]:
        return event_transform_status(
            stored.resource,
            public_url=self._settings.public_url,
            now=self._clock(),
            previous=stored.status,
        )

    def saved(self, stored: Stored[EventTransform], existed: bool) -> Stored[EventTransform]:
        # This container's routes see the change at once; others within the cache TTL (the
        # store's epoch moves with every write of a routing kind).
        self._cache.invalidate()
        return stored

    def removed(self, stored: Stored[EventTransform]) -> None:
        self._cache.invalidate()
