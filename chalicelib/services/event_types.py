"""Where the registry learns which event types each broker has seen.

- ``EventTypeSample``: kept by the ingress, in memory: a set of (type, source, datacontenttype)
  per broker with first/last seen, written to the store (kind ``eventtypes``) at most once per
  ``interval`` when a new type appeared, and every ten intervals otherwise. No store call per
  event: only that flush, from the request that finds it due. Bounded in bytes: a key whose
  parts are over MAX_PART_CHARS is not sampled, a broker's sample holds at most ``max_types``
  keys and MAX_SAMPLE_BYTES, the container's at most MAX_TOTAL_BYTES (flushed samples of other
  brokers are dropped to make room), and the stored sample MAX_STORED_BYTES.
- ``MetricsEventTypes``: the metrics job's ``event_types.json`` (the ``event_types`` table rolled
  up; Lambda has neither pyspark nor pyarrow to read the Parquet table), fetched at most once per
  ``ttl``.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from chalicelib import logs
from chalicelib.core.archive import rfc3339
from chalicelib.core.clock import utcnow
from chalicelib.core.cloudevents.event import CloudEvent
from chalicelib.core.errors import BrokerError, ConflictError, NotFoundError
from chalicelib.core.limits import MAX_CACHED_KEY_CHARS
from chalicelib.core.registry.entities import ObservedType
from chalicelib.ports import Blobs, ResourceStore

log = logs.get("registry")

SAMPLE_KIND = "eventtypes"
METRICS_FILE = "event_types.json"
QUIET_FLUSH_FACTOR = 10

# A sample is a registry's listing, not the archive: a type, source or media type longer than a
# cache key is not sampled (a 1 MB source held 1 MB per key: 190 MiB for one broker's sample).
MAX_PART_CHARS = MAX_CACHED_KEY_CHARS
MAX_SAMPLE_BYTES = 64 * 1024  # the keys of one broker's sample in memory, in UTF-8
MAX_TOTAL_BYTES = 8 * 1024 * 1024  # every broker's, in one container
MAX_STORED_BYTES = 128 * 1024  # the keys of the stored sample (a DynamoDB item is <= 400 KB)

Key = tuple[str, str, str]  # type, source, datacontenttype ("" when absent)


def key_bytes(key: Key) -> int:
    return sum(len(part.encode("utf-8", "surrogatepass")) for part in key)


@dataclass
class _Buffer:
    seen: dict[Key, list[datetime]] = field(default_factory=dict)  # key -> [first, last]
    size: int = 0  # key_bytes of ``seen``
    new: bool = False  # a key not yet flushed
    dirty: bool = False  # anything not yet flushed
    flushed_at: float = float("-inf")


class EventTypeSample:
    def __init__(
        self,
        store: ResourceStore,
        interval_s: float = 60.0,
        max_types: int = 200,
        max_stored: int = 500,
        monotonic: Callable[[], float] = time.monotonic,
        clock: Callable[[], datetime] = utcnow,
    ) -> None:
        self._store = store
        self._interval = interval_s
        self._max_types = max_types
        self._max_stored = max_stored
        self._monotonic = monotonic
        self._clock = clock
        self._buffers: dict[tuple[str, str], _Buffer] = {}
        self._total = 0  # key_bytes of every buffer
        self._lock = threading.Lock()

    def observe(self, namespace: str, broker: str, events: Sequence[CloudEvent]) -> None:
        """Note accepted events; flush to the store when due. Never raises."""
        now = self._clock()
        with self._lock:
            buf = self._buffers.setdefault((namespace, broker), _Buffer())
            for event in events:
                dct = str(event.get("datacontenttype") or event.get("contenttype") or "")
                key = (event.type, event.source, dct)
                if max(map(len, key)) > MAX_PART_CHARS:
                    continue
                times = buf.seen.get(key)
                if times is not None:
                    times[1] = now
                    buf.dirty = True
                elif self._room(buf, size := key_bytes(key)):
                    buf.seen[key] = [now, now]
                    buf.size += size
                    self._total += size
                    buf.new = buf.dirty = True
            elapsed = self._monotonic() - buf.flushed_at
            due = buf.dirty and (
                (buf.new and elapsed >= self._interval)
                or elapsed >= self._interval * QUIET_FLUSH_FACTOR
            )
            if not due:
                return
            snapshot = {k: (v[0], v[1]) for k, v in buf.seen.items()}
            buf.new = buf.dirty = False
            buf.flushed_at = self._monotonic()
        if not self._flush(namespace, broker, snapshot):
            with self._lock:
                buf.new = buf.dirty = True  # try again at the next due time

    def _room(self, buf: _Buffer, size: int) -> bool:
        """Whether a new key of ``size`` bytes fits ``buf`` and the container's budget, after
        dropping other brokers' samples that are flushed (the store has them; their next event
        is new to this container again) if need be."""
        if len(buf.seen) >= self._max_types or buf.size + size > MAX_SAMPLE_BYTES:
            return False
        if self._total + size > MAX_TOTAL_BYTES:
            for name, other in list(self._buffers.items()):
                if other is not buf and not other.dirty:
                    del self._buffers[name]
                    self._total -= other.size
        return self._total + size <= MAX_TOTAL_BYTES

    def _flush(
        self, namespace: str, broker: str, seen: Mapping[Key, tuple[datetime, datetime]]
    ) -> bool:
        for _ in range(3):
            try:
                item = self._store.get(SAMPLE_KIND, namespace, broker)
                try:
                    merged = merge_sample(item.doc if item else None, seen, self._max_stored)
                except (KeyError, TypeError, ValueError):
                    # An unreadable stored sample must not fail the ingress: start it afresh.
                    merged = merge_sample(None, seen, self._max_stored)
                self._store.put(
                    SAMPLE_KIND, namespace, broker, merged, item.version if item else None
                )
                return True
            except ConflictError:
                continue  # another instance flushed meanwhile: merge with theirs
            except BrokerError as exc:
                log.warning("event type sample of %s/%s not stored: %s", namespace, broker, exc)
                return False
        return False


def merge_sample(
    doc: Mapping[str, Any] | None, seen: Mapping[Key, tuple[datetime, datetime]], limit: int
) -> dict[str, Any]:
    """The stored sample with ``seen`` folded in, the most recently seen ``limit`` entries within
    MAX_STORED_BYTES (a stored row over MAX_PART_CHARS, from before the bound, is dropped)."""
    entries: dict[Key, tuple[datetime, datetime]] = {}
    for row in (doc or {}).get("types", []):
        key = (row["type"], row["source"], row.get("datacontenttype") or "")
        if max(map(len, key)) <= MAX_PART_CHARS:
            entries[key] = (_parse(row["first_seen"]), _parse(row["last_seen"]))
    for key, (first, last) in seen.items():
        old = entries.get(key)
        entries[key] = (min(first, old[0]), max(last, old[1])) if old else (first, last)
    kept = []
    budget = MAX_STORED_BYTES
    for entry in sorted(entries.items(), key=lambda kv: kv[1][1], reverse=True)[:limit]:
        budget -= key_bytes(entry[0])
        if budget < 0:
            break
        kept.append(entry)
    rows = []
    for (t, source, dct), (first, last) in sorted(kept):
        row = {
            "type": t,
            "source": source,
            "first_seen": rfc3339(first),
            "last_seen": rfc3339(last),
        }
        if dct:
            row["datacontenttype"] = dct
        rows.append(row)
    return {"types": rows}


def sample_types(namespace: str, broker: str, doc: Mapping[str, Any]) -> list[ObservedType]:
    return [
        ObservedType(
            namespace,
            broker,
            row["type"],
            row["source"],
            row.get("datacontenttype"),
            _parse(row["first_seen"]),
            _parse(row["last_seen"]),
        )
        for row in doc.get("types", [])
    ]


# ---- the metrics job's output -------------------------------------------------------------------


def metrics_fetcher(location: str | None, blobs: Blobs) -> Callable[[], bytes | None]:
    """How to read ``event_types.json`` under the metrics job's ``--out`` location: an
    ``s3://bucket/prefix`` (through the Blobs port) or a local directory (local mode)."""
    if not location:
        return lambda: None
    if location.startswith("s3://"):
        bucket, _, prefix = location[len("s3://") :].partition("/")
        key = f"{prefix.rstrip('/')}/{METRICS_FILE}".lstrip("/")

        def from_s3() -> bytes | None:
            try:
                return blobs.get(bucket, key)
            except NotFoundError:
                return None

        return from_s3
    path = Path(location.removeprefix("file://")) / METRICS_FILE
    return lambda: path.read_bytes() if path.is_file() else None


