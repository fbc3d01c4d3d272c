"""The domain error tree. Adapters translate infrastructure errors into these;
``chalicelib/problems.py`` maps them to HTTP.

    BrokerError
    ├── ValidationError          every field that is wrong, reported at once
    │   └── ImmutableFieldError  a field that cannot change after create
    ├── UnauthorizedError
    ├── ForbiddenError           a sender the broker's EventPolicies (or default mode) refuse
    ├── NotFoundError
    ├── MethodNotAllowedError
    ├── ConflictError            already exists, or a stale generation
    ├── PayloadTooLargeError
    └── UnavailableError         infrastructure failed; the caller may retry
        └── InFlightError        another request is storing the same event; retry after a while
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Problem:
    """One thing wrong with an input: where (a dotted field path, or a header name) and what."""

    field: str
    message: str

    def to_json(self) -> dict[str, str]:
        return {"field": self.field, "message": self.message}


class BrokerError(Exception):
    """Base of every error the services raise on purpose."""

    title = "Broker error"

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


class ValidationError(BrokerError):
    title = "Invalid input"

    def __init__(self, problems: list[Problem], detail: str | None = None) -> None:
        if not problems:
            raise ValueError("a ValidationError needs at least one problem")
        super().__init__(detail or "; ".join(f"{p.field}: {p.message}" for p in problems))
        self.problems = list(problems)


class ImmutableFieldError(ValidationError):
    title = "Immutable field changed"


class UnauthorizedError(BrokerError):
    title = "Unauthorized"


class ForbiddenError(BrokerError):
    """A sender the broker refuses (docs/security.md): ``decision`` names what decided, for
    machines (``sender-not-admitted``, ``default-deny-all``, ...); never a policy's contents."""

    title = "Forbidden"

    def __init__(self, detail: str, decision: str) -> None:
        super().__init__(detail)
        self.decision = decision


class NotFoundError(BrokerError):
    title = "Not found"


class MethodNotAllowedError(BrokerError):
    title = "Method not allowed"


class ConflictError(BrokerError):
    title = "Conflict"


class PayloadTooLargeError(BrokerError):
    title = "Payload too large"


class UnavailableError(BrokerError):
    title = "Service unavailable"


class InFlightError(UnavailableError):
    """A deduplicated event another request has claimed and not yet stored (docs/dedup.md):
    neither a duplicate (it may never be stored) nor fresh. Answered 503 with Retry-After."""

    title = "Event being stored by another request"

    def __init__(self, detail: str, retry_after: int) -> None:
        super().__init__(detail)
        self.retry_after = retry_after


class CallTooLargeError(UnavailableError):
    """A storage call whose payload the service refused as too large (SQS's
    BatchRequestTooLong: over 1 MiB, or 256 KiB where an endpoint still has the former limit).
    Whoever sent a call that large can split it (``ingress.send_in_batches``); to every other
    caller it is the service being unavailable, as before."""
