"""moto checks a DynamoDB write's condition and then writes, with nothing held in between: two
conditional puts of one item at once (two ingress threads claiming one event's key, docs/dedup.md)
could both succeed, where DynamoDB lets one win. And ``transact_write_items`` rolls a failed
transaction back by putting a deep copy of each table it names in its place, which would undo
whatever another thread wrote meanwhile. No moto issue is filed (moto's transactions arrived in
https://github.com/getmoto/moto/pull/2879). Here every write, and every transaction, takes one
lock: a transaction is moto's own (its checks, its answers, its all-or-nothing rollback), and no
other write can happen while it runs or is rolled back."""

from __future__ import annotations

import threading
from typing import Any

WRITES = ("put_item", "delete_item", "update_item", "transact_write_items")


def atomic_writes() -> None:
    from moto.dynamodb.models import DynamoDBBackend

    lock = threading.RLock()  # re-entered: a transaction's writes are the locked methods

    def locked(name: str) -> None:
        write = getattr(DynamoDBBackend, name)

        def method(self: Any, *args: Any, **kwargs: Any) -> Any:
            with lock:
                return write(self, *args, **kwargs)

        setattr(DynamoDBBackend, name, method)

    for name in WRITES:
        locked(name)
