"""A replay's packing (docs/replay.md, Throughput): ``ReplayRunner._messages`` writes a pack's
worth of archived events in one msgspec call (``grouped``, the default) and must make exactly
the messages of the per-event path (``grouped=False``): the same pack texts, in the same
messages, in the same order per queue, with the same counts and the same ``missing``, whatever
the batch holds (non-ASCII text, nulls, infinities, integers msgspec refuses, events too large
for a pack or near its bound, events lacking a required attribute, events archived by
reference, one to three routes)."""

from __future__ import annotations

import contextlib
import copy
import dataclasses
from typing import Any

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from chalicelib.core import names
from chalicelib.core.cloudevents.json_format import dumps_compact, dumps_utf8
from chalicelib.core.cloudevents.sqs_message import (
    PACK_MAX_BYTES,
    PACK_MAX_EVENTS,
    decode_messages,
    encode_pack,
    pack_fields,
    pack_head,
    pack_overhead,
)
from chalicelib.core.filtering.filters import Filter, MatchAll, build_filter
from chalicelib.core.resources import replay as rp
from chalicelib.core.resources.delivery_spec import DeliverySpec
from chalicelib.core.resources.replay import REPLAYS
from chalicelib.services import replays
from chalicelib.services.claims import Claims
from chalicelib.services.metrics import Metrics
from chalicelib.services.replays import ReplayRunner, RunnerOptions
from chalicelib.services.resources import Resources
from chalicelib.services.routing import Route
from tests.fakes import MemoryBlobs, MemoryStore

ARCHIVE = "archive-bucket"
REPLAY = rp.parse_replay(
    "ns", {"spec": {"from": "2026-01-01T00:00:00Z", "to": "2026-01-01T01:00:00Z"}}, "default/r1"
)
# Names of different lengths: their packs' heads, so their rooms, differ.
ROUTE_NAMES = ("a", "orders", "a-trigger-with-a-much-longer-name-than-the-others-" + "x" * 20)
PACKABLE = PACK_MAX_BYTES - 1024  # as replays._PACKABLE_BYTES: a longer text goes alone


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


def _runner(blobs: MemoryBlobs, packs: bool = True) -> ReplayRunner:
    return ReplayRunner(
        Resources(MemoryStore(), REPLAYS),
        lambda namespace, broker: None,
        lambda queue, bodies: None,
        Claims(blobs, "claims-bucket", "claims/"),
        blobs,
        blobs,
        Metrics(False),
        RunnerOptions(archive_bucket=ARCHIVE, packs=packs),
    )


# ---- the batches ---------------------------------------------------------------------------

# (kind, weight): what an event's data is; most are plain ASCII of a size that fills packs by
# count (small) or by bytes (kib, mid), some sit at a pack's bound (near) or past it (big).
_KINDS = (
    ["small"] * 8
    + ["kib"] * 6
    + ["mid"] * 2
    + ["near", "big", "unicode", "surrogate", "null", "nullword", "inf", "bigint"]
    + ["json", "controls", "text", "escapes"]
)
# A required attribute absent, empty, null or not a string (each one, each way); or an event
# replayed before, whose extension is replaced.
_REQUIRED = ("specversion", "id", "source", "type")
_DEFECTS: list[str | None] = [None] * 24 + ["extension"]
_DEFECTS += [f"{how} {name}" for how in ("absent", "empty", "null", "int") for name in _REQUIRED]
_REFS = [None] * 10 + ["ref", "ref-gone", "ref-none"]

_Spec = tuple[str, int, str | None, str | None, str]
_spec = st.tuples(
    st.sampled_from(_KINDS),
    st.integers(0, 4000),
    st.sampled_from(_DEFECTS),
    st.sampled_from(_REFS),
    st.text(max_size=12),
)
# A stretch of events alike but for their sizes (``n`` plus a spread): long batches, packs
# filled by bytes at many different points, a few records of another sort in between.
_stretch = st.tuples(_spec, st.integers(1, 80), st.integers(0, 1500))


def _expand(stretches: list[tuple[_Spec, int, int]]) -> list[_Spec]:
    out: list[_Spec] = []
    for (kind, n, defect, ref, text), repeat, spread in stretches:
        if kind in ("near", "big"):
            repeat = min(repeat, 3)
        out.extend((kind, n + (j * 7919) % (spread + 1), defect, ref, text) for j in range(repeat))
    return out


