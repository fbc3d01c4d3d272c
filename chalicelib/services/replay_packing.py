"""A replay batch made into SQS messages per queue (docs/replay.md). By default each replayed event
is a message of its own, as ingress writes it (``Claims.message_body``: a claim check when it is
large), ten to a SendMessageBatch call. A replay with ``spec.packing`` puts a standard queue's
events in packs (many events of one trigger to a message, ``sqs_message.encode_pack``): fewer
calls, and fewer Lambda invocations to deliver them. A FIFO queue's events always go one to a
message, in order, each in its ``partitionkey`` group; so does an event too large for a pack."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from chalicelib.core import names
from chalicelib.core.cloudevents import codec
from chalicelib.core.cloudevents.event import CloudEvent
from chalicelib.core.cloudevents.json_format import dumps_compact
from chalicelib.core.cloudevents.sqs_message import (
    PACK_MAX_BYTES,
    PACK_MAX_EVENTS,
    encode_pack,
    pack_head,
    pack_overhead,
    sqs_text,
    utf8_size,
)
from chalicelib.core.delivery import ordering
from chalicelib.core.filtering.filters import Filter
from chalicelib.core.resources import replay as rp
from chalicelib.services.claims import Claims
from chalicelib.services.replay_reading import Batch
from chalicelib.services.routing import Route

Message = tuple[str, str | None, int]  # (body, FIFO group, events in it)
Messages = tuple[dict[str, list[Message]], int]  # (per queue, events whose payload is gone)

# An event's text in a pack is at most this long (a pack of one, with the longest names); a
# longer one goes alone.
PACKABLE_BYTES = PACK_MAX_BYTES - 1024


class Packer:
    """Fills packs of one trigger's events up to their bounds, appending each full one to
    ``out`` as a message."""

    def __init__(self, head: str, out: list[Message]) -> None:
        self.head = head
        self._room = PACK_MAX_BYTES - pack_overhead(head)
        self._out = out
        self._texts: list[str] = []
        self._size = 0  # the texts' sizes and a comma each

    def add(self, text: str) -> None:
        n = utf8_size(text) + 1
        if self._texts and (len(self._texts) == PACK_MAX_EVENTS or self._size + n > self._room):
            self.flush()
        self._texts.append(text)
        self._size += n

    def flush(self) -> None:
        if self._texts:
            self._out.append((encode_pack(self.head, self._texts), None, len(self._texts)))
            self._texts, self._size = [], 0


def pack_text(record: Mapping[str, Any], event: CloudEvent, name: str) -> str:
    """The replayed event's JSON text for a pack ("" when it is too large for one): the archived
    JSON carried through (it is ``codec.to_json`` of the event ingress accepted) with the
    extension added, not the event decoded and encoded again; an event archived by reference
    is encoded from its payload."""
    by_reference = isinstance(record.get("dataref"), str)
    doc = codec.to_json(event) if by_reference else dict(record["event"])
    doc[rp.EXTENSION] = name
    text = sqs_text(dumps_compact(doc))  # measured as it is sent
    return text if utf8_size(text) <= PACKABLE_BYTES else ""


def batch_messages(
    replay: rp.Replay,
    routes: Sequence[Route],
    extra: Filter | None,
    batch: Batch,
    read_event: Callable[[Mapping[str, Any]], CloudEvent | None],
    claims: Claims,
) -> Messages:
    """A batch's messages per queue, in the batch's order per queue, and the number of its
    events whose payload is gone. An event goes to a route when the route's filter and
    ``extra`` (the replay's ``spec.filters``) match it."""
    per_queue: dict[str, list[Message]] = {}
    packers: dict[str, Packer] = {}
    missing = 0
    name = replay.short_name

    def packer(route: Route) -> Packer:
        found = packers.get(route.queue)
        if found is None:
            head = pack_head(replay.namespace, replay.broker, route.name, {})
            found = packers[route.queue] = Packer(head, per_queue.setdefault(route.queue, []))
        return found

    for record in batch.events:
        event = read_event(record)
        if event is None:
            missing += 1
            continue
        if extra is not None and not extra.matches(event):
            continue
        replayed: CloudEvent | None = None
        text: str | None = None  # the event's JSON in a pack; "" when it goes alone
        claimed: dict[int, Any] = {}
        for route in routes:
            if not route.filter.matches(event):
                continue
            fifo = names.is_fifo(route.queue)
            if replay.packing and not fifo:
                if text is None:
                    text = pack_text(record, event, name)
                if text:
                    packer(route).add(text)
                    continue
            if replayed is None:
                replayed = event.replace_attributes({rp.EXTENSION: name})
            body = claims.message_body(
                replay.namespace, replay.broker, route.name, replayed, {}, claimed
            )
            group = ordering.group_for(fifo, event.get(ordering.PARTITION_KEY))
            per_queue.setdefault(route.queue, []).append((body, group, 1))
    for filled in packers.values():
        filled.flush()
    return per_queue, missing
