"""One suite per port, run on the in-memory fake and on the AWS adapter against a moto server and
against LocalStack's runtime (tests/backends.py)."""

from __future__ import annotations

import json
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from chalicelib.core.cloudevents.sqs_message import PACK_MAX_BYTES, SQS_MAX_BATCH_BYTES
from chalicelib.core.delivery.rate import burst
from chalicelib.core.errors import (
    CallTooLargeError,
    ConflictError,
    NotFoundError,
    UnavailableError,
)
from chalicelib.core.reconcile import CreateMapping
from chalicelib.ports import OutgoingMessage
from tests.backends import AWS_BACKENDS, BACKENDS, aws_env
from tests.fakes import (
    MemoryArchive,
    MemoryBlobs,
    MemoryMappings,
    MemoryQueues,
    MemoryRateLimiter,
    MemoryStore,
)


def _unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


@pytest.fixture(params=BACKENDS)
def store(request: pytest.FixtureRequest) -> Any:
    if request.param == "memory":
        return MemoryStore()
    from brokerctl.bootstrap import bootstrap
    from chalicelib.adapters.dynamodb_store import DynamoResourceStore

    settings, clients = aws_env(request, request.param)
    bootstrap(settings, clients, say=lambda line: None)
    return DynamoResourceStore(clients, settings.table_name)


@pytest.fixture(params=BACKENDS)
def queues(request: pytest.FixtureRequest) -> Any:
    if request.param == "memory":
        return MemoryQueues()
    from chalicelib.adapters.sqs_queues import SqsQueues

    return SqsQueues(aws_env(request, request.param)[1])


@pytest.fixture(params=BACKENDS)
def blobs_and_bucket(request: pytest.FixtureRequest) -> Any:
    if request.param == "memory":
        return MemoryBlobs(), "bucket"
    from chalicelib.adapters.s3_blobs import S3Blobs

    clients = aws_env(request, request.param)[1]
    bucket = _unique("blobs")
    clients.client("s3").create_bucket(Bucket=bucket)
    return S3Blobs(clients), bucket


# ---- ResourceStore ---------------------------------------------------------------------------


def test_store_create_get_list_delete(store: Any) -> None:
    ns = _unique("ns")
    created = store.put("broker", ns, "b1", {"spec": {"x": 1}}, None)
    assert created.version == 1
    assert store.get("broker", ns, "b1").doc == {"spec": {"x": 1}}
    store.put("broker", ns, "b2", {"spec": {}}, None)
    store.put("trigger", ns, "t1", {"spec": {}}, None)
    assert [i.name for i in store.list("broker", ns)] == ["b1", "b2"]
    assert [i.name for i in store.list("trigger", ns)] == ["t1"]
    assert {i.namespace for i in store.list("broker")} >= {ns}
    assert store.delete("broker", ns, "b1") is True
    assert store.delete("broker", ns, "b1") is False
    assert store.get("broker", ns, "b1") is None


def test_store_create_is_conditional(store: Any) -> None:
    ns = _unique("ns")
    store.put("broker", ns, "b", {"v": 1}, None)
    with pytest.raises(ConflictError):
        store.put("broker", ns, "b", {"v": 2}, None)
    assert store.get("broker", ns, "b").doc == {"v": 1}


def test_store_optimistic_concurrency(store: Any) -> None:
    ns = _unique("ns")
    first = store.put("broker", ns, "b", {"v": 1}, None)
    second = store.put("broker", ns, "b", {"v": 2}, first.version)
    assert second.version == first.version + 1
    with pytest.raises(ConflictError):
        store.put("broker", ns, "b", {"v": 3}, first.version)  # stale
    assert store.get("broker", ns, "b").doc == {"v": 2}


def test_store_keeps_any_json_shape(store: Any) -> None:
    ns = _unique("ns")
    doc = {"f": 0.25, "empty": {}, "list": [], "none": None, "nested": {"a": [1, "x", True]}}
    store.put("trigger", ns, "t", doc, None)
    assert store.get("trigger", ns, "t").doc == doc


