"""Local Lambda functions for ARN subscribers (``brokerctl dev --function NAME=module:handler``,
docs/targets.md): moto runs no Lambda code, so local mode answers Lambda's ``Invoke`` and
``GetFunction`` for the registered names itself.

The delivery path is unchanged: it calls ``lambda:Invoke`` through boto3 as on AWS. The answer
comes from botocore's ``before-call`` event on the delivery's Lambda client (the seam botocore's
own Stubber uses): a registered function's handler runs here, on the calling thread, with
Lambda's event (the payload, decoded) and context shapes, and its result (or its error, as
Lambda reports an unhandled one: ``FunctionError: Unhandled`` and an ``errorMessage`` payload)
is the operation's response. Every other name goes on to the endpoint."""

from __future__ import annotations

import importlib
import io
import json
import os
import re
import sys
import threading
import traceback
from collections.abc import Callable, Iterable
from typing import Any
from urllib.parse import unquote

from brokerctl.lambda_context import LocalLambdaContext

Handler = Callable[[Any, Any], Any]
_SPEC = re.compile(r"(?P<name>[A-Za-z0-9_-]{1,64})=(?P<module>[A-Za-z_][\w.]*):(?P<attr>\w+)")
_PATH = re.compile(r"/2015-03-31/functions/(?P<function>[^/]+)(?P<invocations>/invocations)?")


class FunctionSpecError(ValueError):
    pass


def load_handlers(specs: Iterable[str]) -> dict[str, Handler]:
    """``NAME=module:handler`` specs, each imported now (an error names the spec), from the
    current directory as Lambda imports from the function's root."""
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    handlers: dict[str, Handler] = {}
    for spec in specs:
        found = _SPEC.fullmatch(spec.strip())
        if found is None:
            raise FunctionSpecError(f"--function {spec!r}: expected NAME=module:handler")
        try:
            module = importlib.import_module(found["module"])
            handler = getattr(module, found["attr"])
        except (ImportError, AttributeError) as exc:
            raise FunctionSpecError(f"--function {spec!r}: {exc}") from exc
        if not callable(handler):
            raise FunctionSpecError(f"--function {spec!r}: {found['attr']} is not callable")
        handlers[found["name"]] = handler
    return handlers


def function_name(identifier: str) -> str:
    """The name in a FunctionName parameter: a name, an ARN, or a partial ARN, each perhaps with
    a qualifier (``name:alias``, ``arn:...:function:name:alias``)."""
    parts = identifier.split(":")
    if "function" in parts:
        return parts[parts.index("function") + 1]
    return parts[0]


class LocalFunctions:
    def __init__(self, handlers: dict[str, Handler], region: str, account: str = "123456789012"):
        self.handlers = dict(handlers)
        self.region = region
        self.account = account
        self.invocations = 0
        self._lock = threading.Lock()

    def attach(self, client: Any) -> None:
        """Answer for the registered functions on ``client`` (a boto3 Lambda client)."""
        events = client.meta.events
        events.register("before-call.lambda.Invoke", self._answer, unique_id="local-invoke")
        events.register("before-call.lambda.GetFunction", self._answer, unique_id="local-get")

    def _answer(self, params: dict[str, Any], **kwargs: Any) -> tuple[Any, dict[str, Any]] | None:
        found = _PATH.fullmatch(str(params.get("url_path", "")).split("?", 1)[0])
        if found is None:
            return None
        name = function_name(unquote(found["function"]))
        handler = self.handlers.get(name)
        if handler is None:
            return None  # not ours: the endpoint answers
        if found["invocations"] is None:
            return _response(200, self._configuration(name))
        return self._invoke(name, handler, params.get("body") or b"")

    def _configuration(self, name: str) -> dict[str, Any]:
        arn = f"arn:aws:lambda:{self.region}:{self.account}:function:{name}"
        return {
            "Configuration": {
                "FunctionName": name,
                "FunctionArn": arn,
                "Runtime": "python3.12",
                "State": "Active",
                "LastUpdateStatus": "Successful",
            }
        }

    def _invoke(self, name: str, handler: Handler, body: bytes | str) -> tuple[Any, dict[str, Any]]:
        from botocore.response import StreamingBody

        with self._lock:
            self.invocations += 1
        raw = body.encode() if isinstance(body, str) else bytes(body)
        error: str | None = None
        try:
            event = json.loads(raw) if raw else {}
            result = handler(event, LocalLambdaContext(name))
            payload = json.dumps(result).encode()
        except Exception as exc:  # Lambda's report of an unhandled error
            error = "Unhandled"
            payload = json.dumps(
                {
                    "errorMessage": str(exc),
                    "errorType": type(exc).__name__,
                    "stackTrace": traceback.format_exception(exc)[-5:],
                }
            ).encode()
        parsed: dict[str, Any] = {
            "StatusCode": 200,
            "ExecutedVersion": "$LATEST",
            "Payload": StreamingBody(io.BytesIO(payload), len(payload)),
        }
        if error is not None:
            parsed["FunctionError"] = error
        return _response(200, parsed)


def _response(status: int, parsed: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
    from botocore.awsrequest import AWSResponse

    parsed["ResponseMetadata"] = {"HTTPStatusCode": status, "HTTPHeaders": {}, "RetryAttempts": 0}
    return AWSResponse("local", status, {}, None), parsed
