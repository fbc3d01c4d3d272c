"""What the adapters on the broker's one DynamoDB table share: the lazily built client of
``AwsClients`` (never at import time) and a sleep for their retries, injected for tests."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from chalicelib.adapters.aws_clients import AwsClients


class DynamoTable:
    def __init__(
        self,
        clients: AwsClients,
        table: str,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._clients = clients
        self._table = table
        self._sleep = sleep

    @property
    def _ddb(self) -> Any:
        return self._clients.client("dynamodb")