def test_store_epoch_advances_after_every_write_in_its_namespace_only(store: Any) -> None:
    ns, other = _unique("ns"), _unique("ns")
    assert store.epoch(ns) == 0
    seen = [store.epoch(ns)]
    first = store.put("broker", ns, "b", {"v": 1}, None)
    seen.append(store.epoch(ns))
    store.put("broker", ns, "b", {"v": 2}, first.version)
    seen.append(store.epoch(ns))
    store.put("token", ns, "t", {}, None)
    seen.append(store.epoch(ns))
    store.delete("broker", ns, "b")
    seen.append(store.epoch(ns))
    assert len(set(seen)) == len(seen), seen  # each write changed it
    with pytest.raises(ConflictError):
        store.put("token", ns, "t", {}, None)  # refused: nothing written
    assert store.epoch(ns) == seen[-1]
    assert store.epoch(other) == 0
    assert [i.name for i in store.list("broker", ns)] == []  # the epoch is no item of any kind


def test_store_lists_past_a_page_and_keeps_text_beyond_ascii(store: Any) -> None:
    ns = _unique("ns")
    doc = {"spec": {"t": 'h\u00e9 \U0001f600 \u2028 "q" \\ tab\t', "pad": "x" * 300_000}}
    for i in range(5):  # three fill DynamoDB's 1 MB page: the listing reads a second one
        store.put("blob", ns, f"p{i}", doc, None)
    listed = store.list("blob", ns)
    assert [i.name for i in listed] == [f"p{i}" for i in range(5)]
    assert all(i.doc == doc for i in listed)


# ---- Queues ----------------------------------------------------------------------------------


def test_queue_create_is_idempotent_and_listed(queues: Any) -> None:
    name = _unique("sb-ct")
    info = queues.create(name, {"VisibilityTimeout": "60"})
    again = queues.create(name, {"VisibilityTimeout": "60"})
    assert info.arn == again.arn and info.arn.endswith(":" + name)
    assert queues.get(name).attributes["VisibilityTimeout"] == "60"
    assert name in [q.name for q in queues.list(name[:8])]
    queues.delete(name)
    assert queues.get(name) is None
    queues.delete(name)  # deleting a missing queue is not an error


def test_queue_send_receive_delete(queues: Any) -> None:
    name = _unique("sb-ct")
    queues.create(name, {"VisibilityTimeout": "30"})
    assert queues.send_batch(name, [OutgoingMessage(str(i), f"m{i}") for i in range(10)]) == []
    got: list[Any] = []
    for _ in range(20):
        got += queues.receive(name, 10, 0, None)
        if len(got) == 10:
            break
    assert sorted(m.body for m in got) == sorted(f"m{i}" for i in range(10))
    assert all(m.attributes["ApproximateReceiveCount"] == "1" for m in got)
    assert queues.receive(name, 10, 0, None) == []  # all in flight
    for m in got:
        queues.delete_message(name, m.receipt_handle)
    assert queues.depth(name) == 0


def test_queue_takes_one_mib_calls_and_refuses_more_as_too_large(queues: Any) -> None:
    """SQS's SendMessageBatch payload is 1 MiB (since August 2025; moto and LocalStack too): ten
    replay packs fill one call; a longer call is refused as CallTooLargeError (an
    UnavailableError to every other caller), which ``send_in_batches`` answers by splitting it."""
    name = _unique("sb-ct")
    queues.create(name, {})
    packs = [OutgoingMessage(str(i), "p" * PACK_MAX_BYTES) for i in range(10)]
    assert queues.send_batch(name, packs) == []
    over = SQS_MAX_BATCH_BYTES // 10 + 1
    with pytest.raises(CallTooLargeError) as refused:
        queues.send_batch(name, [OutgoingMessage(str(i), "p" * over) for i in range(10)])
    assert isinstance(refused.value, UnavailableError)
    assert queues.depth(name) == 10  # the refused call stored nothing


