"""Brokers and Triggers (design.md §2.2): what each kind adds to the generic resource service
(``services/resources.py``), and the provisioning of a trigger's queues and mappings through a
plan (``core/reconcile.py``) executed by the Provisioner. Status is computed from stored facts
and the broker's existence each time it is read; Ready is derived, never stored."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from chalicelib import logs
from chalicelib.config import Settings
from chalicelib.core import reconcile
from chalicelib.core.clock import utcnow
from chalicelib.core.delivery.aws_targets import allowed, is_arn, not_allowed_problem
from chalicelib.core.errors import BrokerError, Problem, ValidationError
from chalicelib.core.resources import conditions
from chalicelib.core.resources.broker import Broker, ingress_url
from chalicelib.core.resources.delivery_spec import (
    CONNECTION_ANNOTATION,
    DEAD_LETTER_CONNECTION_ANNOTATION,
    kafka_target,
)
from chalicelib.core.resources.event_transform import EventTransform, address_path
from chalicelib.core.resources.integration_sink import IntegrationSink
from chalicelib.core.resources.trigger import Trigger, effective_delivery
from chalicelib.ports import Queues
from chalicelib.services.connections import ConnectionChecks
from chalicelib.services.provisioner import Provisioner
from chalicelib.services.resources import Hooks, Resources, Stored
from chalicelib.services.routing import ConfigCache
from chalicelib.services.target_checks import TargetChecks
from chalicelib.services.tokens import Tokens

log = logs.get("control_plane")

NOT_PROVISIONED = {"provisioned_at": None, "dependencies_ok": None, "message": ""}


def _iso(moment: datetime | None) -> str | None:
    return moment.isoformat() if moment else None


def _parse_iso(text: object) -> datetime | None:
    return datetime.fromisoformat(text) if isinstance(text, str) and text else None


class ControlPlane:
    """Provisions triggers (on every write, and in the scheduled repair)."""

    def __init__(
        self,
        brokers: Resources[Broker],
        triggers: Resources[Trigger],
        provisioner: Provisioner,
        cache: ConfigCache,
        clock: Callable[[], datetime] = utcnow,
    ) -> None:
        self.brokers = brokers
        self.triggers = triggers
        self.provisioner = provisioner
        self._cache = cache
        self._clock = clock

    def broker_of_trigger(self, namespace: str, name: str) -> str:
        return self.triggers.require(namespace, name).resource.broker

    def triggers_of(self, namespace: str, broker: str) -> list[Stored[Trigger]]:
        return [s for s in self.triggers.list(namespace) if s.resource.broker == broker]

    def remove_queues(self, triggers: Sequence[Trigger]) -> None:
        keys = [reconcile.trigger_key(t) for t in triggers]
        config = self.provisioner.config
        self.provisioner.execute(
            reconcile.plan_removal(config, keys, self.provisioner.observe(keys))
        )

    def provision(self, stored: Stored[Trigger], broker: Broker | None) -> Stored[Trigger]:
        """Plan and apply one trigger's queues and mappings, and record the outcome."""
        trigger = stored.resource
        key = reconcile.trigger_key(trigger)
        try:
            actions = reconcile.plan_trigger(
                self.provisioner.config, trigger, broker, self.provisioner.observe([key])
            )
            self.provisioner.execute(actions)
        except BrokerError as exc:
            log.warning("provisioning %s failed: %s", key, exc)
            failed = {
                "provisioned_at": stored.state.get("provisioned_at"),
                "dependencies_ok": False,
                "message": f"Provisioning failed, the reconciler will retry: {exc.detail}",
            }
            return self.triggers.with_state(stored, failed)
        return self.triggers.with_state(stored, self._provisioned(broker))

    def _provisioned(self, broker: Broker | None) -> dict[str, Any]:
        if broker is None:
            return dict(NOT_PROVISIONED)
        return {"provisioned_at": _iso(self._clock()), "dependencies_ok": True, "message": ""}

    def reconcile_all(self) -> list[str]:
        """The scheduled repair: plan every trigger against everything that exists, apply, and
        record which triggers had drift. What exists is read first (the long part: every queue),
        what is wanted last, so that a broker or trigger deleted meanwhile is not planned back."""
        observed = self.provisioner.observe()
        brokers = {(s.namespace, s.name): s.resource for s in self.brokers.list()}
        items = self.triggers.list()
        desired = reconcile.DesiredState(
            self.provisioner.config, tuple(brokers.values()), tuple(s.resource for s in items)
        )
        actions = reconcile.plan(desired, observed)
        done = self.provisioner.execute(actions)
        touched = {reconcile.queue_of(a) for a in actions}
        for stored in items:
            trigger = stored.resource
            broker = brokers.get((trigger.namespace, trigger.broker))
            if broker is None:
                if (
                    stored.state.get("provisioned_at")
                    or stored.state.get("dependencies_ok") is not None
                ):
                    self.triggers.with_state(stored, NOT_PROVISIONED)
                continue
            mine = set(self.provisioner.queue_names(reconcile.trigger_key(trigger)))
            if mine & touched or not stored.state.get("dependencies_ok"):
                self.triggers.with_state(stored, self._provisioned(broker))
        if done:
            log.warning("reconciler repaired drift: %s", "; ".join(done))
            self._cache.invalidate()
        return done


