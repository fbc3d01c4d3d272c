"""Broker and trigger configuration as the data plane sees it, cached per warm container.

The ingress must not call DynamoDB per event: a broker's configuration (annotations, token hashes)
and its triggers' routes (filter index, queue names, effective delivery) are loaded together and
kept for ``ttl`` seconds. The control plane reports a trigger Ready only once that TTL has passed
since it was provisioned (design.md §2.2 "Propagating"), so every ingress sees a Ready trigger.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from chalicelib.core import names
from chalicelib.core.authorization import Rule
from chalicelib.core.errors import UnavailableError
from chalicelib.core.filtering.filter_index import TriggerIndex
from chalicelib.core.filtering.filters import Filter, build_filter
from chalicelib.core.resources.broker import BROKERS, Broker
from chalicelib.core.resources.delivery_spec import (
    CONNECTION_ANNOTATION,
    DEAD_LETTER_CONNECTION_ANNOTATION,
    DeliverySpec,
)
from chalicelib.core.resources.event_policy import EVENT_POLICIES
from chalicelib.core.resources.event_transform import EVENT_TRANSFORMS, EventTransform
from chalicelib.core.resources.integration_sink import INTEGRATION_SINKS
from chalicelib.core.resources.trigger import TRIGGERS, Trigger, effective_delivery, max_rate
from chalicelib.core.tokens import STORE_KIND as TOKEN
from chalicelib.ports import ResourceStore
from chalicelib.services.policies import broker_rules
from chalicelib.services.resources import Resources

# What load_broker_config reads: the kinds whose writes must reach the ConfigCache's epoch.
ROUTING_KINDS = frozenset(
    {
        BROKERS.store_kind,
        TRIGGERS.store_kind,
        TOKEN,
        EVENT_TRANSFORMS.store_kind,
        EVENT_POLICIES.store_kind,
        INTEGRATION_SINKS.store_kind,
    }
)
MAX_ENTRIES = 10_000  # brokers per container's cache; names are ≤ 63 characters each


@dataclass(frozen=True)
class Route:
    """A trigger as delivery sees it."""

    namespace: str
    broker: str
    name: str
    queue: str
    dlq: str
    subscriber_uri: str
    delivery: DeliverySpec
    filter: Filter
    ready: bool
    max_rate: float | None = None  # events per second (docs/flow-control.md); None: no limit
    # The EventTransform the trigger's subscriber.ref names (docs/transforms.md); its sink, if
    # any, is subscriber_uri.
    transform: EventTransform | None = None
    transform_ref: str | None = None  # the name the trigger refers to, resolved or not
    # The IntegrationSink the trigger's subscriber.ref names, resolved or not (docs/targets.md):
    # its target is subscriber_uri, "" while it does not exist.
    subscriber_sink: str | None = None
    subscriber_audience: str | None = None  # its requests carry a token (design.md §2.5)
    subscriber_ca_certs: str | None = None  # CAs its TLS trusts too (design.md §2.5)
    # The Connections the subscriber's and the dead-letter sink's requests authenticate with
    # (docs/targets.md): the trigger's annotations.
    connection: str | None = None
    dead_letter_connection: str | None = None


@dataclass(frozen=True)
class BrokerConfig:
    namespace: str
    name: str
    broker: Broker
    legacy: bool
    max_event_bytes: int
    auth: str
    tokens: tuple[tuple[str, str], ...]  # (id, salted hash) of the broker's ingress tokens
    routes: tuple[Route, ...]
    index: TriggerIndex[Route] = field(compare=False)
    # The EventPolicies that apply to the broker, compiled (services/policies.py); empty: none.
    policies: tuple[Rule, ...] = ()

    def route(self, trigger: str) -> Route | None:
        for route in self.routes:
            if route.name == trigger:
                return route
        return None


_FILTERS: dict[tuple[str, str, str, int], Filter] = {}
_FILTERS_LOCK = threading.Lock()


def _compiled_filter(trigger: Trigger) -> Filter:
    """A trigger's filter, compiled once per generation (a spec change bumps it): a reload of the
    routes re-parses only the triggers that changed. Bounded like the config cache."""
    key = (trigger.namespace, trigger.name, trigger.uid, trigger.generation)
    compiled = _FILTERS.get(key)
    if compiled is None:
        compiled = build_filter(trigger.filter_attributes, trigger.filters)
        with _FILTERS_LOCK:
            if len(_FILTERS) >= MAX_ENTRIES:
                _FILTERS.pop(next(iter(_FILTERS)))
            _FILTERS[key] = compiled
    return compiled


class _Sinks:
    """The IntegrationSinks triggers name (docs/targets.md), each read once per load."""

    def __init__(self, store: ResourceStore, namespace: str) -> None:
        self._sinks = Resources(store, INTEGRATION_SINKS)
        self._namespace = namespace
        self._targets: dict[str, str | None] = {}

    def target(self, name: str) -> str | None:
        """The sink's target (ARN or ``log:`` URI); None while it does not exist (the trigger is
        not Ready, and gets no events meanwhile)."""
        if name not in self._targets:
            found = self._sinks.get(self._namespace, name)
            self._targets[name] = found.resource.target if found else None
        return self._targets[name]


def load_broker_config(
    store: ResourceStore, queue_prefix: str, namespace: str, name: str
) -> BrokerConfig | None:
    stored_broker = Resources(store, BROKERS).get(namespace, name)
    if stored_broker is None:
        return None
    broker = stored_broker.resource
    routes: list[Route] = []
    transforms: dict[str, EventTransform | None] = {}
    sinks = _Sinks(store, namespace)
    for stored in Resources(store, TRIGGERS).list(namespace):
        trigger = stored.resource
        if trigger.broker != name:
            continue
        transform, subscriber, resolved = None, trigger.subscriber_uri, True
        if trigger.subscriber_ref is not None:
            ref = trigger.subscriber_ref
            if ref not in transforms:
                found = Resources(store, EVENT_TRANSFORMS).get(namespace, ref)
                transforms[ref] = found.resource if found else None
            transform = transforms[ref]
            # A missing transform: the trigger is not Ready, and gets no events meanwhile.
            resolved = transform is not None
            subscriber = (transform.sink_uri or "") if transform else ""
        if trigger.subscriber_sink is not None:  # an IntegrationSink: its target
            subscriber = sinks.target(trigger.subscriber_sink) or ""
            resolved = bool(subscriber)
        delivery = effective_delivery(trigger, broker)
        if delivery.dead_letter_sink_ref is not None:
            found_sink = sinks.target(delivery.dead_letter_sink_ref)
            delivery = replace(delivery, dead_letter_sink_uri=found_sink)
        routes.append(
            Route(
                namespace=namespace,
                broker=name,
                name=trigger.name,
                queue=names.queue_name(
                    queue_prefix, namespace, name, trigger.name, fifo=trigger.ordered
                ),
                dlq=names.dlq_name(
                    queue_prefix, namespace, name, trigger.name, fifo=trigger.ordered
                ),
                subscriber_uri=subscriber,
                delivery=delivery,
                filter=_compiled_filter(trigger),
                ready=resolved and bool(stored.state.get("provisioned_at")),
                max_rate=max_rate(trigger, broker),
                transform=transform,
                transform_ref=trigger.subscriber_ref,
                subscriber_sink=trigger.subscriber_sink,
                subscriber_audience=(
                    transform.sink_audience if transform else trigger.subscriber_audience
                ),
                subscriber_ca_certs=trigger.subscriber_ca_certs,
                connection=trigger.annotations.get(CONNECTION_ANNOTATION),
                dead_letter_connection=trigger.annotations.get(DEAD_LETTER_CONNECTION_ANNOTATION),
            )
        )
    policies = broker_rules(store, broker)
    tokens: tuple[tuple[str, str], ...] = ()
    if broker.ingress_auth == "token" or policies:  # a token names its sender to the policies
        tokens = tuple(
            (t.name, str(t.doc["hash"]))
            for t in store.list(TOKEN, namespace)
            if t.doc.get("broker") == name
        )
    ready = [r for r in routes if r.ready]
    return BrokerConfig(
        namespace=namespace,
        name=name,
        broker=broker,
        legacy=broker.legacy_spec_versions,
        max_event_bytes=broker.max_event_bytes,
        auth=broker.ingress_auth,
        tokens=tokens,
        routes=tuple(routes),
        index=TriggerIndex((r, r.filter) for r in ready),
        policies=policies,
    )


# With an epoch to check, an unchanged broker is still read again in full this often: a safety net
# for a write whose epoch count failed after it (dynamodb_store.py).
FULL_RELOAD_SECONDS = 60.0


@dataclass(frozen=True)
class _Entry:
    checked: float  # when the config was last known current (loaded, or its epoch unchanged)
    loaded: float  # when it was last read in full
    epoch: int | None  # the namespace's epoch read before that read
    config: BrokerConfig | None


class ConfigCache:
    """Per-container cache of BrokerConfig (negative answers cached too).

    A config older than ``ttl`` is checked against the namespace's epoch, when one is given
    (one small read), and read again in full only when the epoch moved, or every
    FULL_RELOAD_SECONDS: a broker with hundreds of triggers is not read every ``ttl``."""

    def __init__(
        self,
        loader: Callable[[str, str], BrokerConfig | None],
        ttl: float,
        clock: Callable[[], float] = time.monotonic,
        epoch: Callable[[str], int] | None = None,
    ) -> None:
        self._loader = loader
        self._ttl = ttl
        self._clock = clock
        self._epoch = epoch
        self._entries: dict[tuple[str, str], _Entry] = {}
        self._loading: set[tuple[str, str]] = set()  # expired keys one thread is reloading
        self._lock = threading.Lock()

    def get(self, namespace: str, broker: str) -> BrokerConfig | None:
        key = (namespace, broker)
        now = self._clock()
        entry = self._entries.get(key)
        if entry is not None and now - entry.checked < self._ttl:
            return entry.config
        if entry is not None:
            # Expired: one thread reloads, the others keep the config they had meanwhile (a
            # broker with hundreds of triggers takes a while to read, and every concurrent
            # request reading it again would only queue behind the store).
            with self._lock:
                if key in self._loading:
                    return entry.config
                self._loading.add(key)
        try:
            epoch = self._epoch(namespace) if self._epoch is not None else None
            if (
                entry is not None
                and epoch is not None
                and epoch == entry.epoch
                and now - entry.loaded < FULL_RELOAD_SECONDS
            ):
                fresh = _Entry(self._clock(), entry.loaded, epoch, entry.config)
            else:
                config = self._loader(namespace, broker)
                # Stamped after the load: a slow load is not stale on arrival (every request
                # would reload).
                stamped = self._clock()
                fresh = _Entry(stamped, stamped, epoch, config)
        except UnavailableError:
            if entry is None:
                raise
            # The store is unreachable (throttled, down): keep serving the last good config,
            # and try the store again a TTL later rather than on every request.
            with self._lock:
                self._entries[key] = _Entry(self._clock(), entry.loaded, entry.epoch, entry.config)
            return entry.config
        finally:
            if entry is not None:
                with self._lock:
                    self._loading.discard(key)
        # Bounded: every valid broker name a client tries gets a (negative) entry.
        with self._lock:
            if key not in self._entries and len(self._entries) >= MAX_ENTRIES:
                self._entries.pop(next(iter(self._entries)))  # the oldest entry
            self._entries[key] = fresh
        return fresh.config

    def invalidate(self, namespace: str | None = None, broker: str | None = None) -> None:
        with self._lock:
            if namespace is None:
                self._entries.clear()
            else:
                self._entries.pop((namespace, broker or ""), None)
