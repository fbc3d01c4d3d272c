"""boto3 clients, built lazily in one place and shared across warm invocations.

Plain clients that honour ``AWS_ENDPOINT_URL`` (moto, LocalStack) through Settings.endpoint_url.
"""

from __future__ import annotations

import threading
from typing import Any

from chalicelib.config import Settings


class AwsClients:
    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self._clients: dict[str, Any] = {}
        self._credentials: dict[str, Any] = {}
        self._send_call: Any = None
        self._direct: dict[tuple[str, str], Any] = {}  # (service, operation): JsonCall or False
        self._lock = threading.Lock()

    def client(self, service: str) -> Any:
        client = self._clients.get(service)
        if client is None:
            with self._lock:
                client = self._clients.get(service)
                if client is None:
                    client, credentials = self._build_with_credentials(service)
                    self._credentials[service] = credentials
                    self._clients[service] = client
        return client

    def sqs_send_call(self) -> Any:
        """SendMessageBatch on the shared SQS client's endpoint, credentials and HTTP session
        without botocore's request pipeline (adapters/sqs_send_call.py); None when
        ``Settings.sqs_direct_send`` is off or the client cannot make it so."""
        if not self._settings.sqs_direct_send:
            return None
        if self._send_call is None:
            from chalicelib.adapters.sqs_send_call import SendMessageBatchCall

            client = self.client("sqs")
            with self._lock:
                if self._send_call is None:
                    made = SendMessageBatchCall.for_client(client, self._credentials["sqs"])
                    self._send_call = made or False
        return self._send_call or None

    def direct_call(self, service: str, operation: str) -> Any:
        """``operation`` on the shared ``service`` client's endpoint, credentials and HTTP
        session without botocore's request pipeline (adapters/json_call.py): a ``JsonCall``, or
        None when the client cannot make it so (then its method does). DynamoDB's only when
        ``Settings.dynamodb_direct_calls``, SQS's only when ``Settings.sqs_direct_send``."""
        if service == "dynamodb" and not self._settings.dynamodb_direct_calls:
            return None
        if service == "sqs" and not self._settings.sqs_direct_send:
            return None
        made = self._direct.get((service, operation))
        if made is None:
            from chalicelib.adapters.json_call import JsonCall

            client = self.client(service)
            with self._lock:
                made = self._direct.get((service, operation))
                if made is None:
                    found = JsonCall.for_client(client, self._credentials[service], operation)
                    made = self._direct[(service, operation)] = found or False
        return made or None

    def dedicated(self, service: str, **config: Any) -> Any:
        """A client of its own (not shared, not cached), with ``config`` over the defaults: e.g.
        a larger pool for long-polling callers that would starve everyone else's."""
        return self._build_with_credentials(service, **config)[0]

    def _build_with_credentials(self, service: str, **overrides: Any) -> tuple[Any, Any]:
        """A client, and the credentials it signs with (its session's: refreshed alike)."""
        import boto3
        from botocore.config import Config

        options: dict[str, Any] = {
            "retries": {"max_attempts": 3, "mode": "standard"},
            "max_pool_connections": 50,
            "connect_timeout": 5,
            "read_timeout": 30,
            **overrides,
        }
        config = Config(**options)
        session = boto3.session.Session()
        client = session.client(
            service,
            region_name=self._settings.region,
            endpoint_url=self._settings.endpoint_url,
            config=config,
        )
        return client, session.get_credentials()
