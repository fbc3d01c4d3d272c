"""Builds the services from Settings, once per warm container (no client at import time)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property, lru_cache

from chalicelib import logs
from chalicelib.config import Settings
from chalicelib.container_adapters import Adapters
from chalicelib.core.cloudevents.sqs_message import SQS_MAX_BATCH_BYTES
from chalicelib.core.resources.broker import BROKERS, Broker
from chalicelib.core.resources.connection import CONNECTIONS, Connection
from chalicelib.core.resources.event_policy import EVENT_POLICIES, EventPolicy
from chalicelib.core.resources.event_transform import EVENT_TRANSFORMS, EventTransform
from chalicelib.core.resources.integration_sink import INTEGRATION_SINKS, IntegrationSink
from chalicelib.core.resources.integration_source import INTEGRATION_SOURCES, IntegrationSource
from chalicelib.core.resources.kafka_source import KAFKA_SOURCES, KafkaSource
from chalicelib.core.resources.ping_source import PING_SOURCES, PingSource
from chalicelib.core.resources.replay import REPLAYS, Replay
from chalicelib.core.resources.trigger import TRIGGERS, Trigger
from chalicelib.services.claims import Claims
from chalicelib.services.connection_auth import ConnectionAuth
from chalicelib.services.connections import ConnectionChecks, ConnectionHooks
from chalicelib.services.control_plane import BrokerHooks, ControlPlane, TriggerHooks
from chalicelib.services.dead_letters import DeadLetters
from chalicelib.services.delivery import Delivery, DeliveryParts
from chalicelib.services.delivery_roles import DeadLetterSinks, Subscribers
from chalicelib.services.event_types import EventTypeSample, MetricsEventTypes, metrics_fetcher
from chalicelib.services.filter_test import FilterTest
from chalicelib.services.ingress import Ingress, send_in_batches
from chalicelib.services.integration_events import SourceEvents, stored_lookup
from chalicelib.services.integration_sinks import IntegrationSinkHooks
from chalicelib.services.integration_sources import IntegrationSourceHooks
from chalicelib.services.kafka_ingress import KafkaIngress, SourceIndex
from chalicelib.services.kafka_sources import KafkaSourceHooks
from chalicelib.services.metrics import Metrics
from chalicelib.services.oidc import Discovery, SigningKey, TokenIssuer
from chalicelib.services.ping_sources import PingSourceHooks
from chalicelib.services.policies import EventPolicyHooks, PolicyTest, applied_refs
from chalicelib.services.provisioner import Provisioner
from chalicelib.services.registry import Registry
from chalicelib.services.replay_runner import ReplayRunner, RunnerOptions
from chalicelib.services.replays import ReplayHooks, ReplayService
from chalicelib.services.resources import Resources, ResourceService
from chalicelib.services.routing import ConfigCache, load_broker_config
from chalicelib.services.schedules import Pings, Scheduling
from chalicelib.services.shared_sends import SharedSends
from chalicelib.services.target_checks import TargetChecks
from chalicelib.services.tokens import Tokens
from chalicelib.services.transforms import EventTransformHooks

log = logs.get("ingress")


@dataclass
class Container(Adapters):
    """The services, built on the adapters (container_adapters.py)."""

    @cached_property
    def metrics(self) -> Metrics:
        # Local mode serves the aggregate at /metrics instead of flooding the console with EMF.
        sink = (lambda line: None) if self.settings.local_mode else None
        return Metrics(self.settings.metrics_enabled, sink=sink)

    @cached_property
    def cache(self) -> ConfigCache:
        prefix = self.settings.queue_prefix
        return ConfigCache(
            lambda ns, name: load_broker_config(self.store, prefix, ns, name),
            self.settings.cache_ttl_seconds,
            epoch=self.store.epoch,
        )

    @cached_property
    def claims(self) -> Claims:
        s = self.settings
        return Claims(self.blobs, s.claim_bucket, archive_bucket=s.archive_bucket)

    @cached_property
    def ingress(self) -> Ingress:
        return Ingress(
            self.cache,
            SharedSends(self.queues),
            self.claims,
            self.archive,
            self.metrics,
            log=log.warning,
            observe=self.event_types.observe,
            archive_batch_seconds=self.settings.archive_batch_seconds,
            archive_carry_seconds=self.settings.archive_carry_seconds,
            seen=self.seen_events,
            authorization_mode=self.settings.authorization_default_mode,
        )

    @cached_property
    def delivery_parts(self) -> DeliveryParts:
        return DeliveryParts(
            self.cache,
            self.queues,
            self.claims,
            self.sender,
            self.kafka_publisher,
            self.metrics,
            self.archive,
            archive_batch_seconds=self.settings.archive_batch_seconds,
            archive_carry_seconds=self.settings.archive_carry_seconds,
            max_attempt_timeout=max(1.0, self.settings.delivery_function_timeout_seconds - 10),
            rate_limiter=self.rate_limiter,
            # a third of the function's time at most waiting for tokens (docs/flow-control.md)
            rate_hold=max(10.0, self.settings.delivery_function_timeout_seconds / 3),
            in_flight=self.settings.delivery_in_flight,
            targets=self.aws_targets,
            tokens=self.token_issuer,
            connections=self.connection_auth,
        )

    # ---- tokens of authenticated delivery (design.md §2.5) ----------------------------------

    @cached_property
    def signing_key(self) -> SigningKey:
        from chalicelib.adapters.kms_signer import KmsSigner

        return SigningKey(KmsSigner(self.clients, self.settings.signing_key))

    @cached_property
    def token_issuer(self) -> TokenIssuer:
        return TokenIssuer(self.signing_key, self.settings.public_url)

    @cached_property
    def discovery(self) -> Discovery:
        return Discovery(self.signing_key, self.settings.public_url)

    # ---- Connections of authenticated delivery (docs/targets.md) -------------------------------

    @cached_property
    def connection_auth(self) -> ConnectionAuth:
        from chalicelib.adapters.sigv4_signer import BotocoreSigner

        connections = Resources(self.store, CONNECTIONS)

        def read(namespace: str, name: str) -> Connection | None:
            found = connections.get(namespace, name)
            return found.resource if found is not None else None

        return ConnectionAuth(
            read,
            self.secrets,
            self.sender,
            BotocoreSigner(),
            lookup_ttl=self.settings.cache_ttl_seconds,
        )

    @cached_property
    def connection_checks(self) -> ConnectionChecks:
        return ConnectionChecks(Resources(self.store, CONNECTIONS), self.connection_auth)

    @cached_property
    def connections(self) -> ResourceService[Connection]:
        hooks = ConnectionHooks(self.connection_checks, self.settings)
        return ResourceService(self.connection_checks.connections, hooks)

    @cached_property
    def delivery(self) -> Delivery:
        return Delivery(self.delivery_parts, Subscribers(self.delivery_parts, self.ingress))

    @cached_property
    def dead_letter(self) -> Delivery:
        return Delivery(self.delivery_parts, DeadLetterSinks(self.delivery_parts))

    @cached_property
    def provisioner(self) -> Provisioner:
        return Provisioner(self.queues, self.mappings, self.settings)

    @cached_property
    def dead_letters(self) -> DeadLetters:
        return DeadLetters(self.queues, self.claims, self.settings.queue_prefix)

    @cached_property
    def tokens(self) -> Tokens:
        return Tokens(self.store, self.cache)

    # ---- control plane: one generic service per resource kind (services/resources.py) --------

    @cached_property
    def control_plane(self) -> ControlPlane:
        brokers, triggers = Resources(self.store, BROKERS), Resources(self.store, TRIGGERS)
        return ControlPlane(brokers, triggers, self.provisioner, self.cache)

    @cached_property
    def brokers(self) -> ResourceService[Broker]:
        hooks = BrokerHooks(
            self.control_plane,
            self.tokens,
            self.cache,
            self.settings,
            policies=lambda broker: applied_refs(self.store, broker),
        )
        return ResourceService(self.control_plane.brokers, hooks)

    @cached_property
    def triggers(self) -> ResourceService[Trigger]:
        hooks = TriggerHooks(
            self.control_plane,
            self.queues,
            self.cache,
            self.settings,
            transforms=Resources(self.store, EVENT_TRANSFORMS),
            target_checks=TargetChecks(self.aws_targets),
            connections=self.connection_checks,
            sinks=Resources(self.store, INTEGRATION_SINKS),
        )
        return ResourceService(self.control_plane.triggers, hooks)

    @cached_property
    def integration_sinks(self) -> ResourceService[IntegrationSink]:  # docs/targets.md
        hooks = IntegrationSinkHooks(self.cache, self.settings, TargetChecks(self.aws_targets))
        return ResourceService(Resources(self.store, INTEGRATION_SINKS), hooks)

    @cached_property
    def event_transforms(self) -> ResourceService[EventTransform]:  # docs/transforms.md
        hooks = EventTransformHooks(
            Resources(self.store, EVENT_TRANSFORMS), self.cache, self.settings
        )
        return ResourceService(hooks.transforms, hooks)

    # ---- who may send (docs/security.md) ---------------------------------------------------------

    @cached_property
    def event_policies(self) -> ResourceService[EventPolicy]:
        hooks = EventPolicyHooks(
            Resources(self.store, EVENT_POLICIES), self.cache, self.settings.cache_ttl_seconds
        )
        return ResourceService(hooks.policies, hooks)

    @cached_property
    def policy_test(self) -> PolicyTest:
        return PolicyTest(self.store, self.settings.authorization_default_mode)

    @cached_property
    def kafka_sources(self) -> ResourceService[KafkaSource]:
        return ResourceService(self.kafka_source_hooks.sources, self.kafka_source_hooks)

    # ---- sources on a schedule (docs/sources.md) -------------------------------------------------

    @cached_property
    def scheduling(self) -> Scheduling:
        from chalicelib.adapters.scheduler_schedules import SchedulerSchedules

        s = self.settings
        schedules = SchedulerSchedules(self.clients, s.region, s.pings_function, s.scheduler_role)
        return Scheduling(schedules, s.queue_prefix, seconds=s.local_mode)

    @cached_property
    def pings(self) -> Pings:
        return Pings(self.cache, self.ingress, self.sender, self.metrics)

    @cached_property
    def ping_source_hooks(self) -> PingSourceHooks:
        sources = Resources(self.store, PING_SOURCES)
        cp = self.control_plane
        return PingSourceHooks(sources, cp.brokers, self.scheduling, self.settings)

    @cached_property
    def ping_sources(self) -> ResourceService[PingSource]:
        return ResourceService(self.ping_source_hooks.sources, self.ping_source_hooks)

    @cached_property
    def integration_source_hooks(self) -> IntegrationSourceHooks:
        from chalicelib.adapters.source_plumbing import AwsSourcePlumbing

        sources = Resources(self.store, INTEGRATION_SOURCES)
        cp = self.control_plane
        s = self.settings
        plumbing = AwsSourcePlumbing(self.clients, s.sources_function, s.queue_prefix)
        return IntegrationSourceHooks(sources, cp.brokers, self.scheduling, plumbing, s)

    @cached_property
    def source_events(self) -> SourceEvents:
        """The ``sources`` function: the records of the IntegrationSources' mappings and rules."""
        lookup = stored_lookup(self.integration_source_hooks.sources)
        return SourceEvents(lookup, self.pings.send, self.metrics)

    @cached_property
    def integration_sources(self) -> ResourceService[IntegrationSource]:
        hooks = self.integration_source_hooks
        return ResourceService(hooks.sources, hooks)

    # ---- replays (docs/replay.md) ----------------------------------------------------------------

    @cached_property
    def filter_test(self) -> FilterTest:
        return FilterTest(self.control_plane.triggers)

    @cached_property
    def replay_resources(self) -> ResourceService[Replay]:
        cp = self.control_plane
        hooks = ReplayHooks(
            Resources(self.store, REPLAYS),
            cp.brokers,
            cp.triggers,
            notify=lambda: self.replay_runner.wake(),
        )
        return ResourceService(hooks.replays, hooks)

    @cached_property
    def replays(self) -> ReplayService:
        return ReplayService(self.replay_resources)

    @cached_property
    def replay_runner(self) -> ReplayRunner:
        prefix = self.settings.queue_prefix
        return ReplayRunner(
            self.replay_resources.resources,
            lambda ns, name: load_broker_config(self.store, prefix, ns, name),
            # Over the queues themselves, not ingress's SharedSends (one call in flight per
            # queue): a replay batch's calls go side by side (docs/replay.md).
            lambda queue, items: send_in_batches(self.queues, queue, items, SQS_MAX_BATCH_BYTES),
            self.claims,
            self.blobs,
            self.blob_listing,
            self.metrics,
            RunnerOptions(
                archive_bucket=self.settings.archive_bucket,
                settle_seconds=self.settings.replay_settle_seconds,
            ),
        )

    # ---- xRegistry (design.md §9) ---------------------------------------------------------------

    @cached_property
    def event_types(self) -> EventTypeSample:
        return EventTypeSample(self.store)

    @cached_property
    def registry(self) -> Registry:
        # The metrics job's --out location (s3://bucket/prefix or a local directory); without
        # it the ingress sample alone is used.
        location = self.settings.metrics_location
        fetch = metrics_fetcher(location, self.blobs) if location else lambda: None
        return Registry(
            self.store,
            self.settings,
            MetricsEventTypes(fetch, ttl_s=self.settings.metrics_refresh_seconds),
        )

    # ---- Kafka (design.md §10) ------------------------------------------------------------------

    @cached_property
    def kafka_source_hooks(self) -> KafkaSourceHooks:
        sources = Resources(self.store, KAFKA_SOURCES)
        return KafkaSourceHooks(
            sources,
            self.control_plane.brokers,
            self.provisioner,
            self.queues,
            self.kafka_offsets,
            self.settings,
        )

    @cached_property
    def kafka_ingress(self) -> KafkaIngress:
        return KafkaIngress(
            SourceIndex(self.store, self.settings.cache_ttl_seconds),
            self.cache,
            self.ingress,
            self.queues,
            self.blobs,
            self.archive,
            self.metrics,
            queue_prefix=self.settings.queue_prefix,
            claim_bucket=self.settings.claim_bucket,
        )


_override: Container | None = None


@lru_cache(maxsize=1)
def _from_env() -> Container:
    # Fails closed: a function whose environment lacks its stage (or asks for local mode on a
    # deployable stage) raises ConfigurationError here, on its first invocation, before any
    # handler touches a port. Not at import: app.py imports with an empty environment.
    return Container(Settings.from_env().require_runnable())


def get_container() -> Container:
    return _override if _override is not None else _from_env()


def use_container(container: Container | None) -> None:
    """Make the app use ``container`` (tests with in-memory fakes); None restores the default."""
    global _override
    _override = container
