"""An in-memory AwsTargets (chalicelib/ports.py): targets that exist or not, refuse the caller or
not, answer with what AWS answers (its error codes and HTTP statuses), and keep what was sent.
tests/contract/test_aws_targets.py runs the same suite on it and on the boto3 adapter (moto)."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from typing import Any

from chalicelib.core.delivery.aws_targets import (
    EXECUTION_EXISTS,
    FUNCTION_ERROR,
    parse_arn,
)
from chalicelib.ports import TargetCall, TargetResult

Handler = Callable[[Any], Any]  # a Lambda function: its event -> its result (JSON-able)

# What each service answers for a target that does not exist (code, HTTP status), as AWS does.
_MISSING = {
    "lambda": ("ResourceNotFoundException", 404),
    "sqs": ("AWS.SimpleQueueService.NonExistentQueue", 400),
    "sns": ("NotFound", 404),
    "states": ("StateMachineDoesNotExist", 400),
    "events": ("ResourceNotFoundException", 400),
    "kinesis": ("ResourceNotFoundException", 400),
    "firehose": ("ResourceNotFoundException", 400),
    "s3": ("NoSuchBucket", 404),
}


class MemoryTargets:
    def __init__(self) -> None:
        self.sent: dict[str, list[TargetCall]] = {}  # by ARN, what each target took
        self.functions: dict[str, Handler] = {}  # Lambda function name -> handler
        self.executions: dict[tuple[str, str], str] = {}  # (state machine, name) -> input
        self.objects: dict[tuple[str, str], str] = {}  # (bucket ARN, key) -> body
        self.denied: set[str] = set()  # ARNs that refuse the caller
        self.failures: dict[str, list[TargetResult]] = {}  # the next answers of an ARN
        self.lost: set[str] = set()  # ARNs whose next call takes effect but times out
        self.checks = 0
        self._exists: set[str] = set()
        self._lock = threading.Lock()

    # ---- arranging ------------------------------------------------------------------------------

    def create(self, arn: str, handler: Handler | None = None) -> str:
        target = parse_arn(arn)
        assert target is not None, arn
        with self._lock:
            self._exists.add(_unqualified(arn))
            self.sent.setdefault(arn, [])
            if handler is not None:
                self.functions[target.name] = handler
        return arn

    def fail_next(self, arn: str, *results: TargetResult) -> None:
        with self._lock:
            self.failures.setdefault(arn, []).extend(results)

    def bodies(self, arn: str) -> list[dict[str, Any]]:
        """What the target holds: each call's body; a bucket's objects (one a key)."""
        with self._lock:
            if arn.startswith("arn:aws:s3:"):
                return [json.loads(b) for (a, _), b in self.objects.items() if a == arn]
            return [json.loads(call.body) for call in self.sent.get(arn, [])]

    # ---- the port -------------------------------------------------------------------------------

    def send(self, call: TargetCall, timeout: float) -> TargetResult:
        refused = self._refused(call.arn)
        if refused is not None:
            return refused
        target = parse_arn(call.arn)
        assert target is not None
        with self._lock:
            queued = self.failures.get(call.arn)
            if queued:
                return queued.pop(0)
        if target.service == "lambda":
            return self._invoke(target.name, call)
        if target.service == "states":
            assert call.name is not None
            key = (call.arn, call.name)
            with self._lock:
                known = self.executions.get(key)
                if known is not None and known != call.body:
                    return TargetResult(EXECUTION_EXISTS, "Execution Already Exists", 400)
                self.executions[key] = call.body
                if known is not None:
                    return TargetResult()
        with self._lock:
            if call.arn in self.lost:
                self.lost.discard(call.arn)
                self.sent.setdefault(call.arn, []).append(call)
                return TargetResult("Timeout", "Read timeout on endpoint URL", None)
        if target.fifo and call.group_id is None:
            return TargetResult("InvalidParameterValue", "MessageGroupId is required", 400)
        with self._lock:
            self.sent.setdefault(call.arn, []).append(call)
            if target.service == "s3":
                assert call.name is not None, "PutObject needs a key"
                self.objects[(call.arn, call.name)] = call.body
        return TargetResult()

    def check(self, arn: str) -> TargetResult:
        with self._lock:
            self.checks += 1
        return self._refused(arn) or TargetResult()

    def _refused(self, arn: str) -> TargetResult | None:
        target = parse_arn(arn)
        if target is None:
            return TargetResult("ValidationException", f"not a target ARN: {arn}", 400)
        with self._lock:
            if arn in self.denied:
                message = f"not authorized to perform this action on {arn}"
                return TargetResult("AccessDeniedException", message, 403)
            if _unqualified(arn) not in self._exists:
                code, status = _MISSING[target.service]
                return TargetResult(code, f"{arn} does not exist", status)
        return None

    def _invoke(self, name: str, call: TargetCall) -> TargetResult:
        handler = self.functions.get(name)
        with self._lock:
            self.sent.setdefault(call.arn, []).append(call)
        if handler is None:  # a function whose code returns nothing
            return TargetResult(payload=b"null")
        try:
            result = handler(json.loads(call.body))
        except Exception as exc:
            error = {"errorMessage": str(exc), "errorType": type(exc).__name__}
            return TargetResult(FUNCTION_ERROR, json.dumps(error))
        return TargetResult(payload=json.dumps(result).encode())


def _unqualified(arn: str) -> str:
    """A function's ARN without its version or alias (they exist with the function)."""
    target = parse_arn(arn)
    if target is not None and target.service == "lambda" and target.resource.count(":") > 1:
        return arn.rsplit(":", 1)[0]
    return arn