def _data(kind: str, n: int, text: str) -> tuple[str, Any]:
    """(datacontenttype, data) of an event of this kind."""
    if kind == "small":
        return "text/plain", "x" * (n % 200)
    if kind == "kib":
        return "text/plain", "k" * (500 + n % 2000)
    if kind == "mid":
        return "text/plain", "m" * (2000 + n)
    if kind == "near":  # its text within a few hundred bytes of the bound, either side
        return "text/plain", "n" * (PACKABLE - 400 + n % 500)
    if kind == "big":
        return "text/plain", "b" * (PACKABLE + n)
    if kind == "unicode":
        return "text/plain", "é" * (n % 300) + "✓" + text
    if kind == "surrogate":
        return "text/plain", "lone \ud800 surrogate"
    if kind == "null":
        return "application/json", None
    if kind == "nullword":
        return "text/plain", "nullable " * (1 + n % 5)
    if kind == "inf":
        return "application/json", {"value": float("inf") if n % 2 else float("-inf")}
    if kind == "bigint":
        return "application/json", {"value": 2**70 + n}
    if kind == "json":
        return "application/json", {"a": [1, 2.5, -0.0, 1e300, "s"], "b": {"c": True}, "n": n}
    if kind == "controls":
        return "text/plain", '\x00\x1f\x7f/\\"\t' + "c" * (n % 50)
    if kind == "escapes":
        return "text/plain", "</script>&'" + "\u2028" * (n % 2)
    return "text/plain", text  # hypothesis's own text


def _batch(specs: list[_Spec], blobs: MemoryBlobs) -> Any:
    records: list[dict[str, Any]] = []
    for i, (kind, n, defect, ref, text) in enumerate(specs):
        content_type, data = _data(kind, n, text)
        event: dict[str, Any] = {
            "specversion": "1.0",
            "id": f"e{i}",
            "source": "/s",
            "type": "t",
            "datacontenttype": content_type,
            "knativearrivaltime": f"2026-01-01T00:00:{i % 60:02d}.000Z",
            "data": data,
        }
        if defect == "extension":
            event[rp.EXTENSION] = "earlier"
        elif defect is not None:
            how, name = defect.split()
            if how == "absent":
                del event[name]
            else:
                event[name] = {"empty": "", "null": None, "int": 7}[how]
        record: dict[str, Any] = {
            "v": 1,
            "kind": "accepted",
            "namespace": "ns",
            "broker": "default",
            "at": event["knativearrivaltime"],
            "event": event,
            "triggers": ["a"],
            "size": 100,
        }
        if ref is not None:
            key = f"refs/{i}.json"
            if ref == "ref":
                # One not writable as JSON (an infinity) is not stored: its payload is gone.
                with contextlib.suppress(ValueError):
                    blobs.put(ARCHIVE, key, dumps_utf8(event))
            record["dataref"] = None if ref == "ref-none" else f"s3://{ARCHIVE}/{key}"
            if ref != "ref-none":
                record["event"] = {k: v for k, v in event.items() if k != "data"}
        records.append(record)
    return replays._Batch(records, len(records), replays.reader.Position("k", 0), end=True)


def _outcome(
    runner: ReplayRunner, routes: list[Route], extra: Filter | None, batch: Any, grouped: bool
) -> Any:
    try:
        per_queue, missing = runner._messages(
            REPLAY, routes, extra, copy.deepcopy(batch), grouped=grouped
        )
    except Exception as exc:  # the same failure either way
        return ("raised", type(exc).__name__, str(exc))
    return list(per_queue.items()), missing


@settings(
    max_examples=250,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    stretches=st.lists(_stretch, max_size=12),
    route_names=st.lists(st.sampled_from(ROUTE_NAMES), min_size=1, max_size=3, unique=True),
    variant=st.sampled_from(["every"] * 6 + ["fifo", "filtered", "extra", "no-packs"]),
)
def test_grouped_packing_makes_the_per_event_messages(
    stretches: list[tuple[_Spec, int, int]],
    route_names: list[str],
    variant: str,
) -> None:
    blobs = MemoryBlobs()
    batch = _batch(_expand(stretches), blobs)
    routes = [_route(name) for name in route_names]
    extra: Filter | None = None
    if variant == "fifo":  # not every route takes packs: the per-event path, both ways
        routes.append(_route("ordered", fifo=True))
    elif variant == "filtered":
        routes[0] = _route(routes[0].name, filter=build_filter({"type": "t"}, None))
    elif variant == "extra":
        extra = build_filter(None, [{"exact": {"type": "t"}}])
    runner = _runner(blobs, packs=variant != "no-packs")
    expected = _outcome(runner, routes, extra, batch, grouped=False)
    got = _outcome(runner, routes, extra, batch, grouped=True)
    assert got == expected


