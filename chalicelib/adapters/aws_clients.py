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

        options: dict[str, Any] = {
            "retries": {"max_attempts": 3, "mode": "standard"},
            "max_pool_connections": 50,
            "connect_timeout": 5,
            "read_timeout": 30,
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
