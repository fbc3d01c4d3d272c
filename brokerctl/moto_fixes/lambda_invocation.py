"""moto answers SendMessage to a queue with an enabled event source mapping by receiving the
messages itself and invoking the mapped function (``Queue.add_message``; the code path of
https://github.com/getmoto/moto/issues/9948), in Docker, absent here. That bumps receive counts
and steals messages. On AWS the Lambda service polls the queue; in local mode the broker's event
source emulation (brokerctl/event_sources.py) plays that poller, so moto must not see the
mappings it keeps for the queue.

A DynamoDB table's stream is the same (``StreamShard.add``): moto invokes the mapped function
itself and, when that answers, empties the shard, so GetRecords (Lambda's stream poller, which
brokerctl/source_pollers.py plays for IntegrationSources) never sees the record."""

from __future__ import annotations

from typing import Any


def disable_lambda_invocation() -> None:
    from moto.dynamodb.models import table
    from moto.sqs import models

    def _get(self: Any) -> dict[str, Any]:
        return {}

    def _set(self: Any, value: Any) -> None:
        return None

    models.Queue.lambda_event_source_mappings = property(_get, _set)  # type: ignore[assignment]
    table.Table.lambda_event_source_mappings = property(_get, _set)  # type: ignore[assignment]
