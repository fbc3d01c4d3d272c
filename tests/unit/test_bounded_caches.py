"""Caches keyed by client input are bounded in bytes, not only entries; the config cache is
stamped after its load, bounded, serves its last good config when the store is down, and reuses
compiled filters (issue 16, defects 1 and 3)."""

from __future__ import annotations

import sys
from collections.abc import Callable

import pytest

from chalicelib.core.cloudevents import context_attributes as codec_validation
from chalicelib.core.cloudevents import json_format as codec_json
from chalicelib.core.errors import UnavailableError
from chalicelib.core.limits import MAX_CACHED_KEY_CHARS
from chalicelib.services import routing
from chalicelib.services.routing import BrokerConfig, ConfigCache


def _bytes_of(cache: dict[str, bool] | set[str]) -> int:
    return sum(sys.getsizeof(k) for k in cache)


def test_huge_sources_are_checked_but_never_remembered() -> None:
    before = _bytes_of(codec_validation._KNOWN_URI_REFERENCES)
    for i in range(40):  # the defect: 60 requests of 2 MB sources grew the process ~350 MiB
        assert codec_validation.is_uri_reference(f"/{i}/" + "a" * 200_000)
    assert _bytes_of(codec_validation._KNOWN_URI_REFERENCES) - before < 64 * 1024


def test_the_source_cache_stays_within_its_byte_bound() -> None:
    for i in range(10_000):
        codec_validation.is_uri_reference(f"/p{i}/" + "b" * (MAX_CACHED_KEY_CHARS - 10))
    assert _bytes_of(codec_validation._KNOWN_URI_REFERENCES) < 4096 * (MAX_CACHED_KEY_CHARS + 100)


def test_long_content_types_skip_the_cache() -> None:
    info = codec_json._is_json_content_type.cache_info()
    assert codec_json.is_json_content_type("application/json; x=" + "y" * 100_000)
    assert codec_json._is_json_content_type.cache_info().currsize == info.currsize


class Loader:
    def __init__(self, clock: list[float], load_seconds: float = 0.0) -> None:
        self.calls = 0
        self.fail = False
        self._clock, self._load_seconds = clock, load_seconds

    def __call__(self, namespace: str, broker: str) -> BrokerConfig | None:
        self.calls += 1
        self._clock[0] += self._load_seconds
        if self.fail:
            raise UnavailableError("dynamodb: ProvisionedThroughputExceededException")
        return None


def _cache(load_seconds: float = 0.0) -> tuple[ConfigCache, Loader, list[float]]:
    now = [0.0]
    loader = Loader(now, load_seconds)
    clock: Callable[[], float] = lambda: now[0]  # noqa: E731
    return ConfigCache(loader, ttl=5.0, clock=clock), loader, now


def test_a_slow_load_is_not_stale_on_arrival() -> None:
    cache, loader, _ = _cache(load_seconds=6.0)  # slower than the TTL
    cache.get("ns", "b")
    cache.get("ns", "b")
    assert loader.calls == 1  # before the fix every request reloaded


def test_the_last_good_config_is_served_while_the_store_is_down() -> None:
    cache, loader, now = _cache()
    cache.get("ns", "b")
    now[0] += 10
    loader.fail = True
    assert cache.get("ns", "b") is None  # the cached (negative) answer, not an error
    assert cache.get("ns", "b") is None and loader.calls == 2  # retried a TTL later, not now
    with pytest.raises(UnavailableError):
        cache.get("ns", "never-seen")


def test_the_config_cache_is_bounded() -> None:
    cache, _, _ = _cache()
    for i in range(routing.MAX_ENTRIES + 500):
        cache.get("ns", f"b{i}")
    assert len(cache._entries) == routing.MAX_ENTRIES


def test_filters_are_compiled_once_per_trigger_generation() -> None:
    from chalicelib.core.resources.trigger import TRIGGERS
    from tests.functional.harness import Harness

    h = Harness()
    h.broker()
    h.trigger("t1", filter={"type": "a"})
    load = lambda: routing.load_broker_config(h.store, "p-", "ns", "default")  # noqa: E731
    first, again = load(), load()
    assert first is not None and again is not None
    assert first.routes[0].filter is again.routes[0].filter  # not parsed again
    h.trigger("t1", filter={"type": "b"})  # a new generation: compiled anew
    changed = load()
    assert changed is not None and changed.routes[0].filter is not first.routes[0].filter
    stored = h.store.get("trigger", "ns", "t1")
    assert stored is not None and TRIGGERS.from_item(stored.doc["resource"]).generation == 2


def test_an_expired_config_is_reloaded_by_one_thread_while_the_others_keep_it() -> None:
    import threading

    now = [0.0]
    old, new = BrokerConfig.__new__(BrokerConfig), BrokerConfig.__new__(BrokerConfig)
    loading, release = threading.Event(), threading.Event()
    calls: list[int] = []

    def loader(ns: str, name: str) -> BrokerConfig:
        calls.append(1)
        if len(calls) == 1:
            return old
        loading.set()
        assert release.wait(10)
        return new

    cache = ConfigCache(loader, ttl=5.0, clock=lambda: now[0])
    assert cache.get("ns", "b") is old
    now[0] = 10.0  # expired
    got: list[BrokerConfig | None] = []
    reloader = threading.Thread(target=lambda: got.append(cache.get("ns", "b")))
    reloader.start()
    assert loading.wait(10)
    assert cache.get("ns", "b") is old  # not a second load: the one in flight will do
    assert len(calls) == 2
    release.set()
    reloader.join(10)
    assert got == [new] and cache.get("ns", "b") is new


class Epochs:
    def __init__(self) -> None:
        self.value = 0
        self.reads = 0
        self.fail = False

    def __call__(self, namespace: str) -> int:
        self.reads += 1
        if self.fail:
            raise UnavailableError("dynamodb: throttled")
        return self.value


def _epoch_cache() -> tuple[ConfigCache, Loader, Epochs, list[float]]:
    now = [0.0]
    loader, epochs = Loader(now), Epochs()
    cache = ConfigCache(loader, ttl=5.0, clock=lambda: now[0], epoch=epochs)
    return cache, loader, epochs, now


def test_an_unchanged_epoch_keeps_the_config_without_reading_it_again() -> None:
    cache, loader, epochs, now = _epoch_cache()
    cache.get("ns", "b")
    for _ in range(5):
        now[0] += 6  # past the TTL each time: one epoch read, no full read
        cache.get("ns", "b")
    assert (loader.calls, epochs.reads) == (1, 6)
    epochs.value += 1  # a write in the namespace
    now[0] += 6
    cache.get("ns", "b")
    assert loader.calls == 2
    now[0] += 1
    cache.get("ns", "b")  # within the TTL: nothing read
    assert (loader.calls, epochs.reads) == (2, 7)


def test_an_unchanged_broker_is_still_read_in_full_every_minute() -> None:
    cache, loader, _, now = _epoch_cache()
    cache.get("ns", "b")
    while now[0] < routing.FULL_RELOAD_SECONDS + 6:
        now[0] += 6
        cache.get("ns", "b")
    assert loader.calls == 2


def test_a_failed_epoch_read_serves_the_last_config() -> None:
    cache, loader, epochs, now = _epoch_cache()
    cache.get("ns", "b")
    epochs.fail = True
    now[0] += 6
    assert cache.get("ns", "b") is None and loader.calls == 1
    with pytest.raises(UnavailableError):
        cache.get("ns", "never-seen")