def test_queue_message_attributes_and_delay_travel_with_the_message(queues: Any) -> None:
    name = _unique("sb-ct")
    queues.create(name, {"VisibilityTimeout": "30"})
    sent = [
        OutgoingMessage("a", "with", message_attributes={"sb-attempts": "3"}),
        OutgoingMessage("b", "without"),
        OutgoingMessage("c", "later", delay_seconds=60, message_attributes={"sb-attempts": "1"}),
    ]
    assert queues.send_batch(name, sent) == []
    got: list[Any] = []
    for _ in range(20):
        got += queues.receive(name, 10, 0, None)
        if len(got) == 2:
            break
    assert {m.body: dict(m.message_attributes) for m in got} == {
        "with": {"sb-attempts": "3"},
        "without": {},
    }  # the delayed one is not received yet
    assert queues.receive(name, 10, 0, None) == []
    assert queues.depth(name) == 3


def test_queue_visibility_and_receive_count(queues: Any) -> None:
    name = _unique("sb-ct")
    queues.create(name, {"VisibilityTimeout": "30"})
    queues.send_batch(name, [OutgoingMessage("a", "x")])
    first = queues.receive(name, 1, 1, None)[0]
    queues.change_visibility(name, first.receipt_handle, 0)
    second = queues.receive(name, 1, 1, None)[0]
    assert second.message_id == first.message_id
    assert second.attributes["ApproximateReceiveCount"] == "2"


def test_queue_redrive_to_dlq(queues: Any) -> None:
    dlq = queues.create(_unique("sb-ct") + "-dlq", {})
    name = _unique("sb-ct")
    redrive = json.dumps({"deadLetterTargetArn": dlq.arn, "maxReceiveCount": 1})
    queues.create(name, {"VisibilityTimeout": "30", "RedrivePolicy": redrive})
    queues.send_batch(name, [OutgoingMessage("a", "poison")])
    m = queues.receive(name, 1, 1, None)[0]
    queues.change_visibility(name, m.receipt_handle, 0)
    assert queues.receive(name, 1, 0, None) == []  # moved on the receive past the limit
    moved = queues.receive(dlq.name, 1, 1, None)
    assert [x.body for x in moved] == ["poison"]


def test_queue_missing_is_not_found(queues: Any) -> None:
    with pytest.raises(NotFoundError):
        queues.send_batch(_unique("missing"), [OutgoingMessage("a", "x")])


def test_queue_deleted_after_use_is_not_found(queues: Any) -> None:
    # The adapter caches queue URLs: a send after the queue is gone must still say "not found"
    # (ingress drops that trigger from the fan-out), not a generic AWS error.
    name = _unique("gone")
    queues.create(name, {})
    assert queues.send_batch(name, [OutgoingMessage("a", "x")]) == []
    queues.delete(name)
    with pytest.raises(NotFoundError):
        queues.send_batch(name, [OutgoingMessage("a", "x")])


def test_queue_purge(queues: Any) -> None:
    name = _unique("sb-ct")
    queues.create(name, {})
    queues.send_batch(name, [OutgoingMessage("a", "x"), OutgoingMessage("b", "y")])
    assert queues.depth(name) == 2
    queues.purge(name)
    assert queues.depth(name) == 0


# ---- Mappings --------------------------------------------------------------------------------


@pytest.fixture(params=BACKENDS)
def mapping_env(request: pytest.FixtureRequest) -> Any:
    if request.param == "memory":
        q = MemoryQueues()
        return MemoryMappings(), q, "fn-delivery"
    from brokerctl.bootstrap import bootstrap
    from chalicelib.adapters.lambda_mappings import LambdaMappings
    from chalicelib.adapters.sqs_queues import SqsQueues

    settings, clients = aws_env(request, request.param)
    bootstrap(settings, clients, say=lambda line: None)
    return LambdaMappings(clients), SqsQueues(clients), settings.delivery_function