# ---- what the differential test leans on, shown on cases it must meet ----------------------


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


def _both(
    records: list[dict[str, Any]], routes: list[Route], blobs: MemoryBlobs | None = None
) -> Any:
    runner = _runner(blobs or MemoryBlobs())
    batch = replays._Batch(records, len(records), replays.reader.Position("k", 0), end=True)
    expected = _outcome(runner, routes, None, batch, grouped=False)
    got = _outcome(runner, routes, None, batch, grouped=True)
    assert got == expected
    return got


def _room(route: Route) -> int:
    return PACK_MAX_BYTES - pack_overhead(pack_head("ns", "default", route.name, {}))


def test_packs_by_count_and_by_bytes_and_across_runs_of_any_length() -> None:
    route = _route("a")
    # 1,000 small events: packs of PACK_MAX_EVENTS, whatever the runs' lengths.
    ((_, messages),) = _both([_plain(i, 100) for i in range(1000)], [route])[0]
    assert [n for _, _, n in messages] == [PACK_MAX_EVENTS] * 20
    # 3 KiB events: packs filled to the room, the last one with the rest.
    per_queue, missing = _both([_plain(i, 3000) for i in range(250)], [route])
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
    ((_, messages),) = _both(records, [route])[0]
    # Alone, it is the first message of the queue: the pack before it is still filling.
    assert [n for _, _, n in messages] == [1, 50, 9]
    assert '"pack"' not in messages[0][0]


def test_a_pack_that_fills_inside_a_run_is_cut_there_for_each_route() -> None:
    routes = [_route(name) for name in ROUTE_NAMES]
    rooms = [_room(r) for r in routes]
    assert rooms[0] > rooms[2]
    # Texts of one length such that 40 fill the first route's pack, 39 the last's: the same
    # runs are cut at a different event for each.
    bare = len(dumps_compact({**_plain(0, 0)["event"], "id": "e000", rp.EXTENSION: "r1"}))
    size = rooms[0] // 40 - 1 - bare
    records = [_plain(i, size) for i in range(200)]
    for i, record in enumerate(records):
        record["event"]["id"] = f"e{i:03d}"
    per_queue, _ = _both(records, routes)
    cuts = [tuple(n for _, _, n in messages) for _, messages in per_queue]
    assert cuts[0][:4] == (40, 40, 40, 40) and cuts[2][:4] == (39, 39, 39, 39)
    assert all(sum(c) == 200 for c in cuts)


def test_records_that_are_not_plain_events_keep_their_place() -> None:
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
    ((_, messages),), missing = _both(records, [_route("a")], blobs)
    assert missing == 1  # the event lacking its id
    events, _ = decode_messages(messages[0][0])
    ids = [e.event.id for e in events if e.event is not None]
    assert ids[20] == "ref" and len(ids) == 41


def _doc(i: int, j: int, n: int) -> dict[str, Any]:
    """An event whose text is ``_BARE`` + ``n`` bytes long (ids of one length)."""
    return {
        "specversion": "1.0",
        "id": f"e{i:02d}{j:02d}",
        "source": "/s",
        "type": "t",
        "data": "x" * n,
        rp.EXTENSION: "r1",
    }


_BARE = len(dumps_compact(_doc(0, 0, 0)))
_SIZES = st.sampled_from([0] * 8 + [1, 7, 150])  # mostly texts of one length


