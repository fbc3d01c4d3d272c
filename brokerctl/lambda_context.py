"""A Lambda context object for handlers invoked by the local runtime."""

from __future__ import annotations

import time
import uuid


class LocalLambdaContext:
    def __init__(self, function_name: str, timeout_s: int = 60, memory_mb: int = 512) -> None:
        self.function_name = function_name
        self.function_version = "$LATEST"
        self.invoked_function_arn = (
            f"arn:aws:lambda:us-east-1:123456789012:function:{function_name}"
        )
        self.memory_limit_in_mb = memory_mb
        self.aws_request_id = str(uuid.uuid4())
        self.log_group_name = f"/aws/lambda/{function_name}"
        self.log_stream_name = "local"
        self._deadline = time.monotonic() + timeout_s

    def get_remaining_time_in_millis(self) -> int:
        return max(0, int((self._deadline - time.monotonic()) * 1000))