def test_mappings_lifecycle(mapping_env: Any) -> None:
    mappings, queues, function = mapping_env
    queue = queues.create(_unique("sb-ct"), {"VisibilityTimeout": "360"})
    created = mappings.create(queue.arn, CreateMapping(queue.name, function, 10))
    listed = [m for m in mappings.list(function) if m.source_arn == queue.arn]
    assert [m.uuid for m in listed] == [created.uuid]
    assert listed[0].enabled and listed[0].batch_size == 10
    assert listed[0].function_response_types == ("ReportBatchItemFailures",)
    assert listed[0].function_name == function
    mappings.set_enabled(created.uuid, False)
    assert not next(m for m in mappings.list(function) if m.uuid == created.uuid).enabled
    mappings.delete(created.uuid)
    assert [m for m in mappings.list(function) if m.uuid == created.uuid] == []


def test_mappings_carry_their_maximum_concurrency(mapping_env: Any) -> None:
    mappings, queues, function = mapping_env
    queue = queues.create(_unique("sb-ct"), {"VisibilityTimeout": "360"})
    wanted = CreateMapping(queue.name, function, 10, maximum_concurrency=5)
    created = mappings.create(queue.arn, wanted)
    assert created.maximum_concurrency == 5
    mappings.set_concurrency(created.uuid, 40)
    listed = next(m for m in mappings.list(function) if m.uuid == created.uuid)
    assert listed.maximum_concurrency == 40
    other = queues.create(_unique("sb-ct"), {})
    plain = mappings.create(other.arn, CreateMapping(other.name, function, 10))
    assert (
        next(m for m in mappings.list(function) if m.uuid == plain.uuid).maximum_concurrency is None
    )
    mappings.delete(created.uuid)
    mappings.delete(plain.uuid)


# ---- Blobs and Archive -----------------------------------------------------------------------


def test_blobs_round_trip(blobs_and_bucket: Any) -> None:
    blobs, bucket = blobs_and_bucket
    data = bytes(range(256)) * 10
    blobs.put(bucket, "claims/a.json", data)
    assert blobs.get(bucket, "claims/a.json") == data
    blobs.delete(bucket, "claims/a.json")
    with pytest.raises(NotFoundError):
        blobs.get(bucket, "claims/a.json")


def test_blobs_list_keys_in_order_after_a_key_within_a_limit(blobs_and_bucket: Any) -> None:
    blobs, bucket = blobs_and_bucket
    keys = [f"archive/2026/01/01/{h:02d}/obj-{i}" for h in (3, 1, 2) for i in (2, 1)]
    for key in keys:
        blobs.put(bucket, key, b"x")
    blobs.put(bucket, "other/2026/01/01/02/obj", b"x")
    assert blobs.list_keys(bucket, "archive/", "", 100) == sorted(keys)
    after = blobs.list_keys(bucket, "archive/", "archive/2026/01/01/02/", 3)
    assert after == [
        "archive/2026/01/01/02/obj-1",
        "archive/2026/01/01/02/obj-2",
        "archive/2026/01/01/03/obj-1",
    ]
    assert blobs.list_keys(bucket, "archive/", "archive/2026/01/01/03/obj-2", 10) == []


@pytest.mark.parametrize("backend", AWS_BACKENDS)
def test_archive_accepts_batches(backend: str, request: pytest.FixtureRequest) -> None:
    """The memory archive keeps records; the Firehose adapter delivers them to the S3 bucket."""
    from brokerctl.bootstrap import bootstrap
    from chalicelib.adapters.firehose_archive import FirehoseArchive

    settings, clients = aws_env(request, backend)
    bootstrap(settings, clients, say=lambda line: None)
    marker = _unique("rec")
    records = [json.dumps({"n": i, "m": marker}).encode() + b"\n" for i in range(3)]
    FirehoseArchive(clients, settings.archive_stream).put(records)
    memory = MemoryArchive()
    memory.put(records)
    assert memory.records == records
    s3 = clients.client("s3")
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket=settings.archive_bucket)["Contents"]]
    bodies = b"".join(
        s3.get_object(Bucket=settings.archive_bucket, Key=k)["Body"].read() for k in keys
    )
    assert all(r in bodies for r in records)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_store_counting_some_kinds_keeps_the_epoch_for_the_others(
    backend: str, request: pytest.FixtureRequest
) -> None:
    kinds = frozenset({"broker"})
    if backend == "memory":
        store: Any = MemoryStore(kinds)
    else:
        from brokerctl.bootstrap import bootstrap
        from chalicelib.adapters.dynamodb_store import DynamoResourceStore

        settings, clients = aws_env(request, backend)
        bootstrap(settings, clients, say=lambda line: None)
        store = DynamoResourceStore(clients, settings.table_name, kinds)
    ns = _unique("ns")
    store.put("sample", ns, "s", {}, None)
    assert store.epoch(ns) == 0
    store.put("broker", ns, "b", {}, None)
    assert store.epoch(ns) == 1


