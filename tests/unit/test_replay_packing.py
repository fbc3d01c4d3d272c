"""A replay batch made into SQS messages (services/replay_packing.py, docs/replay.md): by
default one event a message; with ``spec.packing``, a standard queue's events in packs filled by
count and by bytes, an event too large for a pack alone between them, a FIFO queue's events one a
message; the order per queue is the batch's, and an event whose payload is gone is counted."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from chalicelib.core import names
from chalicelib.core.archive_reader import Position
from chalicelib.core.cloudevents.json_format import dumps_compact, dumps_utf8
from chalicelib.core.cloudevents.sqs_message import (
    PACK_MAX_BYTES,
    PACK_MAX_EVENTS,
    decode_messages,
    pack_head,
    pack_overhead,
)
from chalicelib.core.filtering.filters import Filter, MatchAll
from chalicelib.core.resources import replay as rp
from chalicelib.core.resources.delivery_spec import DeliverySpec
from chalicelib.services.claims import Claims
from chalicelib.services.metrics import Metrics
from chalicelib.services.replay_packing import PACKABLE_BYTES, batch_messages
from chalicelib.services.replay_reading import ArchiveReader, Batch
from chalicelib.services.routing import Route
from tests.fakes import MemoryBlobs

ARCHIVE = "archive-bucket"
SPEC = {"from": "2026-01-01T00:00:00Z", "to": "2026-01-01T01:00:00Z"}
REPLAY = rp.parse_replay("ns", {"spec": SPEC}, "default/r1")
PACKED = rp.parse_replay("ns", {"spec": {**SPEC, "packing": True}}, "default/r1")
# Names of different lengths: their packs' heads, so their rooms, differ.
ROUTE_NAMES = ("a", "orders", "a-trigger-with-a-much-longer-name-than-the-others-" + "x" * 20)
PACKABLE = PACKABLE_BYTES  # a longer text goes alone


def _route(name: str, fifo: bool = False, filter: Filter | None = None) -> Route:
    return Route(
        namespace="ns",
        broker="default",
        name=name,
        queue=names.queue_name("sb-test", "ns", "default", name, fifo=fifo),
        dlq=names.dlq_name("sb-test", "ns", "default", name, fifo=fifo),
        subscriber_uri="http://127.0.0.1:9/",
        delivery=DeliverySpec(),
        filter=filter or MatchAll(),
        ready=True,
    )


def _messages(
    records: list[dict[str, Any]],
    routes: list[Route],
    blobs: MemoryBlobs | None = None,
    replay: rp.Replay = PACKED,
) -> Any:
    """(per queue as a list of (queue, messages), events whose payload is gone)."""
    blobs = blobs or MemoryBlobs()
    archive = ArchiveReader(blobs, blobs, Metrics(False), ARCHIVE, "archive/", 1000)
    batch = Batch(records, len(records), Position("k", 0), end=True)
    claims = Claims(blobs, "claims-bucket")
    per_queue, missing = batch_messages(replay, routes, None, batch, archive.event, claims)
    return list(per_queue.items()), missing


def _plain(i: int, size: int) -> dict[str, Any]:
    return {
        "v": 1,
        "kind": "accepted",
        "at": "2026-01-01T00:00:00.000Z",
        "event": {
            "specversion": "1.0",
            "id": f"e{i}",
            "source": "/s",
            "type": "t",
            "data": "x" * size,
        },
    }


def _room(route: Route) -> int:
    return PACK_MAX_BYTES - pack_overhead(pack_head("ns", "default", route.name, {}))


def test_packs_fill_by_count_and_by_bytes() -> None:
    route = _route("a")
    # 1,000 small events: packs of PACK_MAX_EVENTS.
    ((_, messages),) = _messages([_plain(i, 100) for i in range(1000)], [route])[0]
    assert [n for _, _, n in messages] == [PACK_MAX_EVENTS] * 20
    # 3 KiB events: packs filled to the room, the last one with the rest.
    per_queue, missing = _messages([_plain(i, 3000) for i in range(250)], [route])
    counts = [n for _, _, n in per_queue[0][1]]
    assert sum(counts) == 250 and missing == 0
    assert len(set(counts[:-1])) == 1 and counts[0] < PACK_MAX_EVENTS
    for body, _, n in per_queue[0][1]:
        assert len(body) <= PACK_MAX_BYTES
        events, packed = decode_messages(body)
        assert packed and len(events) == n


def test_an_event_too_large_for_a_pack_goes_alone_between_the_packs_around_it() -> None:
    route = _route("a")
    records = [_plain(i, 100) for i in range(30)] + [_plain(30, PACKABLE)]
    records += [_plain(i, 100) for i in range(31, 60)]
    ((_, messages),) = _messages(records, [route])[0]
    # Alone, it is the first message of the queue: the pack before it is still filling.
    assert [n for _, _, n in messages] == [1, 50, 9]
    assert '"pack"' not in messages[0][0]


def test_each_routes_packs_fill_to_its_own_room() -> None:
    routes = [_route(name) for name in ROUTE_NAMES]
    rooms = [_room(r) for r in routes]
    assert rooms[0] > rooms[2]
    # Texts of one length such that 40 fill the first route's pack, 39 the last's.
    bare = len(dumps_compact({**_plain(0, 0)["event"], "id": "e000", rp.EXTENSION: "r1"}))
    size = rooms[0] // 40 - 1 - bare
    records = [_plain(i, size) for i in range(200)]
    for i, record in enumerate(records):
        record["event"]["id"] = f"e{i:03d}"
    per_queue, _ = _messages(records, routes)
    cuts = [tuple(n for _, _, n in messages) for _, messages in per_queue]
    assert cuts[0][:4] == (40, 40, 40, 40) and cuts[2][:4] == (39, 39, 39, 39)
    assert all(sum(c) == 200 for c in cuts)


def test_events_archived_by_reference_keep_their_place_and_unreadable_ones_are_counted() -> None:
    blobs = MemoryBlobs()
    whole = {"specversion": "1.0", "id": "ref", "source": "/s", "type": "t", "data": "by ref"}
    blobs.put(ARCHIVE, "refs/1.json", dumps_utf8(whole))
    by_ref = {
        "v": 1,
        "kind": "accepted",
        "at": "2026-01-01T00:00:00.000Z",
        "event": {k: v for k, v in whole.items() if k != "data"},
        "dataref": f"s3://{ARCHIVE}/refs/1.json",
    }
    lacking = _plain(99, 10)
    del lacking["event"]["id"]
    records = [_plain(i, 10) for i in range(20)] + [by_ref, lacking]
    records += [_plain(i, 10) for i in range(20, 40)]
    ((_, messages),), missing = _messages(records, [_route("a")], blobs)
    assert missing == 1  # the event lacking its id
    events, _ = decode_messages(messages[0][0])
    ids = [e.event.id for e in events if e.event is not None]
    assert ids[20] == "ref" and len(ids) == 41


def test_routes_sharing_a_queue_get_each_text_once_per_route_in_turn() -> None:
    a = _route("a")
    twin = dataclasses.replace(a, name="twin")  # the same queue, another trigger name
    ((_, messages),), _ = _messages([_plain(i, 10) for i in range(60)], [a, twin])
    events, _ = decode_messages(messages[0][0])
    assert [e.event.id for e in events if e.event is not None][:4] == ["e0", "e0", "e1", "e1"]


def test_by_default_each_event_is_a_message_of_its_own_per_route_in_the_batchs_order() -> None:
    a, b = _route("a"), _route("b")
    records = [_plain(i, 10) for i in range(25)]
    lacking = _plain(99, 10)
    del lacking["event"]["id"]
    per_queue, missing = _messages([*records[:5], lacking, *records[5:]], [a, b], replay=REPLAY)
    assert missing == 1
    assert [queue for queue, _ in per_queue] == [a.queue, b.queue]
    for _, messages in per_queue:
        assert [n for _, _, n in messages] == [1] * 25
        bodies = [json.loads(body) for body, _, _ in messages]
        assert all("pack" not in body for body in bodies)
        assert [body["event"]["id"] for body in bodies] == [f"e{i}" for i in range(25)]
        assert {body["event"][rp.EXTENSION] for body in bodies} == {"r1"}


def test_a_fifo_queue_gets_one_event_a_message_in_its_groups_even_with_packing() -> None:
    ordered, plain = _route("o", fifo=True), _route("a")
    records = [_plain(i, 10) for i in range(12)]
    for i, record in enumerate(records):
        record["event"]["partitionkey"] = f"k{i % 3}"
    per_queue, _ = _messages(records, [ordered, plain])
    fifo = dict(per_queue)[ordered.queue]
    assert [(json.loads(body)["event"]["id"], group) for body, group, _ in fifo] == [
        (f"e{i}", f"k{i % 3}") for i in range(12)
    ]
    assert [n for _, _, n in dict(per_queue)[plain.queue]] == [12]  # one pack
