"""SeenEvents on the resource table (docs/dedup.md): one item per (broker, source, id),
pk = "dedup#{namespace}/{broker}#{sha256 of source and id}", sk = "dedup", with ``state``
("pending" until the event is stored, then "confirmed") and ``expires_at`` (the end of the hold or
of the window; the table's TTL attribute, epoch seconds). No ``kind`` attribute, so no resource
listing sees it; the hash bounds the key's size and spreads a busy broker's items over partitions.

A claim is one call per request in the common case: a conditional PutItem for one event, a
TransactWriteItems of conditional Puts for a batch (25 per call, moto's limit; AWS allows 100). The
condition is "absent, or expired at ``now``": DynamoDB deletes expired items lazily (within days),
so an expired item may still be there. A failed condition returns the item in the way
(ReturnValuesOnConditionCheckFailure), whose state tells a duplicate from a claim still pending.
A cancelled transaction says per item why (CancellationReasons): a failed condition is answered
so; the others (not evaluated, or conflicting with a concurrent transaction on the same item) are
claimed again in a second call. Confirm and release are BatchWriteItem calls (25 per call).
"""

from __future__ import annotations

import builtins
import hashlib
import json
from collections.abc import Sequence
from typing import Any

from chalicelib.adapters.aws_errors import error_code, translated
from chalicelib.adapters.dynamodb_table import DynamoTable
from chalicelib.core.errors import BrokerError, UnavailableError
from chalicelib.ports import Claimed

KEY_PREFIX = "dedup#"
TTL_ATTRIBUTE = "expires_at"
STATE_ATTRIBUTE = "state"
PENDING, CONFIRMED = "pending", "confirmed"
TRANSACTION_ITEMS = 25
BATCH_WRITE_ITEMS = 25
ATTEMPTS = 4
_CONDITION = "attribute_not_exists(pk) OR expires_at <= :now"
# An item whose condition failed but which the answer did not return (an emulator without
# ReturnValuesOnConditionCheckFailure) is taken as held for this long: never as a duplicate.
UNKNOWN_HOLD_S = 1.0


def item_key(scope: str, source: str, event_id: str) -> dict[str, Any]:
    digest = hashlib.sha256(json.dumps([source, event_id]).encode()).hexdigest()
    return {"pk": {"S": f"{KEY_PREFIX}{scope}#{digest}"}, "sk": {"S": "dedup"}}


class DynamoSeenEvents(DynamoTable):
    def claim(
        self, scope: str, keys: Sequence[tuple[str, str]], hold_s: float, now: float
    ) -> Claimed:
        pending = {STATE_ATTRIBUTE: {"S": PENDING}, TTL_ATTRIBUTE: {"N": repr(float(now + hold_s))}}
        values = {":now": {"N": repr(float(now))}}
        fresh: builtins.set[int] = builtins.set()
        held: dict[int, float] = {}
        last_error = ""
        left = list(range(len(keys)))
        for attempt in range(ATTEMPTS):
            if attempt:
                self._sleep(0.02 * 2**attempt)  # a concurrent transaction on the same item
            again: list[int] = []
            for start in range(0, len(left), TRANSACTION_ITEMS):
                chunk = left[start : start + TRANSACTION_ITEMS]
                items = [{**item_key(scope, *keys[i]), **pending} for i in chunk]
                outcomes, error = self._put(items, values)
                last_error = error or last_error
                for i, outcome in zip(chunk, outcomes, strict=True):
                    if outcome is _WON:
                        fresh.add(i)
                    elif outcome is _RETRY:
                        again.append(i)
                    elif (until := _held_until(outcome, now)) is not None:
                        held[i] = until
            left = again
            if not left:
                return Claimed(frozenset(fresh), held)
        raise UnavailableError(
            f"dedup claims of {scope}: {len(left)} key(s) not settled after {ATTEMPTS} "
            f"attempts ({last_error or 'contended'}); retry the request"
        )

    def _put(self, items: list[dict[str, Any]], values: dict[str, Any]) -> tuple[list[object], str]:
        """The outcome of each of ``items`` (_WON, _RETRY, or the item in the way: a dict, or
        None when the answer did not say), and the error if any. An infrastructure error
        (throttled, unreachable) tries them all again."""
        from botocore.exceptions import ClientError

        condition = {
            "ConditionExpression": _CONDITION,
            "ExpressionAttributeValues": values,
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
        }
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
                        return [exc.response.get("Item")], ""
                    reasons = exc.response.get("CancellationReasons") or []
                    if code != "TransactionCanceledException" or len(reasons) != len(items):
                        raise
                    return [
                        r.get("Item") if r.get("Code") == "ConditionalCheckFailed" else _RETRY
                        for r in reasons
                    ], ""
        except BrokerError as exc:  # a missing table too: nothing can be told, so retried
            return [_RETRY] * len(items), str(exc)
        return [_WON] * len(items), ""

    def confirm(self, scope: str, keys: Sequence[tuple[str, str]], until: float) -> None:
        confirmed = {STATE_ATTRIBUTE: {"S": CONFIRMED}, TTL_ATTRIBUTE: {"N": repr(float(until))}}
        requests = [{"PutRequest": {"Item": {**item_key(scope, *k), **confirmed}}} for k in keys]
        self._write(requests, f"dedup confirm of {scope}")

    def release(self, scope: str, keys: Sequence[tuple[str, str]]) -> None:
        requests = [{"DeleteRequest": {"Key": item_key(scope, *key)}} for key in keys]
        self._write(requests, f"dedup release of {scope}")

    def _write(self, requests: list[dict[str, Any]], what: str) -> None:
        for start in range(0, len(requests), BATCH_WRITE_ITEMS):
            pending = requests[start : start + BATCH_WRITE_ITEMS]
            for attempt in range(ATTEMPTS):
                if attempt:
                    self._sleep(0.02 * 2**attempt)
                try:
                    with translated(what):
                        out = self._ddb.batch_write_item(RequestItems={self._table: pending})
                except BrokerError:
                    continue
                pending = out.get("UnprocessedItems", {}).get(self._table, [])
                if not pending:
                    break
            if pending:
                raise UnavailableError(f"{what}: {len(pending)} key(s) left")


_WON, _RETRY = object(), object()


def _held_until(item: object, now: float) -> float | None:
    """When the pending claim in the way ends, or None when it is a duplicate (confirmed, or
    written before claims had states)."""
    if not isinstance(item, dict):
        return now + UNKNOWN_HOLD_S
    if item.get(STATE_ATTRIBUTE, {}).get("S") != PENDING:
        return None
    return float(item.get(TTL_ATTRIBUTE, {}).get("N", now + UNKNOWN_HOLD_S))
