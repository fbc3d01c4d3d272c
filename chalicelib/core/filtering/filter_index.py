"""Routes an event to the triggers whose filters match it, without evaluating every filter.

Each filter states the exact-match conditions any matching event must meet (``index_hints``:
legacy attributes with a value, ``exact``, ``all`` of those, ``any`` whose branches share an
attribute, CESQL ``attr = 'text'`` conjuncts, and ``data.a.b = 'text'`` ones, filed under
``data.a.b`` and looked up in the event's JSON data). The index picks attributes greedily, the
one that covers the most remaining triggers first (ties: the one with more distinct values, i.e.
the more selective), and files each trigger under its values for that attribute. An event then
looks up its own value of each chosen attribute (usually just ``type``), and only those candidates
and the residual triggers (no usable condition: prefix, suffix, ``not``, most CESQL) are evaluated.

The hints are necessary conditions only; every candidate's whole filter still decides, so
``match`` returns exactly ``[k for k, f in entries if f.matches(event)]``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Generic, TypeVar

from chalicelib.core.cloudevents.event import CloudEvent
from chalicelib.core.filtering.filters import (
    Filter,
    Hints,
    attribute_text,
    hint_text,
    index_hints,
)

K = TypeVar("K")

# Beyond this many tables, or once an attribute would index a single trigger, a lookup costs about
# what evaluating the filter does: the rest go to the residual list (and building stays linear).
MAX_TABLES = 16


class TriggerIndex(Generic[K]):
    def __init__(self, entries: Iterable[tuple[K, Filter]]) -> None:
        pairs = list(entries)
        self._keys: list[K] = [key for key, _ in pairs]
        self._filters: list[Filter] = [f for _, f in pairs]
        remaining: dict[int, Hints] = {}
        unhinted: list[int] = []
        for position, f in enumerate(self._filters):
            hints = index_hints(f)
            if hints:
                remaining[position] = hints
            else:
                unhinted.append(position)
        self._tables: list[tuple[str, dict[str, list[int]]]] = []
        while remaining and len(self._tables) < MAX_TABLES:
            name, covered = _most_useful_attribute(remaining.values())
            if covered < 2 and self._tables:
                break
            table: dict[str, list[int]] = {}
            for position in [p for p, hints in remaining.items() if name in hints]:
                for value in remaining.pop(position)[name]:
                    table.setdefault(value, []).append(position)
            self._tables.append((name, table))
        # A trigger filed under no value at all (an ``all`` of conflicting exacts) never matches.
        self._residual: list[int] = sorted([*unhinted, *remaining])

    @property
    def indexed_attributes(self) -> list[str]:
        return [name for name, _ in self._tables]

    @property
    def residual_count(self) -> int:
        return len(self._residual)

    def match(self, event: CloudEvent) -> list[K]:
        attrs = event.attributes
        sources = [self._residual] if self._residual else []
        for name, table in self._tables:
            text = hint_text(event, name) if "." in name else attribute_text(attrs, name)
            if text is not None:
                bucket = table.get(text)
                if bucket:
                    sources.append(bucket)
        if not sources:
            return []
        # Each source is already in insertion order and no trigger sits in two of them.
        candidates = sources[0] if len(sources) == 1 else sorted(p for s in sources for p in s)
        filters, keys = self._filters, self._keys
        return [keys[p] for p in candidates if filters[p].matches(event)]

    def __len__(self) -> int:
        return len(self._keys)


def _most_useful_attribute(hints: Iterable[Hints]) -> tuple[str, int]:
    coverage: Counter[str] = Counter()
    distinct: dict[str, set[str]] = {}
    for h in hints:
        for name, values in h.items():
            coverage[name] += 1
            distinct.setdefault(name, set()).update(values)
    best = max(coverage, key=lambda name: (coverage[name], len(distinct[name]), name == "type"))
    return best, coverage[best]