def check_destinations(settings: Settings, uris: Sequence[tuple[str, str | None]]) -> None:
    """A deployment refuses at PUT the subscribers and sinks its delivery may not reach, instead
    of accepting triggers whose every event would be dead-lettered: ``kafka://`` when delivery
    cannot reach Kafka, an ARN outside the stage's target_arn_patterns (docs/targets.md)."""
    problems = [
        Problem(
            path,
            "this deployment cannot deliver to Kafka: set BROKER_KAFKA_DELIVERY=true for the "
            "stage and put the delivery functions in the cluster's VPC (docs/deploy.md, Kafka)",
        )
        for path, uri in uris
        if not settings.kafka_delivery and uri is not None and kafka_target(uri) is not None
    ]
    problems += [
        not_allowed_problem(uri, path)
        for path, uri in uris
        if uri is not None and is_arn(uri) and not allowed(uri, settings.target_arn_patterns)
    ]
    if problems:
        raise ValidationError(problems)


class BrokerHooks(Hooks[Broker]):
    def __init__(
        self,
        control_plane: ControlPlane,
        tokens: Tokens,
        cache: ConfigCache,
        settings: Settings,
        clock: Callable[[], datetime] = utcnow,
        policies: Callable[[Broker], list[dict[str, str]]] | None = None,
    ) -> None:
        self._cp = control_plane
        self._tokens = tokens
        self._policies = policies  # status.policies: the EventPolicies that apply (security.md)
        self._cache = cache
        self._settings = settings
        self._public_url = settings.public_url
        self._ttl = settings.cache_ttl_seconds
        self._clock = clock

    def status(self, stored: Stored[Broker]) -> dict[str, Any]:
        broker = stored.resource
        status = conditions.broker_status(
            broker,
            address_url=ingress_url(self._public_url, broker.namespace, broker.name),
            now=self._clock(),
            propagation_ttl_s=self._ttl,
            provisioned_at=_parse_iso(stored.state.get("stored_at")),
            previous=stored.status,
        )
        applied = self._policies(broker) if self._policies is not None else []
        if applied:
            status["policies"] = applied
        return status

    def initial_state(self, now: datetime) -> dict[str, Any]:
        return {"stored_at": _iso(now)}

    def check(self, resource: Broker) -> None:
        sink = resource.delivery.dead_letter_sink_uri
        check_destinations(self._settings, [("spec.delivery.deadLetterSink.uri", sink)])

    def saved(self, stored: Stored[Broker], existed: bool) -> Stored[Broker]:
        broker = stored.resource
        self._cache.invalidate(broker.namespace, broker.name)
        # Triggers created before their broker (or whose delivery follows the broker's) get
        # their queues now.
        for trigger in self._cp.triggers_of(broker.namespace, broker.name):
            self._cp.provision(trigger, broker)
        return stored

    def removing(self, stored: Stored[Broker]) -> dict[str, Any]:
        triggers = self._cp.triggers_of(stored.namespace, stored.name)
        self._cp.remove_queues([t.resource for t in triggers])
        # Tokens go before the broker: a re-created broker must not accept its predecessor's.
        self._tokens.revoke_all(stored.namespace, stored.name)
        return {"triggersLeftNotReady": [t.name for t in triggers]}

    def removed(self, stored: Stored[Broker]) -> None:
        for trigger in self._cp.triggers_of(stored.namespace, stored.name):
            self._cp.triggers.with_state(trigger, NOT_PROVISIONED)
        self._cache.invalidate(stored.namespace, stored.name)


