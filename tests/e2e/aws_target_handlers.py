"""Local Lambda handlers for tests/e2e/test_aws_targets_e2e.py (``brokerctl dev --function``)."""

from __future__ import annotations

from typing import Any


def reply(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """Answers each event with a CloudEvent (a reply): Lambda's event and context shapes."""
    return {
        "specversion": "1.0",
        "id": f"reply-{event['id']}",
        "source": f"/lambda/{context.function_name}",
        "type": "reply.t",
        "datacontenttype": "application/json",
        "data": {"seen": event["data"], "remaining_ms": context.get_remaining_time_in_millis() > 0},
    }