@settings(max_examples=400, deadline=None)
@given(
    texts_per_pack=st.integers(1, 6) | st.integers(7, 60),
    offset=st.integers(-2, 2),
    steps=st.lists(
        st.tuples(
            st.booleans(),
            st.lists(_SIZES, min_size=1, max_size=6) | st.lists(_SIZES, min_size=1, max_size=60),
        ),
        max_size=25,
    ),
)
# A room one byte short of three texts: a run of two fills a pack exactly, the next run
# starts the next pack, and a text after it must start a third.
@example(texts_per_pack=3, offset=-1, steps=[(True, [0, 0]), (True, [0, 0]), (False, [0])])
@example(texts_per_pack=3, offset=0, steps=[(True, [0, 0]), (True, [0, 0, 0]), (True, [0])])
def test_a_packer_given_runs_makes_the_packs_it_makes_text_by_text(
    texts_per_pack: int, offset: int, steps: list[tuple[bool, list[int]]]
) -> None:
    """The packer's bounds at every byte: a small room (set on both packers), mostly texts of
    one length and a room a byte or two either side of a whole number of them, put the edge of
    the room (and of the count) at many places inside runs and between them."""
    head = pack_head("ns", "default", "a", {})
    by_text: list[Any] = []
    by_run: list[Any] = []
    one, other = replays._Packer(head, by_text), replays._Packer(head, by_run)
    one._room = other._room = texts_per_pack * (_BARE + 1) + offset
    shortest = replays._SHORTEST_TEXT + len("r1")
    for i, (as_run, sizes) in enumerate(steps):
        docs = [_doc(i, j, n) for j, n in enumerate(sizes)]
        texts = [dumps_compact(doc) for doc in docs]
        for text in texts:
            one.add(text)
        run = replays._Run.of(docs, shortest) if as_run else None
        if run is None:  # the per-event path between runs
            for text in texts:
                other.add(text)
        else:
            other.add_run(run)
    one.flush()
    other.flush()
    assert by_run == by_text


def test_a_run_is_made_only_when_its_text_is_certainly_the_per_event_one() -> None:
    shortest = replays._SHORTEST_TEXT + len("r1")
    plain = [_doc(0, j, 100) for j in range(50)]
    run = replays._Run.of(plain, shortest)
    assert run is not None  # the grouped path is taken (msgspec is installed here)
    assert run.text == ",".join(replays._pack_text_undecoded({"event": d}, "r1") for d in plain)
    assert run.count == 50 and run.size == len(run.text) + 1
    for data in ("é", None, float("inf"), "a null in it", "\ud800", "x" * PACKABLE):
        assert replays._Run.of([*plain[:3], {**plain[3], "data": data}], shortest) is None, data
    # Just at the bound, and as long as a pack's worth of short texts: still a run.
    at_bound = {**_doc(1, 0, 0), "data": "x" * (PACKABLE - _BARE)}
    assert len(dumps_compact(at_bound)) == PACKABLE
    assert replays._Run.of([at_bound, *plain[:3]], shortest) is not None


def test_a_run_written_as_its_pack_is_that_pack_and_another_triggers_too() -> None:
    """Given a pack's head and fields, msgspec writes the whole pack (``pack_of`` that head is
    the text itself); for another trigger's head, or fields msgspec would not write as
    ``pack_head`` does, the same pack as ``encode_pack`` of the run's text."""
    shortest = replays._SHORTEST_TEXT + len("r1")
    docs = [_doc(0, j, 100) for j in range(20)]
    head = pack_head("ns", "default", "a", {})
    fields = pack_fields("ns", "default", "a", {})
    run = replays._Run.of(docs, shortest, head, fields)
    assert run is not None
    assert run.text == ",".join(replays._pack_text_undecoded({"event": d}, "r1") for d in docs)
    assert run.listed == "[" + run.text + "]" and run.size == len(run.text) + 1
    assert run.pack_of(head) == encode_pack(head, [run.text])
    other = pack_head("ns", "default", "b", {})
    assert run.pack_of(other) == encode_pack(other, [run.text])
    # Fields that are not the head's: the list alone is written, the packs are the same.
    odd = replays._Run.of(docs, shortest, head, {**fields, "trigger": "zz"})
    assert odd is not None and odd.pack_of(head) == encode_pack(head, [run.text])
    # A "null" in the head (a namespace so named) does not make the events' texts uncertain.
    nulls = pack_head("null", "default", "a", {})
    named = replays._Run.of(docs, shortest, nulls, pack_fields("null", "default", "a", {}))
    assert named is not None and named.pack_of(nulls) == encode_pack(nulls, [run.text])


def test_routes_sharing_a_queue_get_each_text_once_per_route_in_turn() -> None:
    a = _route("a")
    twin = dataclasses.replace(a, name="twin")  # the same queue, another trigger name
    ((_, messages),), _ = _both([_plain(i, 10) for i in range(60)], [a, twin])
    events, _ = decode_messages(messages[0][0])
    assert [e.event.id for e in events if e.event is not None][:4] == ["e0", "e0", "e1", "e1"]
