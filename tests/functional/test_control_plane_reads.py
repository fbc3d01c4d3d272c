"""What a control-plane write reads from the store: a trigger PUT reads its broker once, for
provisioning and for the status its answer carries (it used to read it again for the status)."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from chalicelib.ports import StoredItem
from tests.fakes import MemoryStore
from tests.functional.harness import Harness


class CountingStore(MemoryStore):
    """The in-memory store, counting point reads by kind."""

    def __init__(self) -> None:
        super().__init__()
        self.gets: Counter[str] = Counter()

    def get(self, kind: str, namespace: str, name: str) -> StoredItem | None:
        self.gets[kind] += 1
        return super().get(kind, namespace, name)


@pytest.fixture
def h() -> Harness:
    h = Harness()
    h.store = store = CountingStore()
    h.container.store = store  # type: ignore[misc]  # before any service is built
    return h


def conditions(doc: dict[str, Any]) -> dict[str, tuple[str, str | None]]:
    return {c["type"]: (c["status"], c.get("reason")) for c in doc["status"]["conditions"]}


def reads_of_a_put(h: Harness, **spec: Any) -> tuple[int, dict[str, Any]]:
    assert isinstance(h.store, CountingStore)
    before = h.store.gets["broker"]
    doc = h.trigger("t1", **spec)
    return h.store.gets["broker"] - before, doc


def test_a_trigger_put_reads_its_broker_once(h: Harness) -> None:
    h.broker()
    reads, created = reads_of_a_put(h)
    assert reads == 1
    assert conditions(created)["BrokerReady"][0] == "True"
    assert conditions(created)["Ready"][0] == "True"
    reads, replaced = reads_of_a_put(h, filter={"type": "a"})
    assert reads == 1
    assert replaced["metadata"]["generation"] == 2
    assert conditions(replaced)["Ready"][0] == "True"


def test_a_trigger_put_before_its_broker_reads_it_once_and_says_it_is_missing(
    h: Harness,
) -> None:
    reads, doc = reads_of_a_put(h)
    assert reads == 1
    assert conditions(doc)["BrokerReady"] == ("False", "BrokerDoesNotExist")
    # Nothing was provisioned for it: the broker's creation does that.
    assert h.queues.get(h.queue_of("t1")) is None
    h.broker()
    assert h.queues.get(h.queue_of("t1")) is not None