class MetricsEventTypes:
    def __init__(
        self,
        fetch: Callable[[], bytes | None],
        ttl_s: float = 60.0,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._fetch = fetch
        self._ttl = ttl_s
        self._monotonic = monotonic
        self._cached: list[ObservedType] = []
        self._at = float("-inf")

    def __call__(self) -> list[ObservedType]:
        if self._monotonic() - self._at < self._ttl:
            return self._cached
        try:
            data = self._fetch()
            self._cached = parse_metrics(data) if data else []
        except (BrokerError, ValueError, KeyError, TypeError) as exc:
            log.warning("metrics event types unreadable, kept the last ones: %s", exc)
        self._at = self._monotonic()
        return self._cached


def parse_metrics(data: bytes) -> list[ObservedType]:
    """``event_types.json``: ``{"event_types": [row, ...]}`` (or the bare list) where a row has the
    columns of the job's ``event_types`` table: namespace, broker, event_type, event_source,
    first_seen, last_seen, events, and optionally datacontenttype (rows per date are fine: the
    registry rolls them up)."""
    doc = json.loads(data)
    rows = doc.get("event_types", []) if isinstance(doc, Mapping) else doc
    out = []
    for row in rows:
        count = row.get("events", row.get("count"))
        out.append(
            ObservedType(
                str(row["namespace"]),
                str(row["broker"]),
                str(row.get("event_type", row.get("type"))),
                str(row.get("event_source", row.get("source"))),
                row.get("datacontenttype") or None,
                _parse(row["first_seen"]),
                _parse(row["last_seen"]),
                int(count) if count is not None else None,
            )
        )
    return out


def _parse(text: str) -> datetime:
    moment = datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)
