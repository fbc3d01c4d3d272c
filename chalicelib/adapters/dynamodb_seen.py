"""SeenEvents on the resource table (docs/dedup.md): one item per (broker, source, id),
pk = "dedup#{namespace}/{broker}#{sha256 of source and id}", sk = "dedup", with ``expires_at``
(the table's TTL attribute, epoch seconds). No ``kind`` attribute, so no resource listing sees it;
the hash bounds the key's size and spreads a busy broker's items over partitions.

One call per request in the common case: a conditional PutItem for one event, a TransactWriteItems
of conditional Puts for a batch (25 per call, moto's limit; AWS allows 100). The condition is
"absent, or expired at ``now``": DynamoDB deletes expired items lazily (within days), so an expired
item may still be there. A cancelled transaction says per item why (CancellationReasons): a failed
condition is a duplicate; the others (not evaluated, or conflicting with a concurrent transaction on
the same item) are claimed again in a second call.
"""

from __future__ import annotations

import builtins
import hashlib
import json
import math
import time
from collections.abc import Callable, Sequence
from typing import Any

from chalicelib.adapters.aws_clients import AwsClients
from chalicelib.adapters.aws_errors import error_code, translated
from chalicelib.core.errors import BrokerError, UnavailableError

KEY_PREFIX = "dedup#"
TTL_ATTRIBUTE = "expires_at"
TRANSACTION_ITEMS = 25
BATCH_DELETE_ITEMS = 25
ATTEMPTS = 4
_CONDITION = "attribute_not_exists(pk) OR expires_at <= :now"


def item_key(scope: str, source: str, event_id: str) -> dict[str, Any]:
    digest = hashlib.sha256(json.dumps([source, event_id]).encode()).hexdigest()
    return {"pk": {"S": f"{KEY_PREFIX}{scope}#{digest}"}, "sk": {"S": "dedup"}}


class DynamoSeenEvents:
    def __init__(
        self,
        clients: AwsClients,
        table: str,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._clients = clients
        self._table = table
        self._sleep = sleep

    @property
    def _ddb(self) -> Any:
        return self._clients.client("dynamodb")

    def claim(
        self, scope: str, keys: Sequence[tuple[str, str]], window_s: float, now: float
    ) -> builtins.set[int]:
        expires = {"N": str(math.ceil(now + window_s))}
        values = {":now": {"N": repr(float(now))}}
        fresh: builtins.set[int] = builtins.set()
        last_error = ""
        pending = list(range(len(keys)))
        for attempt in range(ATTEMPTS):
            if attempt:
                self._sleep(0.02 * 2**attempt)  # a concurrent transaction on the same item
            again: list[int] = []
            for start in range(0, len(pending), TRANSACTION_ITEMS):
                chunk = pending[start : start + TRANSACTION_ITEMS]
                items = [{**item_key(scope, *keys[i]), TTL_ATTRIBUTE: expires} for i in chunk]
                won, retry, error = self._put(items, values)
                last_error = error or last_error
                fresh.update(chunk[j] for j in won)
                again.extend(chunk[j] for j in retry)
            pending = again
            if not pending:
                return fresh
        raise UnavailableError(
            f"dedup claims of {scope}: {len(pending)} key(s) not settled after {ATTEMPTS} "
            f"attempts ({last_error or 'contended'}); retry the request"
        )

    def _put(
        self, items: list[dict[str, Any]], values: dict[str, Any]
    ) -> tuple[list[int], list[int], str]:
        """(indexes written, indexes to try again, the error if any) of ``items``; the rest were
        duplicates. An infrastructure error (throttled, unreachable) tries them all again."""
        from botocore.exceptions import ClientError

        everything = list(range(len(items)))
        condition = {"ConditionExpression": _CONDITION, "ExpressionAttributeValues": values}
        try:
            with translated("dedup claim"):
                try:
                    if len(items) == 1:  # half the write units of a transaction, still one call
                        self._ddb.put_item(TableName=self._table, Item=items[0], **condition)
                    else:
                        self._ddb.transact_write_items(
                            TransactItems=[
                                {"Put": {"TableName": self._table, "Item": i, **condition}}
                                for i in items
                            ]
                        )
                except ClientError as exc:
                    code = error_code(exc)
                    if code == "ConditionalCheckFailedException" and len(items) == 1:
                        return [], [], ""
                    reasons = exc.response.get("CancellationReasons") or []
                    if code != "TransactionCanceledException" or len(reasons) != len(items):
                        raise
                    codes = [str(r.get("Code") or "None") for r in reasons]
                    again = [j for j, c in enumerate(codes) if c != "ConditionalCheckFailed"]
                    return [], again, ""
        except BrokerError as exc:  # a missing table too: nothing can be told, so retried
            return [], everything, str(exc)
        return everything, [], ""

    def release(self, scope: str, keys: Sequence[tuple[str, str]]) -> None:
        requests = [{"DeleteRequest": {"Key": item_key(scope, *key)}} for key in keys]
        for start in range(0, len(requests), BATCH_DELETE_ITEMS):
            pending = requests[start : start + BATCH_DELETE_ITEMS]
            for attempt in range(ATTEMPTS):
                if attempt:
                    self._sleep(0.02 * 2**attempt)
                try:
                    with translated("dedup release"):
                        out = self._ddb.batch_write_item(RequestItems={self._table: pending})
                except BrokerError:
                    continue
                pending = out.get("UnprocessedItems", {}).get(self._table, [])
                if not pending:
                    break
            if pending:
                raise UnavailableError(f"dedup release of {scope}: {len(pending)} key(s) left")
