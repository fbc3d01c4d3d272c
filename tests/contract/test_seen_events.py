"""SeenEvents (docs/dedup.md) on the in-memory fake, moto's DynamoDB and LocalStack's: a claim is
pending until confirmed, a pending claim holds its key only until its hold ends, a confirmed one
until the window ends, and of concurrent claims of one key exactly one wins."""

from __future__ import annotations

import threading
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from tests.backends import AWS_BACKENDS, BACKENDS, aws_env
from tests.fakes import MemorySeenEvents

NOW = 1_800_000_000.5
HOLD = 90.0


def _scope() -> str:
    return f"ns-{uuid.uuid4().hex[:10]}/b"


@pytest.fixture(params=BACKENDS)
def seen(request: pytest.FixtureRequest) -> Any:
    if request.param == "memory":
        return MemorySeenEvents()
    from brokerctl.bootstrap import bootstrap
    from chalicelib.adapters.dynamodb_seen import DynamoSeenEvents

    settings, clients = aws_env(request, request.param)
    bootstrap(settings, clients, say=lambda line: None)
    return DynamoSeenEvents(clients, settings.table_name)


def test_a_pending_claim_holds_its_key_until_confirmed_or_its_hold_ends(seen: Any) -> None:
    scope, key = _scope(), ("/src", "e1")
    first = seen.claim(scope, [key], HOLD, NOW)
    assert (first.fresh, dict(first.held)) == ({0}, {})
    again = seen.claim(scope, [key], HOLD, NOW + 1)
    assert again.fresh == set()
    assert dict(again.held) == {0: pytest.approx(NOW + HOLD)}  # not a duplicate: not stored yet
    # The claimant died before storing: once its hold ends, the key is claimed again.
    retry = seen.claim(scope, [key], HOLD, NOW + HOLD + 0.5)
    assert (retry.fresh, dict(retry.held)) == ({0}, {})


def test_a_confirmed_claim_is_a_duplicate_until_the_window_ends(seen: Any) -> None:
    scope, key = _scope(), ("/src", "e1")
    assert seen.claim(scope, [key], HOLD, NOW).fresh == {0}
    seen.confirm(scope, [key], NOW + 300)
    for at in (NOW + 1, NOW + HOLD + 1, NOW + 299):  # past the hold: the window counts now
        later = seen.claim(scope, [key], HOLD, at)
        assert (later.fresh, dict(later.held)) == (set(), {}), at
    assert seen.claim(_scope(), [key], HOLD, NOW + 1).fresh == {0}  # another broker
    assert seen.claim(scope, [("/other", "e1")], HOLD, NOW + 1).fresh == {0}  # another source
    # Expired, though the store may still hold the item (TTL deletion is lazy): fresh again.
    assert seen.claim(scope, [key], HOLD, NOW + 301).fresh == {0}


def test_a_batch_answers_per_key(seen: Any) -> None:
    scope = _scope()
    keys = [("/s", f"k{i}") for i in range(60)]  # more than two transactions' worth
    assert seen.claim(scope, keys[:40], HOLD, NOW).fresh == set(range(40))
    seen.confirm(scope, keys[:20], NOW + 60)  # 20..39 stay pending
    out = seen.claim(scope, keys, HOLD, NOW + 1)
    assert out.fresh == set(range(40, 60))
    assert sorted(out.held) == list(range(20, 40))
    assert seen.claim(scope, keys, HOLD, NOW + 2).fresh == set()


def test_release_frees_the_keys(seen: Any) -> None:
    scope = _scope()
    keys = [("/s", "a"), ("/s", "b"), ("/s", "c")]
    assert seen.claim(scope, keys, HOLD, NOW).fresh == {0, 1, 2}
    seen.release(scope, keys[:2])
    out = seen.claim(scope, keys, HOLD, NOW)
    assert (out.fresh, sorted(out.held)) == ({0, 1}, [2])
    seen.release(scope, [("/s", "never claimed")])  # nothing to forget is no error
    seen.confirm(scope, [], NOW + 60)  # nor is nothing to confirm


@pytest.mark.parametrize("size", [1, 10])
def test_concurrent_claims_of_one_key_have_one_winner(seen: Any, size: int) -> None:
    """Copies arriving at the same instant on different containers: each key is won once, and
    the losers see it held (pending), not a duplicate."""
    scope = _scope()
    keys = [("/s", f"k{i}") for i in range(size)]
    start = threading.Barrier(6)

    def claim(_: int) -> Any:
        start.wait()
        return seen.claim(scope, keys, HOLD, NOW)

    with ThreadPoolExecutor(6) as pool:
        results = list(pool.map(claim, range(6)))
    wins = sorted(i for r in results for i in r.fresh)
    assert wins == list(range(size)), results
    for r in results:
        assert set(r.fresh) | set(r.held) == set(range(size))


@pytest.mark.parametrize("backend", AWS_BACKENDS)
def test_items_are_written_pending_then_confirmed(
    request: pytest.FixtureRequest, backend: str
) -> None:
    """The conditional writes themselves, on DynamoDB: the pending item's TTL is the hold, the
    confirmed item's the window; an item written before claims had a state is a duplicate."""
    from brokerctl.bootstrap import bootstrap
    from chalicelib.adapters.dynamodb_seen import DynamoSeenEvents, item_key

    settings, clients = aws_env(request, backend)
    bootstrap(settings, clients, say=lambda line: None)
    seen = DynamoSeenEvents(clients, settings.table_name)
    ddb = clients.client("dynamodb")
    scope, key = _scope(), ("/src", "e1")

    def item() -> dict[str, Any]:
        got = ddb.get_item(TableName=settings.table_name, Key=item_key(scope, *key))
        return {k: next(iter(v.values())) for k, v in got["Item"].items() if k not in ("pk", "sk")}

    seen.claim(scope, [key], HOLD, NOW)
    assert item()["state"] == "pending"
    assert float(item()["expires_at"]) == NOW + HOLD
    seen.confirm(scope, [key], NOW + 300)
    assert item()["state"] == "confirmed"
    assert float(item()["expires_at"]) == NOW + 300

    old = ("/src", "before-states")
    legacy = {**item_key(scope, *old), "expires_at": {"N": str(NOW + 300)}}
    ddb.put_item(TableName=settings.table_name, Item=legacy)
    for keys in ([old], [old, ("/src", "other")]):  # the single put and the transaction
        out = seen.claim(scope, keys, HOLD, NOW + 1)
        assert (0 in out.fresh, dict(out.held)) == (False, {})
