"""Connections (docs/targets.md, Connections) as a resource kind of the generic service: admission
checks what the stage allows (the secret prefix its delivery role may read; https token URLs
outside local mode), status says whether the connection can authenticate now (checked when read,
remembered ``ttl`` seconds), and a trigger that names one is Ready only while it is."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import datetime
from typing import Any

from chalicelib.config import Settings
from chalicelib.core.clock import utcnow
from chalicelib.core.errors import ValidationError
from chalicelib.core.resources.connection import (
    Connection,
    connection_status,
    prefix_problems,
    token_url_problems,
)
from chalicelib.services.connection_auth import ConnectionAuth, ExpiringCache
from chalicelib.services.resources import Hooks, Resources, Stored

CONNECTION_NOT_READY = "ConnectionNotReady"
PREFIX_SETTING = "named from the stage: serverless-broker/<stage>/connections/"
DEFAULT_TTL_SECONDS = 30.0
MAX_ENTRIES = 1024

Problem = tuple[str, str]  # (a condition's reason, its message)


class ConnectionChecks:
    """Whether a connection can authenticate, remembered ``ttl`` seconds per generation, so that
    listing triggers does not read every secret each time."""

    def __init__(
        self,
        connections: Resources[Connection],
        auth: ConnectionAuth,
        ttl: float = DEFAULT_TTL_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.connections = connections
        self._auth = auth
        self._ttl = ttl
        # The same bounded cache as the secrets' and tokens' (a one-tuple: None is an answer).
        self._seen: ExpiringCache[tuple[str, str, str, int], tuple[Problem | None]] = ExpiringCache(
            clock, MAX_ENTRIES
        )

    def problem(self, connection: Connection) -> Problem | None:
        key = (connection.namespace, connection.name, connection.uid, connection.generation)
        seen = self._seen.get(key)
        if seen is not None:
            return seen[0]
        found = self._auth.problem(connection)
        self._seen.put(key, (found,), self._ttl)
        return found

    def trigger_problem(self, namespace: str, name: str | None) -> Problem | None:
        """Why a trigger naming the connection ``name`` cannot deliver with it (reason
        ConnectionNotReady), or None (no connection named, or one that is Ready)."""
        if name is None:
            return None
        stored = self.connections.get(namespace, name)
        if stored is None:
            return CONNECTION_NOT_READY, f'Connection "{name}" does not exist.'
        found = self.problem(stored.resource)
        if found is None:
            return None
        return CONNECTION_NOT_READY, f'Connection "{name}" is not Ready ({found[0]}): {found[1]}'


class ConnectionHooks(Hooks[Connection]):
    def __init__(
        self,
        checks: ConnectionChecks,
        settings: Settings,
        clock: Callable[[], datetime] = utcnow,
    ) -> None:
        self.checks = checks
        self._settings = settings
        self._clock = clock

    def check(self, resource: Connection) -> None:
        settings = self._settings
        problems = prefix_problems(resource, settings.connection_secret_prefix, PREFIX_SETTING)
        problems += token_url_problems(resource, allow_http=settings.local_mode)
        if problems:
            raise ValidationError(problems)

    def status(self, stored: Stored[Connection]) -> dict[str, Any]:
        return connection_status(
            stored.resource,
            problem=self.checks.problem(stored.resource),
            now=self._clock(),
            previous=stored.status,
        )
