"""What the tests of the direct AWS calls share (adapters/json_call.py, tests/unit/test_json_call.py
and test_sqs_send_call.py): an HTTP session that answers in the network's place, clients
configured as the broker's, and the request boto3 itself would have sent."""

from __future__ import annotations

import datetime
import json
from collections.abc import Callable
from typing import Any

import boto3
import pytest
from botocore.awsrequest import HeadersDict
from botocore.config import Config

ENDPOINT = "http://127.0.0.1:9"  # never contacted: the session below answers
ATTEMPTS = 4  # the broker's clients: max_attempts 3, which botocore reads as 3 retries
FROZEN_AT = datetime.datetime(2026, 11, 26, 12, 0, 0)  # the signing clock, where it is frozen


class Response:
    def __init__(self, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
        self.status_code = status
        self.headers = HeadersDict(headers or {})
        self.content = json.dumps(body).encode()


class Session:
    """Answers each request with the next of ``answers`` (a response, or an exception raised)."""

    def __init__(self, *answers: Any) -> None:
        self.answers = list(answers)
        self.requests: list[Any] = []

    def send(self, prepared: Any) -> Any:
        self.requests.append(prepared)
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer


def broker_client(service: str, endpoint: str = ENDPOINT) -> Any:
    """A client configured as the broker's (aws_clients.py): 3 retries, standard mode."""
    return boto3.session.Session().client(
        service,
        region_name="eu-west-1",
        endpoint_url=endpoint,
        aws_access_key_id="AKIDEXAMPLE",
        aws_secret_access_key="secret",
        config=Config(retries={"max_attempts": 3, "mode": "standard"}, connect_timeout=1),
    )


def freeze_signing_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("botocore.auth.get_current_datetime", lambda: FROZEN_AT)


class _Stop(Exception):
    pass


def boto3_request(made_by: Any, call: Callable[[Any], Any]) -> Any:
    """The request boto3's client ``made_by`` sends for ``call(client)``, stopped before it is."""
    seen: list[Any] = []

    def stop(request: Any, **_: Any) -> Any:
        seen.append(request)
        raise _Stop()

    made_by.meta.events.register("before-send", stop)
    with pytest.raises(_Stop):
        call(made_by)
    return seen[0]


def text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else value
