"""Ingress bearer tokens of a broker: created (shown once), listed, revoked, and revoked all
together when the broker is deleted, so a broker re-created under the same name never accepts a
token issued to its predecessor (fail closed, design.md §5)."""

from __future__ import annotations

import builtins
import uuid
from collections.abc import Callable
from datetime import datetime
from typing import Any

from chalicelib.core import senders, tokens
from chalicelib.core.clock import rfc3339, utcnow
from chalicelib.core.errors import ConflictError, NotFoundError
from chalicelib.core.resources.broker import BROKERS
from chalicelib.core.tokens import STORE_KIND as TOKEN
from chalicelib.ports import ResourceStore
from chalicelib.services.resources import Resources
from chalicelib.services.routing import ConfigCache

# Tokens a broker may hold at once (rotation needs two; a hundred covers one per producer team).
# Without a bound every create added to what each list, revoke-all and config load reads: a
# client looping on create made each of those slower without end.
MAX_TOKENS_PER_BROKER = 100


class Tokens:
    def __init__(
        self,
        store: ResourceStore,
        cache: ConfigCache,
        clock: Callable[[], datetime] = utcnow,
    ) -> None:
        self._store = store
        self._cache = cache
        self._clock = clock

    def _broker_uid(self, namespace: str, broker: str) -> str | None:
        stored = Resources(self._store, BROKERS).get(namespace, broker)
        return stored.resource.uid if stored else None

    def _require_broker(self, namespace: str, broker: str) -> str:
        uid = self._broker_uid(namespace, broker)
        if uid is None:
            raise NotFoundError(f'broker "{namespace}/{broker}" does not exist')
        return uid

    def create(self, namespace: str, broker: str) -> dict[str, Any]:
        uid = self._require_broker(namespace, broker)
        held = sum(1 for t in self._store.list(TOKEN, namespace) if t.doc.get("broker") == broker)
        if held >= MAX_TOKENS_PER_BROKER:
            raise ConflictError(
                f'broker "{namespace}/{broker}" holds {held} tokens, the most it may; '
                "revoke one before creating another"
            )
        secret = tokens.new_token()
        token_id = uuid.uuid4().hex[:12]
        created = rfc3339(self._clock(), "seconds")
        doc = {
            "broker": broker,
            "brokerUid": uid,
            "hash": tokens.hash_token(secret),
            "createdAt": created,
        }
        self._store.put(TOKEN, namespace, token_id, doc, None)
        if self._broker_uid(namespace, broker) != uid:
            # The broker was deleted (and maybe re-created) while the token was written: the
            # delete's revoke_all may have run before this put, so take the token back.
            self._store.delete(TOKEN, namespace, token_id)
            raise NotFoundError(f'broker "{namespace}/{broker}" was deleted meanwhile')
        self._cache.invalidate(namespace, broker)
        return {
            "id": token_id,
            "broker": broker,
            "identity": senders.token(namespace, token_id),  # what EventPolicies name
            "createdAt": created,
            "token": secret,
            "note": "Store this token now: it is shown only once.",
        }

    def list(self, namespace: str, broker: str) -> dict[str, Any]:
        self._require_broker(namespace, broker)
        items = [
            {
                "id": t.name,
                "broker": broker,
                "identity": senders.token(namespace, t.name),
                "createdAt": t.doc.get("createdAt"),
            }
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

    def revoke_all(self, namespace: str, broker: str) -> builtins.list[str]:
        """Delete every token of the broker (called before the broker itself is deleted, so a
        failure here leaves the broker in place and the delete can be retried)."""
        gone = [t.name for t in self._store.list(TOKEN, namespace) if t.doc.get("broker") == broker]
        for token_id in gone:
            self._store.delete(TOKEN, namespace, token_id)
        if gone:
            self._cache.invalidate(namespace, broker)
        return gone
