"""Observes the queues and mappings that exist, and executes provisioning plans of every kind
(``reconcile.Action``) through the ports: the plan is pure (``core/reconcile.py``), this is the
executor."""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Sequence

from chalicelib.config import Settings
from chalicelib.core import names
from chalicelib.core.errors import NotFoundError, UnavailableError
from chalicelib.core.reconcile import (
    Action,
    CreateMapping,
    CreateQueue,
    DeleteMapping,
    DeleteQueue,
    EnableMapping,
    ObservedMapping,
    ObservedQueue,
    ObservedState,
    ProvisioningConfig,
    SetMappingConcurrency,
    SetQueueAttributes,
    TriggerKey,
)
from chalicelib.core.resources import kafka_source as ks
from chalicelib.ports import Mappings, Queues


class Provisioner:
    def __init__(self, queues: Queues, mappings: Mappings, settings: Settings) -> None:
        self._queues = queues
        self._mappings = mappings
        self.config = ProvisioningConfig(
            prefix=settings.queue_prefix,
            delivery_function=settings.delivery_function,
            dead_letter_function=settings.dead_letter_function,
            function_timeout_s=settings.delivery_function_timeout_seconds,
            max_concurrency=settings.max_concurrency,
            mappings_enabled=settings.mappings_enabled,
        )

    # ---- observe ------------------------------------------------------------------------------

    def observe(self, keys: Iterable[TriggerKey] | None = None) -> ObservedState:
        """What exists: every queue with our prefix (keys None), or just those of ``keys``."""
        prefix = self.config.prefix
        if keys is None:
            queues = [ObservedQueue(q.name, q.attributes) for q in self._queues.list(prefix)]
        else:
            queues = []
            for key in keys:
                for name in names.trigger_queue_names(prefix, *key):
                    info = self._queues.get(name)
                    if info is not None:
                        queues.append(ObservedQueue(info.name, info.attributes))
        mappings = [
            ObservedMapping.from_arns(
                m.uuid,
                m.source_arn,
                m.function_name,
                m.enabled,
                m.batch_size,
                m.function_response_types,
                m.maximum_concurrency,
            )
            for function in (self.config.delivery_function, self.config.dead_letter_function)
            for m in self._mappings.list(function)
        ]
        if keys is not None:
            wanted = {q for key in keys for q in _queue_names(prefix, key)}
            mappings = [m for m in mappings if m.queue_name in wanted]
        return ObservedState(tuple(queues), tuple(mappings))

    def kafka_mappings(self, function_name: str) -> list[ks.KafkaMappingInfo]:
        return self._mappings.list_kafka(function_name)

    def queue_names(self, key: TriggerKey) -> tuple[str, ...]:
        """Every name the trigger's queues may have (standard and FIFO)."""
        return _queue_names(self.config.prefix, key)

    def dlq_of(self, key: TriggerKey, *, ordered: bool = False) -> str:
        return names.dlq_name(self.config.prefix, *key, fifo=ordered)

    # ---- execute -------------------------------------------------------------------------------

    def execute(self, actions: Sequence[Action]) -> list[str]:
        """Apply the actions in order; returns what was done, one line each."""
        done: list[str] = []
        for action in actions:
            self._apply(action)
            done.append(action.describe())
        return done

    def _apply(self, action: Action) -> None:
        if isinstance(action, CreateQueue):
            self._queues.create(action.name, self._attributes(action))
        elif isinstance(action, SetQueueAttributes):
            self._queues.set_attributes(action.name, self._attributes(action))
        elif isinstance(action, DeleteQueue):
            self._queues.delete(action.name)
        elif isinstance(action, CreateMapping):
            self._mappings.create(self._arn(action.queue_name), action)
        elif isinstance(action, SetMappingConcurrency):
            self._mappings.set_concurrency(action.uuid, action.maximum_concurrency)
        elif isinstance(action, EnableMapping):
            self._mappings.set_enabled(action.uuid, True)
        elif isinstance(action, DeleteMapping | ks.DeleteKafkaMapping):
            with contextlib.suppress(NotFoundError):  # already gone: the goal is met
                self._mappings.delete(action.uuid)
        elif isinstance(action, ks.CreateKafkaMapping):
            self._mappings.create_kafka(action.spec, action.enabled)
        elif isinstance(action, ks.UpdateKafkaMapping):
            self._mappings.update_kafka(action.uuid, action.spec, action.enabled)
        else:  # pragma: no cover - the Action union is closed
            raise TypeError(f"unknown action {action!r}")

    def _attributes(self, action: CreateQueue | SetQueueAttributes) -> dict[str, str]:
        """The action's attributes, with the redrive policy pointing at the DLQ's real ARN."""
        attributes = dict(action.attributes)
        if action.redrive is not None:
            dlq_arn = self._arn(action.redrive.dead_letter_queue)
            attributes["RedrivePolicy"] = action.redrive.policy_json(dlq_arn)
        return attributes

    def _arn(self, queue: str) -> str:
        info = self._queues.get(queue)
        if info is None:
            raise UnavailableError(f"queue {queue} does not exist")
        return info.arn


def _queue_names(prefix: str, key: TriggerKey) -> tuple[str, ...]:
    return names.trigger_queue_names(prefix, *key)
