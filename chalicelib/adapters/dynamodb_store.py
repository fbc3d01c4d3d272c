"""ResourceStore on one DynamoDB table: pk = "{kind}#{namespace}", sk = name.

Creates are conditional (attribute_not_exists); replaces are conditional on the stored version.
Documents are stored as a JSON string attribute so that any JSON shape (floats, empty maps)
survives. Each namespace has an epoch item (pk = "epoch#{namespace}", no ``kind``, so no listing
sees it), counted up after every write in the namespace (of the kinds the store is told to
count): caches check that one item instead of
reading the namespace again. Counted *after* the write, so a reader that saw the old epoch may
have read the old items, and will see the new epoch next time.
"""

from __future__ import annotations

import builtins
import json
from collections.abc import Mapping
from typing import Any

from chalicelib.adapters.aws_clients import AwsClients
from chalicelib.adapters.aws_errors import translated
from chalicelib.core.errors import ConflictError
from chalicelib.ports import StoredItem


class DynamoResourceStore:
    def __init__(
        self, clients: AwsClients, table: str, counted_kinds: frozenset[str] | None = None
    ) -> None:
        self._clients = clients
        self._table = table
        self._counted = counted_kinds  # the kinds whose writes move the epoch (None: all)

    @property
    def _ddb(self) -> Any:
        return self._clients.client("dynamodb")

    def get(self, kind: str, namespace: str, name: str) -> StoredItem | None:
        with translated(f"get {kind} {namespace}/{name}"):
            out = self._ddb.get_item(
                TableName=self._table,
                Key={"pk": {"S": f"{kind}#{namespace}"}, "sk": {"S": name}},
                ConsistentRead=True,
            )
        item = out.get("Item")
        return _to_stored(item) if item else None

    def list(self, kind: str, namespace: str | None = None) -> builtins.list[StoredItem]:
        items: builtins.list[dict[str, Any]] = []
        kwargs: dict[str, Any]
        if namespace is not None:
            kwargs = {
                "TableName": self._table,
                "KeyConditionExpression": "pk = :pk",
                "ExpressionAttributeValues": {":pk": {"S": f"{kind}#{namespace}"}},
                "ConsistentRead": True,
            }
            read = self._ddb.query
        else:
            kwargs = {
                "TableName": self._table,
                "FilterExpression": "kind = :k",
                "ExpressionAttributeValues": {":k": {"S": kind}},
                "ConsistentRead": True,
            }
            read = self._ddb.scan
        with translated(f"list {kind}"):
            while True:
                out = read(**kwargs)
                items.extend(out.get("Items", []))
                if "LastEvaluatedKey" not in out:
                    break
                kwargs["ExclusiveStartKey"] = out["LastEvaluatedKey"]
        result = [_to_stored(i) for i in items]
        return sorted(result, key=lambda s: (s.namespace, s.name))

    def put(
        self,
        kind: str,
        namespace: str,
        name: str,
        doc: Mapping[str, Any],
        expected_version: int | None,
    ) -> StoredItem:
        version = 1 if expected_version is None else expected_version + 1
        item = {
            "pk": {"S": f"{kind}#{namespace}"},
            "sk": {"S": name},
            "kind": {"S": kind},
            "namespace": {"S": namespace},
            "doc": {"S": json.dumps(doc, separators=(",", ":"), sort_keys=True)},
            "version": {"N": str(version)},
        }
        if expected_version is None:
            condition: dict[str, Any] = {"ConditionExpression": "attribute_not_exists(pk)"}
        else:
            condition = {
                "ConditionExpression": "version = :v",
                "ExpressionAttributeValues": {":v": {"N": str(expected_version)}},
            }
        try:
            with translated(f"put {kind} {namespace}/{name}"):
                self._ddb.put_item(TableName=self._table, Item=item, **condition)
        except ConflictError as exc:
            what = "already exists" if expected_version is None else "was modified concurrently"
            raise ConflictError(f"{kind} {namespace}/{name} {what}") from exc
        self._advance_epoch(kind, namespace)
        return StoredItem(kind, namespace, name, dict(doc), version)

    def delete(self, kind: str, namespace: str, name: str) -> bool:
        with translated(f"delete {kind} {namespace}/{name}"):
            out = self._ddb.delete_item(
                TableName=self._table,
                Key={"pk": {"S": f"{kind}#{namespace}"}, "sk": {"S": name}},
                ReturnValues="ALL_OLD",
            )
        self._advance_epoch(kind, namespace)
        return "Attributes" in out

    def epoch(self, namespace: str) -> int:
        with translated(f"epoch of {namespace}"):
            out = self._ddb.get_item(
                TableName=self._table, Key=_epoch_key(namespace), ConsistentRead=True
            )
        return int(out.get("Item", {}).get("n", {}).get("N", "0"))

    def _advance_epoch(self, kind: str, namespace: str) -> None:
        if self._counted is not None and kind not in self._counted:
            return
        # After the write: if this fails the caller sees the error (its write is stored; a retry
        # rewrites it and counts again), and caches reread everything at least once a minute.
        with translated(f"epoch of {namespace}"):
            self._ddb.update_item(
                TableName=self._table,
                Key=_epoch_key(namespace),
                UpdateExpression="ADD n :one",
                ExpressionAttributeValues={":one": {"N": "1"}},
            )


def _to_stored(item: Mapping[str, Any]) -> StoredItem:
    kind = item["kind"]["S"]
    return StoredItem(
        kind=kind,
        namespace=item["namespace"]["S"],
        name=item["sk"]["S"],
        doc=json.loads(item["doc"]["S"]),
        version=int(item["version"]["N"]),
    )


def _epoch_key(namespace: str) -> dict[str, Any]:
    return {"pk": {"S": f"epoch#{namespace}"}, "sk": {"S": "epoch"}}
