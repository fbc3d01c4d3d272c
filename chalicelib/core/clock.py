"""The one clock of the services (each takes it as a parameter, so tests can fix the time)."""

from __future__ import annotations

from datetime import UTC, datetime


def utcnow() -> datetime:
    return datetime.now(UTC)


def rfc3339(at: datetime, timespec: str = "milliseconds") -> str:
    """The one timestamp formatter: RFC 3339 in UTC with ``Z``, to ``timespec`` as
    ``datetime.isoformat`` takes it ("seconds" as Kubernetes writes ``creationTimestamp``,
    "milliseconds" for the archive, "auto" for whatever precision ``at`` has)."""
    if at.tzinfo is None or at.utcoffset() is None:
        raise ValueError("timestamps must be timezone-aware")
    return at.astimezone(UTC).isoformat(timespec=timespec).replace("+00:00", "Z")
