"""``Container.tap_archive``: the seam the local runtime's console uses to see every archive
record as it is written (brokerctl/dev.py), instead of replacing the container's cached archive
behind its back."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from chalicelib.adapters.firehose_archive import FirehoseArchive
from chalicelib.container import Container
from chalicelib.ports import Archive
from tests.fakes import MemoryArchive
from tests.functional.harness import Harness


class Tap:
    """Keeps what is written, and what it wraps (not written to: there is no Firehose here)."""

    def __init__(self, inner: Archive) -> None:
        self.inner = inner
        self.kept = MemoryArchive()

    def put(self, records: Sequence[bytes]) -> None:
        self.kept.put(records)


PORTS = ("store", "queues", "mappings", "blobs", "blob_listing", "sender", "seen_events",
         "rate_limiter")  # fmt: skip


def container_without_archive(h: Harness) -> Container:
    """The harness's fakes in a fresh container, all but the archive (the adapter stays)."""
    c = Container(h.settings)
    for port in PORTS:
        setattr(c, port, getattr(h.container, port))
    return c


def test_every_service_writes_through_the_tap() -> None:
    h = Harness()
    c = container_without_archive(h)
    taps: list[Tap] = []

    def tap(inner: Archive) -> Tap:
        taps.append(Tap(inner))
        return taps[-1]

    c.tap_archive(tap)
    h.container = c
    h.broker()
    h.trigger("t1")
    assert h.send(id_="e-1").status == 202
    [tapped] = taps  # built once, shared
    assert isinstance(tapped.inner, FirehoseArchive)
    assert c.archive is tapped
    assert [(r["kind"], r.get("event", {}).get("id")) for r in tapped.kept.decoded()] == [
        ("accepted", "e-1")
    ]


def test_a_tap_after_the_archive_is_in_use_is_refused() -> None:
    c = container_without_archive(Harness())
    assert isinstance(c.archive, FirehoseArchive)
    with pytest.raises(RuntimeError, match="in use already"):
        c.tap_archive(lambda inner: inner)
    assert isinstance(c.archive, FirehoseArchive)
