"""boto3 clients, built lazily in one place and shared across warm invocations.

Plain clients that honour ``AWS_ENDPOINT_URL`` (moto, LocalStack) through Settings.endpoint_url.
"""

from __future__ import annotations

import threading
from typing import Any

from chalicelib.config import Settings

# Every call's worst case is ATTEMPTS x (connect + read) plus botocore's standard-mode backoff
# between attempts: before attempt k + 1 a throttled call waits up to 2^(k-1) s, and up to 5 s more
# when the answer asks for it (x-amz-retry-after). 2 x (1 + 3) + (1 + 5) = 14 s: half of the API
# function's 29 s (API Gateway's limit), so that a call failing as slowly as it can still leaves
# the function the time to answer 503 and undo what it began instead of being cut off. (It was
# 4 x (5 + 30) + 22 = 162 s.) tests/unit/test_aws_clients.py holds the clients to every function
# timeout in .chalice/config.json.
ATTEMPTS = 2
CONNECT_TIMEOUT_SECONDS = 1
READ_TIMEOUT_SECONDS = 3
# An emulator (Settings.endpoint_url: moto, LocalStack) may load a service on its first call for
# longer than any call on AWS takes (LocalStack starts DynamoDB Local, a JVM; moto imports the
# service's backend), and no API Gateway bounds the local runtime: its clients read for longer.
EMULATOR_READ_TIMEOUT_SECONDS = 30


class AwsClients:
    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self._clients: dict[str, Any] = {}
        self._lock = threading.Lock()

    def client(self, service: str) -> Any:
        client = self._clients.get(service)
        if client is None:
            with self._lock:
                client = self._clients.get(service)
                if client is None:
                    client = self._clients[service] = self._build(service)
        return client

    def dedicated(self, service: str, **config: Any) -> Any:
        """A client of its own (not shared, not cached), with ``config`` over the defaults: e.g.
        a larger pool for long-polling callers that would starve everyone else's."""
        return self._build(service, **config)

    def _build(self, service: str, **overrides: Any) -> Any:
        import boto3
        from botocore.config import Config

        emulated = self._settings.endpoint_url is not None
        options: dict[str, Any] = {
            "retries": {"total_max_attempts": ATTEMPTS, "mode": "standard"},
            "max_pool_connections": 50,
            "connect_timeout": CONNECT_TIMEOUT_SECONDS,
            "read_timeout": EMULATOR_READ_TIMEOUT_SECONDS if emulated else READ_TIMEOUT_SECONDS,
            **overrides,
        }
        # A session per client: boto3's default session is not safe to build clients from in
        # several threads at once.
        return boto3.session.Session().client(
            service,
            region_name=self._settings.region,
            endpoint_url=self._settings.endpoint_url,
            config=Config(**options),
        )
