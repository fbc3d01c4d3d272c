"""Logs and traces (design.md §4): one powertools Logger and Tracer for every function.

Modules log through stdlib loggers under ``broker`` (``logs.get("delivery")``), and say what a line
is about as keys (``extra={"event_id": ..., "trigger": ..., "attempt": ...}``). Where those lines
go is decided once, by app.py at import:

- On Lambda, ``on_lambda`` gives the ``broker`` logger powertools' handler: one JSON object a line
  with ``level``, ``service``, ``name``, the keys above, the Lambda context the entry points add
  (``function_name``, ``function_request_id``, ``cold_start``), the API Gateway request id as
  ``correlation_id`` (the one problem documents name) and ``xray_trace_id``; at
  ``POWERTOOLS_LOG_LEVEL``. Without it Lambda's root handler (WARNING, plain text) drops INFO lines.
- Elsewhere nothing here runs: ``brokerctl dev`` prints ``broker`` lines as plain text beside its
  own progress lines (brokerctl/dev.py), pytest captures them, and no Tracer exists to disable.
"""

from __future__ import annotations

import importlib.util
import logging
from collections.abc import Callable
from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.logging.utils import copy_config_to_registered_loggers

from chalicelib.config import APP_NAME

ROOT = "broker"
# API Gateway's id of a request: the correlation id of its log lines and of its problem documents.
CORRELATION_ID_PATH = "requestContext.requestId"

Handler = Callable[[Any, Any], Any]


def get(name: str) -> logging.Logger:
    """A module's logger, under ``broker``."""
    return logging.getLogger(f"{ROOT}.{name}")


def on_lambda() -> Callable[[Handler], Handler]:
    """Send every ``broker`` line through powertools' JSON handler, and return the wrapper every
    invocation goes through (app.py registers it as Chalice middleware, for all five functions):
    the Lambda context appended to the lines, and an X-Ray subsegment around the handler."""
    service = Logger(service=APP_NAME)
    logging.getLogger(ROOT)  # registered, so that the copy finds it before any child logs
    copy_config_to_registered_loggers(source_logger=service, include={ROOT})
    trace = _tracer()

    def lambda_handler(handler: Handler) -> Handler:
        if trace is not None:
            # Responses stay out of the trace: an API answer can carry events (dead letters).
            handler = trace(handler)
        injected: Handler = service.inject_lambda_context(
            handler, correlation_id_path=CORRELATION_ID_PATH
        )
        return injected

    return lambda_handler


def _tracer() -> Callable[[Handler], Handler] | None:
    """powertools' ``capture_lambda_handler`` with its AWS calls traced (botocore), or None when
    the X-Ray SDK is not in the package. POWERTOOLS_TRACE_DISABLED turns it into a no-op."""
    if importlib.util.find_spec("aws_xray_sdk") is None:
        get("tracing").warning(
            "aws-xray-sdk is not installed: X-Ray shows Lambda's own segments of this function only"
        )
        return None
    from aws_lambda_powertools import Tracer

    tracer = Tracer(service=APP_NAME, patch_modules=("botocore",))

    def capture(handler: Handler) -> Handler:
        captured: Handler = tracer.capture_lambda_handler(handler, capture_response=False)
        return captured

    return capture
