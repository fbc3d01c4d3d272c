"""RateLimiter on the resource table (docs/flow-control.md): one item per trigger's bucket,
pk = "rate#{key}", sk = "rate", with the balance (``tokens``, may be negative), its time (``at``),
a version ``v`` and ``expires_at`` (the table's TTL: an idle bucket is full again after a second,
so an item left by a deleted trigger is dropped a day later). No ``kind`` attribute, so no
resource listing sees it.

Two calls per acquire: a strongly consistent GetItem, then a PutItem on condition that ``v`` has
not moved (optimistic concurrency). Of concurrent acquires on one bucket one wins each round; the
others read again and retry, with a short jittered pause, up to ``ATTEMPTS`` times.
"""

from __future__ import annotations

import math
import random
from typing import Any

from chalicelib.adapters.aws_errors import error_code, translated
from chalicelib.adapters.dynamodb_table import DynamoTable
from chalicelib.core.delivery.rate import Bucket, Grant, take
from chalicelib.core.errors import UnavailableError

KEY_PREFIX = "rate#"
TTL_ATTRIBUTE = "expires_at"
IDLE_TTL_SECONDS = 24 * 3600
ATTEMPTS = 12


def item_key(key: str) -> dict[str, Any]:
    return {"pk": {"S": f"{KEY_PREFIX}{key}"}, "sk": {"S": "rate"}}


class DynamoRateLimiter(DynamoTable):
    def acquire(self, key: str, rate: float, n: int, now: float, horizon: float) -> Grant:
        from botocore.exceptions import ClientError

        for attempt in range(ATTEMPTS):
            if attempt:  # lost the race to another invocation: read its write and try again
                self._sleep(random.uniform(0.002, 0.01 * attempt))  # jitter, not security
            with translated("rate limiter read"):
                got = self._ddb.get_item(
                    TableName=self._table, Key=item_key(key), ConsistentRead=True
                ).get("Item")
            bucket, version = _read(got)
            after, grant = take(bucket, rate, n, now, horizon)
            if bucket is not None and grant.granted == 0:
                return grant  # nothing taken: nothing to write
            item = {
                **item_key(key),
                "tokens": {"N": repr(after.tokens)},
                "at": {"N": repr(after.at)},
                "v": {"N": str(version + 1)},
                TTL_ATTRIBUTE: {"N": str(math.ceil(now + IDLE_TTL_SECONDS))},
            }
            if version:
                condition: dict[str, Any] = {
                    "ConditionExpression": "v = :v",
                    "ExpressionAttributeValues": {":v": {"N": str(version)}},
                }
            else:
                condition = {"ConditionExpression": "attribute_not_exists(pk)"}
            try:
                with translated("rate limiter write"):
                    try:
                        self._ddb.put_item(TableName=self._table, Item=item, **condition)
                    except ClientError as exc:
                        if error_code(exc) == "ConditionalCheckFailedException":
                            continue
                        raise
            except UnavailableError:
                if attempt == ATTEMPTS - 1:
                    raise
                continue
            return grant
        raise UnavailableError(f"rate bucket {key}: contended past {ATTEMPTS} attempts")


def _read(item: dict[str, Any] | None) -> tuple[Bucket | None, int]:
    if not item:
        return None, 0
    return Bucket(float(item["tokens"]["N"]), float(item["at"]["N"])), int(item["v"]["N"])
