"""Ingress bearer tokens of a broker: created (shown once), listed, revoked."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from chalicelib.core import tokens
from chalicelib.core.errors import NotFoundError
from chalicelib.ports import ResourceStore
from chalicelib.services.routing import BROKER, TOKEN, ConfigCache


class Tokens:
    def __init__(
        self,
        store: ResourceStore,
        cache: ConfigCache,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self._store = store
        self._cache = cache
        self._clock = clock

    def _require_broker(self, namespace: str, broker: str) -> None:
        if self._store.get(BROKER, namespace, broker) is None:
            raise NotFoundError(f'broker "{namespace}/{broker}" does not exist')

    def create(self, namespace: str, broker: str) -> dict[str, Any]:
        self._require_broker(namespace, broker)
        secret = tokens.new_token()
        token_id = uuid.uuid4().hex[:12]
        created = self._clock().strftime("%Y-%m-%dT%H:%M:%SZ")
        doc = {"broker": broker, "hash": tokens.hash_token(secret), "createdAt": created}
        self._store.put(TOKEN, namespace, token_id, doc, None)
        self._cache.invalidate(namespace, broker)
        return {
            "id": token_id,
            "broker": broker,
            "createdAt": created,
            "token": secret,
            "note": "Store this token now: it is shown only once.",
        }

    def list(self, namespace: str, broker: str) -> dict[str, Any]:
        self._require_broker(namespace, broker)
        items = [
            {"id": t.name, "broker": broker, "createdAt": t.doc.get("createdAt")}
            for t in self._store.list(TOKEN, namespace)
            if t.doc.get("broker") == broker
        ]
        return {"items": items}

    def revoke(self, namespace: str, broker: str, token_id: str) -> dict[str, Any]:
        item = self._store.get(TOKEN, namespace, token_id)
        if item is None or item.doc.get("broker") != broker:
            raise NotFoundError(f'token "{token_id}" of broker "{namespace}/{broker}" not found')
        self._store.delete(TOKEN, namespace, token_id)
        self._cache.invalidate(namespace, broker)
        return {"revoked": token_id}