def test_listing_many_queues_reads_their_attributes_concurrently(aws_clients: Any) -> None:
    """The reconciler looks at every queue (two per trigger) within its timeout: the adapter
    reads the attributes of a listing many at a time, not one after the other."""
    import threading

    from chalicelib.adapters.sqs_queues import SqsQueues

    queues = SqsQueues(aws_clients)
    prefix = _unique("sb-many")
    made = {queues.create(f"{prefix}-{i:02d}", {"VisibilityTimeout": "60"}).name for i in range(24)}
    lock = threading.Lock()
    in_flight = [0, 0]  # now, most

    def before(**_: Any) -> None:
        with lock:
            in_flight[0] += 1
            in_flight[1] = max(in_flight[1], in_flight[0])
        threading.Event().wait(0.02)  # a slow endpoint: reads overlap only if run concurrently

    def after(**_: Any) -> None:
        with lock:
            in_flight[0] -= 1

    events = aws_clients.client("sqs").meta.events
    events.register("before-call.sqs.GetQueueAttributes", before)
    events.register("after-call.sqs.GetQueueAttributes", after)
    try:
        listed = queues.list(prefix)
    finally:
        events.unregister("before-call.sqs.GetQueueAttributes", before)
        events.unregister("after-call.sqs.GetQueueAttributes", after)
    assert [q.name for q in listed] == sorted(made)
    assert all(q.arn.endswith(q.name) and q.attributes["VisibilityTimeout"] == "60" for q in listed)
    assert in_flight[1] > 1


# ---- Queues: FIFO (ordered triggers, docs/ordering.md) ----------------------------------------

FIFO = {
    "FifoQueue": "true",
    "ContentBasedDeduplication": "false",
    "DeduplicationScope": "messageGroup",
    "FifoThroughputLimit": "perMessageGroupId",
    "VisibilityTimeout": "30",
}


def _fifo_send(queues: Any, name: str, items: list[tuple[str, str]]) -> None:
    """(group, body) pairs, each deduplicated by its body."""
    messages = [
        OutgoingMessage(str(i), body, group_id=group, dedup_id=body)
        for i, (group, body) in enumerate(items)
    ]
    assert queues.send_batch(name, messages) == []


def test_fifo_queue_keeps_group_order_and_blocks_a_group_in_flight(queues: Any) -> None:
    name = _unique("sb-ct") + ".fifo"
    info = queues.create(name, FIFO)
    assert info.attributes["FifoQueue"] == "true"
    assert info.attributes["DeduplicationScope"] == "messageGroup"
    _fifo_send(queues, name, [("a", "a1"), ("b", "b1"), ("a", "a2"), ("b", "b2")])
    first = queues.receive(name, 1, 0, None)
    assert [m.body for m in first] == ["a1"]
    assert first[0].attributes["MessageGroupId"] == "a"
    # a1 in flight: group a gives nothing, group b flows, in its order
    rest = queues.receive(name, 10, 0, None)
    assert [m.body for m in rest] == ["b1", "b2"]
    assert queues.receive(name, 10, 0, None) == []
    for m in rest:
        queues.delete_message(name, m.receipt_handle)
    # a visibility timeout on the head (a backoff) keeps its group blocked...
    queues.change_visibility(name, first[0].receipt_handle, 30)
    assert queues.receive(name, 10, 0, None) == []
    # ...until the head is visible again: then it comes first, before a2
    queues.change_visibility(name, first[0].receipt_handle, 0)
    again = queues.receive(name, 10, 0, None)
    assert [m.body for m in again] == ["a1", "a2"]
    assert again[0].attributes["ApproximateReceiveCount"] == "2"
    assert again[1].attributes["ApproximateReceiveCount"] == "1"


