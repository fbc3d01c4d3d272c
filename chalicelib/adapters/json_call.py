"""An AWS JSON-protocol call without botocore's request pipeline, for the calls the broker makes
most: SendMessageBatch (every enqueue: ingress, delivery's send-backs, redrive, replays;
adapters/sqs_send_call.py) and DynamoDB's GetItem, PutItem, Query, Scan, UpdateItem and DeleteItem
(every resource read and write: configuration loads, replay checkpoints, the control plane;
adapters/dynamodb_store.py).

botocore spends 1.3-1.5 ms of CPU on a small DynamoDB call and about 2.9 ms on a SendMessageBatch
of ten 50 KB messages (docs/replay.md, Throughput): parameters validated, the body written by the
stdlib's ``json``, the user-agent string rebuilt character by character, a dozen events emitted.
Here the same request is built directly — the AWS JSON protocol both services speak
(``X-Amz-Target: <targetPrefix>.<Operation>``, ``application/x-amz-json-1.0``; for SQS also
``x-amzn-query-mode: true``), the body written by msgspec (bytes as base64, as botocore writes
blobs) — and everything that decides correctness is botocore's own:

- the request is signed by ``botocore.auth.SigV4Auth`` with the client's credentials (refreshed
  as the client's are), its region and signing name;
- it travels on the client's own HTTP session (its connection pool, timeouts, TLS and proxy
  settings) to the client's endpoint (DynamoDB's regional one: botocore may prefer an
  account-based endpoint, ``<account>.ddb.<region>.amazonaws.com``, when the credentials carry
  an account id; both serve the same table);
- the answer, or the error, is read by botocore's parser for the service's protocol, so callers
  see what the client's method returns or raises (the same exception class and code, the
  query-compatible one where SQS sends it; ``ResponseMetadata.RetryAttempts``);
- failed attempts are retried as the client's standard retry mode retries them (its retry
  conditions, DynamoDB's CRC32 check of the answer among them, and exponential backoff with
  jitter, DynamoDB's shorter base included; as many attempts as the client makes: 4 for the
  broker's clients, whose ``max_attempts: 3`` botocore reads as retries). Not kept: the standard
  mode's retry quota (a token bucket shared by a client's calls, which stops retrying after many
  failures in a row); each call makes its own attempts.

Not checked here: the parameters against the service model (botocore's validation); the
callers are the broker's adapters, whose parameters are fixed in code and tested through
botocore as well (``Settings.sqs_direct_send`` and ``Settings.dynamodb_direct_calls`` off).
Nor are a modeled error's own fields added to it (DynamoDB's ``Item`` of a refused condition
asked with ``ReturnValuesOnConditionCheckFailure``, which the store does not ask for) or
``ResponseMetadata.MaxAttemptsReached``.

Where the client does not speak that protocol (an older botocore, where SQS used the query
protocol), or where botocore's calls are instrumented (X-Ray traces each call by wrapping
botocore), ``for_client`` answers None and the caller keeps the client's method. Hooks
registered on the client's events see these calls as botocore's own: ``before-parameter-build``,
``before-call`` (whose handlers may add headers, or answer in the call's place as botocore's
Stubber does), ``before-send`` on each attempt (moto's ``mock_aws`` answers there) and
``after-call`` are emitted with the same arguments (the local runtime wakes an idle queue's
pollers that way; the benchmarks count calls that way). Not emitted: ``request-created`` and
``before-sign`` (botocore signs and rebuilds its user agent there) and ``after-call-error``.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import random
import time
import types
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from chalicelib.core.cloudevents.json_format import MSGSPEC_ENCODE as _msgspec_encode

log = logging.getLogger("broker.json_call")

# Attempts in all when the client does not say (botocore's standard mode: 3 retries). The broker's
# clients say ``max_attempts: 3`` (aws_clients.py), which botocore reads as 3 retries, 4 attempts.
MAX_ATTEMPTS = 4


def encode_body(params: Mapping[str, Any]) -> bytes:
    """The request body of ``params``: msgspec's compact UTF-8 JSON, or the stdlib's (as botocore
    writes it) for what msgspec refuses (a lone surrogate, which SQS then refuses in turn)."""
    body = dict(params)
    if _msgspec_encode is not None:
        try:
            return _msgspec_encode(body)
        except (TypeError, ValueError, OverflowError):  # UnicodeEncodeError is a ValueError
            pass
    return json.dumps(body, default=_base64).encode("utf-8")


def _base64(value: Any) -> str:
    """A binary value as botocore writes a blob in JSON (DynamoDB's ``B``): base64 text."""
    if isinstance(value, bytes | bytearray):
        return base64.b64encode(value).decode("utf-8")
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


_C = TypeVar("_C", bound="JsonCall")


class JsonCall:
    """``call(params)``: one operation's answer as boto3's client gives it, or its exception."""

    def __init__(
        self,
        client: Any,
        credentials: Any,
        http_session: Any,
        operation: str,
        max_attempts: int = MAX_ATTEMPTS,
        sleep: Callable[[float], None] = time.sleep,
        rand: Callable[[], float] = random.random,
    ) -> None:
        from botocore.parsers import create_parser
        from botocore.retries.standard import (
            ExponentialBackoff,
            RetryEventAdapter,
            RetryPolicy,
            StandardRetryConditions,
            ThrottlingErrorDetector,
        )

        model = client.meta.service_model
        self._name = operation
        self._operation = model.operation_model(operation)
        self._output = self._operation.output_shape
        self._parser = create_parser(_protocol(model))
        self._url = client.meta.endpoint_url.rstrip("/") + "/"
        self._region = client.meta.region_name
        self._signing_name = model.signing_name
        self._credentials = credentials
        self._http = http_session
        self._sleep = sleep
        self._max_attempts = max_attempts
        self._events = client.meta.events
        self._exceptions = client.exceptions
        self._service_id = model.service_id.hyphenize()
        # botocore's standard mode asks its retry conditions about every answer, successes too,
        # where one of them can retry a success: DynamoDB's answers carry their CRC32, and one
        # that does not match is retried. Elsewhere a success is the answer at once.
        self._check_answers = model.service_name == "dynamodb"
        headers = {
            "X-Amz-Target": f"{model.metadata['targetPrefix']}.{operation}",
            "Content-Type": f"application/x-amz-json-{model.metadata.get('jsonVersion', '1.0')}",
            "User-Agent": f"Botocore/{_botocore_version()} serverless-broker/direct-call",
        }
        if model.metadata.get("awsQueryCompatible") is not None:
            headers["x-amzn-query-mode"] = "true"  # errors carry their query-protocol codes
        self._headers = headers
        self._policy = RetryPolicy(
            retry_checker=StandardRetryConditions(max_attempts=max_attempts),
            retry_backoff=ExponentialBackoff(
                random=rand,
                service_name=self._service_id,
                throttling_detector=ThrottlingErrorDetector(RetryEventAdapter()),
            ),
        )

    @classmethod
    def for_client(cls, client: Any, credentials: Any, operation: str) -> JsonCall | None:
        """The call of ``operation`` on ``client``'s endpoint, or None where it cannot be made
        this way (the client speaks another protocol, has no HTTP session to share, or its
        calls are instrumented)."""
        found = usable(client, operation)
        if found is None:
            return None
        http, attempts = found
        return built(lambda: cls(client, credentials, http, operation, max_attempts=attempts))

    def call(self, params: dict[str, Any]) -> Any:
        """As ``client.<operation>(**params)``, with the client's events emitted as botocore
        emits them (``before-parameter-build``, ``before-call``, whose handlers may add headers
        or answer in its place, as botocore's Stubber does, and ``after-call``): what watches or
        counts the client's calls sees these too. ``params`` may be changed by those handlers."""
        event = f"{self._service_id}.{self._name}"
        context: dict[str, Any] = {}
        self._events.emit(
            f"before-parameter-build.{event}",
            params=params,
            model=self._operation,
            context=context,
        )
        request = {
            "url_path": "/",
            "query_string": "",
            "method": "POST",
            "headers": dict(self._headers),
            "body": encode_body(params),
            "url": self._url,
            "context": context,
        }
        _, answered = self._events.emit_until_response(
            f"before-call.{event}",
            model=self._operation,
            params=request,
            request_signer=None,
            context=context,
        )
        if answered is not None:
            response, parsed = answered
        else:
            response, parsed = self._send(request["body"], request["headers"], event)
        self._events.emit(
            f"after-call.{event}",
            http_response=response,
            parsed=parsed,
            model=self._operation,
            context=context,
        )
        if response.status_code >= 300:
            # As botocore: the exception class of the code (the query code SQS sends, which an
            # after-call handler of botocore's puts in the context), e.g. QueueDoesNotExist.
            code = context.get("error_code_override") or parsed.get("Error", {}).get("Code")
            raise self._exceptions.from_code(code)(parsed, self._name)
        return parsed

    def _send(self, body: bytes, headers: Mapping[str, str], event: str) -> tuple[Any, Any]:
        """The answer and its parsed form, once one is not to be retried; raises the transport
        error of the last attempt when none came. Each attempt emits the client's
        ``before-send`` as botocore does: a handler's answer is the answer (moto's ``mock_aws``
        answers there)."""
        from botocore.auth import SigV4Auth
        from botocore.awsrequest import AWSRequest
        from botocore.exceptions import ConnectionError as BotoConnectionError
        from botocore.exceptions import HTTPClientError, NoCredentialsError
        from botocore.hooks import first_non_none_response
        from botocore.retries.standard import RetryContext

        attempt = 0
        while True:
            attempt += 1
            if self._credentials is None:
                raise NoCredentialsError()
            request = AWSRequest("POST", self._url, data=body, headers=dict(headers))
            frozen = self._credentials.get_frozen_credentials()
            SigV4Auth(frozen, self._signing_name, self._region).add_auth(request)
            request.headers["amz-sdk-request"] = f"attempt={attempt}; max={self._max_attempts}"
            response: Any = None
            parsed: Any = None
            caught: Exception | None = None
            try:
                prepared = request.prepare()
                response = first_non_none_response(
                    self._events.emit(f"before-send.{event}", request=prepared)
                )
                if response is None:
                    response = self._http.send(prepared)
                parsed = self._parser.parse(
                    {
                        "status_code": response.status_code,
                        "headers": response.headers,
                        "body": response.content,
                    },
                    self._output,
                )
            except (BotoConnectionError, HTTPClientError) as exc:  # refused, reset, timed out
                caught = exc
            if caught is None and response.status_code < 300 and not self._check_answers:
                parsed.setdefault("ResponseMetadata", {})["RetryAttempts"] = attempt - 1
                return response, parsed
            context = RetryContext(
                attempt_number=attempt,
                operation_model=self._operation,
                parsed_response=parsed,
                http_response=response,
                caught_exception=caught,
            )
            if not self._policy.should_retry(context):
                if caught is not None:
                    raise caught
                parsed.setdefault("ResponseMetadata", {})["RetryAttempts"] = attempt - 1
                return response, parsed
            self._sleep(self._policy.compute_retry_delay(context))


def usable(client: Any, operation: str) -> tuple[Any, int] | None:
    """``client``'s HTTP session and attempts when ``operation`` can be made directly on it."""
    model = client.meta.service_model
    endpoint = getattr(client, "_endpoint", None)
    http = getattr(endpoint, "http_session", None)
    protocol = _protocol(model)
    if protocol != "json" or "targetPrefix" not in model.metadata or http is None:
        log.info("%s through botocore (protocol %s)", operation, protocol)
        return None
    if _instrumented():
        log.info("%s through botocore: its calls are instrumented (X-Ray)", operation)
        return None
    retries = getattr(client.meta.config, "retries", None) or {}
    return http, int(retries.get("total_max_attempts") or MAX_ATTEMPTS)


def built(make: Callable[[], _C]) -> _C | None:
    """``make()``, or None (botocore makes the calls) where this botocore lacks a part the call
    uses as it uses it (an older one, such as a Lambda runtime's: its retry backoff took no
    service name before 1.40-something)."""
    try:
        return make()
    except (TypeError, ImportError, AttributeError) as exc:
        log.warning("calls through botocore: its parts are not what a direct call uses (%s)", exc)
        return None


def _instrumented() -> bool:
    """Whether botocore's calls are wrapped by something else than botocore (the X-Ray SDK,
    which Powertools' Tracer turns on where it is installed, and OpenTelemetry wrap
    ``BaseClient._make_api_call`` with wrapt to trace each call): a call made here would be
    missing from the traces, so botocore makes it."""
    import botocore
    from botocore.client import BaseClient

    made = BaseClient.__dict__.get("_make_api_call")
    # ``type``, not ``isinstance``: wrapt's FunctionWrapper passes ``__class__`` (and
    # ``__code__``) on from the function it wraps, and X-Ray's patch is one.
    if type(made) is not types.FunctionType:
        return True
    home = os.path.dirname(os.path.abspath(botocore.__file__))
    return not os.path.abspath(made.__code__.co_filename).startswith(home + os.sep)


def _protocol(model: Any) -> str:
    return str(getattr(model, "resolved_protocol", None) or model.protocol)


def _botocore_version() -> str:
    import botocore

    return str(botocore.__version__)
