"""The two roles of delivery (``services/delivery.py``): a trigger's subscriber, fed from its queue,
and its dead-letter sink, fed from its DLQ (design.md §2.3)."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from chalicelib import logs
from chalicelib.core import senders
from chalicelib.core.cloudevents.event import CloudEvent
from chalicelib.core.delivery.policy import dead_letter_extensions
from chalicelib.core.errors import ForbiddenError, UnavailableError, ValidationError
from chalicelib.core.resources.delivery_spec import Access
from chalicelib.core.resources.event_transform import address_path
from chalicelib.core.resources.integration_sink import address_path as sink_path
from chalicelib.core.transforms import Limits
from chalicelib.core.transforms import apply as apply_transform
from chalicelib.services.delivery_jobs import (
    KEEP_SECONDS,
    DeliveryParts,
    Job,
    NoDeadLetterSinkError,
    RetryLaterError,
    log_keys,
    moved_message,
)
from chalicelib.services.ingress import TTL_ATTRIBUTE, Ingress, TtlExceededError
from chalicelib.services.routing import Route

log = logs.get("delivery")


class Subscribers:
    """POSTs with ``Prefer: reply``, ingests replies, and moves what fails for good to the DLQ
    with the ``knativeerror*`` extensions."""

    function = "delivery"
    request_headers: Mapping[str, str] = MappingProxyType({"Prefer": "reply"})
    reads_replies = True
    rate_limited = True
    applies_transforms = True
    unpacks = False

    def __init__(self, parts: DeliveryParts, ingress: Ingress) -> None:
        self._parts = parts
        self._ingress = ingress

    def target(self, route: Route) -> str:
        return route.subscriber_uri

    def access(self, route: Route) -> Access:
        return Access(route.subscriber_audience, route.connection, route.subscriber_ca_certs)

    def reply(self, job: Job, reply: CloudEvent) -> None:
        queued, original = job.queued, job.event
        assert original is not None
        config = self._parts.cache.get(queued.namespace, queued.broker)
        if config is None:
            return
        transform = job.destination.route.transform
        if transform is not None and transform.sink_uri is not None:  # the sink's reply
            if transform.reply_discard:
                return
            if transform.reply_expression is not None:
                # A TransformError is the delivery's: dead-lettered with its reason.
                reply = apply_transform(
                    transform.reply_expression,
                    reply,
                    Limits(max_bytes=config.max_event_bytes),
                    legacy=config.legacy,
                )
        ttl = original.get(TTL_ATTRIBUTE)
        if ttl is not None:
            reply = reply.replace_attributes({TTL_ATTRIBUTE: ttl})
        try:
            sender = senders.trigger(queued.namespace, queued.trigger)
            self._ingress.ingest(config, [reply], queued.headers, sender)
        except TtlExceededError:
            log.warning(
                "reply %s dropped: knativebrokerttl exhausted (reply loop)",
                reply.id,
                extra={**log_keys(job), "reply_id": reply.id},
            )
        except ValidationError as exc:
            log.warning(
                "reply %s dropped: %s", reply.id, exc, extra={**log_keys(job), "reply_id": reply.id}
            )
        except ForbiddenError as exc:
            # The broker's EventPolicies refuse the trigger's replies (docs/security.md): no
            # retry changes that; recorded as ingress records a refused request.
            self._ingress.refuse(queued.namespace, queued.broker, "unauthorized", exc, [reply])
            log.warning(
                "reply %s dropped: %s", reply.id, exc, extra={**log_keys(job), "reply_id": reply.id}
            )
        self._parts.metrics.count(
            "reply_count",
            {"namespace": queued.namespace, "broker": queued.broker, "trigger": queued.trigger},
        )

    def give_up(self, job: Job) -> RetryLaterError | None:
        queued, event, answer = job.queued, job.event, job.answer
        assert event is not None and answer is not None
        route = job.destination.route
        target = job.destination.target
        if route.transform_ref is not None and (not target or job.transform_failed):
            # a transform without a sink, or a transform that failed: the transform's address
            target = address_path(route.namespace, route.transform_ref)
        elif route.subscriber_sink is not None and not target:  # the sink was deleted
            target = sink_path(route.namespace, route.subscriber_sink)
        extensions = dead_letter_extensions(target, answer.status, answer.detail)
        body = self._parts.claims.message_body(
            queued.namespace,
            queued.broker,
            queued.trigger,
            event.replace_attributes(extensions),
            queued.headers,
        )
        dlq = job.destination.route.dlq
        if self._parts.queues.send_batch(dlq, [moved_message(job.record, body)]):
            raise UnavailableError(f"could not move the event to {dlq}")
        return None


class DeadLetterSinks:
    """POSTs dead letters to the trigger's ``deadLetterSink`` (no reply is read); without a sink,
    or when the sink fails for good, the event stays in the DLQ for inspection and redrive."""

    function = "dead_letter"
    request_headers: Mapping[str, str] = MappingProxyType({})
    reads_replies = False
    rate_limited = False
    applies_transforms = False  # a dead letter is the original event
    unpacks = True  # a pack the redrive policy moved here: each event a dead letter of its own

    def __init__(self, parts: DeliveryParts) -> None:
        self._parts = parts

    def target(self, route: Route) -> str:
        sink = route.delivery.dead_letter_sink_uri
        if not sink:
            raise NoDeadLetterSinkError("no dead-letter sink is set; the event stays in the DLQ")
        return sink

    def access(self, route: Route) -> Access:
        delivery = route.delivery
        return Access(
            delivery.dead_letter_sink_audience,
            route.dead_letter_connection,
            delivery.dead_letter_sink_ca_certs,
        )

    def reply(self, job: Job, reply: CloudEvent) -> None:
        raise AssertionError("a dead-letter sink's answer is never read as a reply")

    def give_up(self, job: Job) -> RetryLaterError | None:
        self._parts.queues.change_visibility(job.queue, job.record["receiptHandle"], KEEP_SECONDS)
        return RetryLaterError("dead-letter sink failed; event kept in the DLQ")