def test_fifo_queue_deduplicates_by_id_not_by_body(queues: Any) -> None:
    name = _unique("sb-ct") + ".fifo"
    queues.create(name, FIFO)
    send = [
        OutgoingMessage("0", "same body", group_id="g", dedup_id="id-1"),
        OutgoingMessage("1", "same body", group_id="g", dedup_id="id-2"),
        OutgoingMessage("2", "retried", group_id="g", dedup_id="id-3"),
    ]
    assert queues.send_batch(name, send) == []
    # a retried send of the same message (same dedup id) is accepted and kept once
    assert (
        queues.send_batch(name, [OutgoingMessage("0", "retried", group_id="g", dedup_id="id-3")])
        == []
    )
    got = queues.receive(name, 10, 0, None)
    assert [m.body for m in got] == ["same body", "same body", "retried"]


# ---- SeenEvents: tests/contract/test_seen_events.py ------------------------------------------


NOW = 1_800_000_000.5


# ---- RateLimiter (docs/flow-control.md) --------------------------------------------------------


@pytest.fixture(params=BACKENDS)
def limiter(request: pytest.FixtureRequest) -> Any:
    if request.param == "memory":
        return MemoryRateLimiter()
    from brokerctl.bootstrap import bootstrap
    from chalicelib.adapters.dynamodb_rate import DynamoRateLimiter

    settings, clients = aws_env(request, request.param)
    bootstrap(settings, clients, say=lambda line: None)
    return DynamoRateLimiter(clients, settings.table_name)


def test_rate_bucket_starts_full_then_grants_ahead_within_the_horizon(limiter: Any) -> None:
    key = _unique("ns") + "/b/t"
    first = limiter.acquire(key, 50.0, 8, NOW, 0.0)
    assert (first.granted, first.wait) == (5, 0.0)  # a tenth of a second's worth at once
    ahead = limiter.acquire(key, 50.0, 8, NOW, 0.1)
    assert ahead.granted == 5 and ahead.wait == pytest.approx(0.02)
    none = limiter.acquire(key, 50.0, 8, NOW, 0.1)
    assert none.granted == 0 and none.wait == pytest.approx(0.02)  # back when one fits
    assert limiter.acquire(_unique("ns") + "/b/t", 50.0, 1, NOW, 0.0).granted == 1  # own


def test_rate_bucket_refills_at_the_rate(limiter: Any) -> None:
    key = _unique("ns") + "/b/t"
    assert limiter.acquire(key, 20.0, 10, NOW, 0.0).granted == 2
    assert limiter.acquire(key, 20.0, 10, NOW + 1.5, 0.0).granted == 2  # 30 earned, capped at 2
    assert limiter.acquire(key, 20.0, 10, NOW + 1.575, 0.0).granted == 1  # 1.5 earned


def test_rate_concurrent_takers_never_share_a_token(limiter: Any) -> None:
    """Eight threads take tokens of one bucket at once, as concurrent delivery invocations do:
    together they get exactly what the bucket holds (burst + horizon * rate), never more."""
    key = _unique("ns") + "/b/t"
    rate, horizon = 10.0, 3.0

    def take(_: int) -> int:
        return sum(limiter.acquire(key, rate, 3, NOW, horizon).granted for _ in range(5))

    with ThreadPoolExecutor(8) as pool:
        granted = sum(pool.map(take, range(8)))
    assert granted == int(burst(rate) + horizon * rate)  # 31 of the 120 asked for
