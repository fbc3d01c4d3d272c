"""The one clock of the services (each takes it as a parameter, so tests can fix the time)."""

from __future__ import annotations

from datetime import UTC, datetime


def utcnow() -> datetime:
    return datetime.now(UTC)