class TriggerHooks(Hooks[Trigger]):
    def __init__(
        self,
        control_plane: ControlPlane,
        queues: Queues,
        cache: ConfigCache,
        settings: Settings,
        clock: Callable[[], datetime] = utcnow,
        transforms: Resources[EventTransform] | None = None,
        target_checks: TargetChecks | None = None,
        connections: ConnectionChecks | None = None,
        sinks: Resources[IntegrationSink] | None = None,
    ) -> None:
        self._cp = control_plane
        self._sinks = sinks  # what a subscriber.ref or deadLetterSink.ref names (docs/targets.md)
        self._connections = connections  # what its connection annotations name (docs/targets.md)
        self._target_checks = target_checks  # an ARN subscriber's readiness (docs/targets.md)
        self._transforms = transforms  # what a subscriber.ref names (docs/transforms.md)
        self._queues = queues
        self._cache = cache
        self._settings = settings
        self._ttl = settings.cache_ttl_seconds
        self._clock = clock

    def check(self, resource: Trigger) -> None:
        sink = resource.delivery.dead_letter_sink_uri if resource.delivery else None
        check_destinations(
            self._settings,
            [
                ("spec.subscriber.uri", resource.subscriber_uri),
                ("spec.delivery.deadLetterSink.uri", sink),
            ],
        )

    def status(self, stored: Stored[Trigger]) -> dict[str, Any]:
        trigger = stored.resource
        broker = self._cp.brokers.get(trigger.namespace, trigger.broker)
        return self._status(stored, broker.resource if broker else None)

    def statuses(self, items: Sequence[Stored[Trigger]]) -> list[dict[str, Any]]:
        namespaces = {s.namespace for s in items}
        brokers = {
            (b.namespace, b.name): b.resource
            for ns in namespaces
            for b in self._cp.brokers.list(ns)
        }
        return [self._status(s, brokers.get((s.namespace, s.resource.broker))) for s in items]

    def _status(self, stored: Stored[Trigger], broker: Broker | None) -> dict[str, Any]:
        state = stored.state
        trigger = stored.resource
        transform_url = None
        if trigger.subscriber_ref is not None and self._transforms is not None:
            found = self._transforms.get(trigger.namespace, trigger.subscriber_ref)
            if found is not None:
                transform_url = self._settings.public_url.rstrip("/") + address_path(
                    trigger.namespace, trigger.subscriber_ref
                )
        targets = self._sink_targets(trigger, broker)
        subscriber = trigger.subscriber_uri
        if trigger.subscriber_sink is not None:
            subscriber = targets.get(trigger.subscriber_sink, "")
        return conditions.trigger_status(
            stored.resource,
            broker,
            dependencies_ok=state.get("dependencies_ok"),
            dependency_message=state.get("message", ""),
            now=self._clock(),
            propagation_ttl_s=self._ttl,
            provisioned_at=_parse_iso(state.get("provisioned_at")),
            previous=stored.status,
            transform_url=transform_url,
            subscriber_problem=(
                self._target_checks.problem(subscriber)
                if self._target_checks is not None and trigger.subscriber_ref is None
                else None
            )
            or self._connection_problem(trigger, CONNECTION_ANNOTATION),
            dead_letter_problem=self._connection_problem(
                trigger, DEAD_LETTER_CONNECTION_ANNOTATION
            ),
            sink_targets=targets,
        )

    def _sink_targets(self, trigger: Trigger, broker: Broker | None) -> dict[str, str]:
        """The targets of the IntegrationSinks the trigger names, of those that exist."""
        named = {trigger.subscriber_sink, effective_delivery(trigger, broker).dead_letter_sink_ref}
        out: dict[str, str] = {}
        for name in sorted(n for n in named if n is not None):
            found = self._sinks.get(trigger.namespace, name) if self._sinks is not None else None
            if found is not None:
                out[name] = found.resource.target
        return out

    def _connection_problem(self, trigger: Trigger, annotation: str) -> tuple[str, str] | None:
        if self._connections is None:
            return None
        return self._connections.trigger_problem(
            trigger.namespace, trigger.annotations.get(annotation)
        )

    def saved(self, stored: Stored[Trigger], existed: bool) -> Stored[Trigger]:
        return self._provision(stored)[0]

    def saved_status(
        self, stored: Stored[Trigger], existed: bool
    ) -> tuple[Stored[Trigger], dict[str, Any]]:
        # The broker provisioning read is the one the answer's status uses: one read a PUT.
        stored, broker = self._provision(stored)
        return stored, self._status(stored, broker)

    def _provision(self, stored: Stored[Trigger]) -> tuple[Stored[Trigger], Broker | None]:
        trigger = stored.resource
        found = self._cp.brokers.get(trigger.namespace, trigger.broker)
        broker = found.resource if found else None
        stored = self._cp.provision(stored, broker)
        self._cache.invalidate(trigger.namespace, trigger.broker)
        return stored, broker

    def removing(self, stored: Stored[Trigger]) -> dict[str, Any]:
        trigger = stored.resource
        dlq = self._cp.provisioner.dlq_of(reconcile.trigger_key(trigger), ordered=trigger.ordered)
        pending = self._queues.depth(dlq) if self._queues.get(dlq) else 0
        self._cp.remove_queues([stored.resource])
        return {"deadLettersDiscarded": pending}

    def removed(self, stored: Stored[Trigger]) -> None:
        self._cache.invalidate(stored.namespace, stored.resource.broker)
