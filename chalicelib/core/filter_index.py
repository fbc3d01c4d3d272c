"""Trigger index (placeholder API; being completed)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Generic, TypeVar

from chalicelib.core.event import CloudEvent
from chalicelib.core.filters import Filter

K = TypeVar("K")


class TriggerIndex(Generic[K]):
    def __init__(self, entries: Iterable[tuple[K, Filter]]) -> None:
        self._entries = list(entries)

    def match(self, event: CloudEvent) -> list[K]:
        return [k for k, f in self._entries if f.matches(event)]
