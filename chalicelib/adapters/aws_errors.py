"""Translate botocore errors into the domain error tree (``core/errors.py``); HTTP is chosen from it
in one place (``problems.py``)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from chalicelib.core.errors import (
    CallTooLargeError,
    ConflictError,
    NotFoundError,
    UnavailableError,
)

_NOT_FOUND = {
    "ResourceNotFoundException",
    "AWS.SimpleQueueService.NonExistentQueue",
    "QueueDoesNotExist",
    "NoSuchKey",
    "NoSuchBucket",
    "404",
}
_CONFLICT = {"ConditionalCheckFailedException", "ResourceConflictException", "QueueAlreadyExists"}
# A SendMessageBatch call over the payload limit (1 MiB; 256 KiB where an endpoint still has the
# former limit): ``ingress.send_in_batches`` splits the call.
_TOO_LARGE = {"BatchRequestTooLong", "AWS.SimpleQueueService.BatchRequestTooLong"}


def error_code(exc: Exception) -> str:
    response = getattr(exc, "response", None) or {}
    return str(response.get("Error", {}).get("Code", ""))


@contextmanager
def translated(what: str) -> Iterator[None]:
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        yield
    except ClientError as exc:
        code = error_code(exc)
        if code in _NOT_FOUND:
            raise NotFoundError(f"{what}: not found") from exc
        if code in _CONFLICT:
            raise ConflictError(f"{what}: conflict ({code})") from exc
        if code in _TOO_LARGE:
            raise CallTooLargeError(f"{what}: {code}") from exc
        raise UnavailableError(f"{what}: {code or 'AWS error'}") from exc
    except BotoCoreError as exc:
        raise UnavailableError(f"{what}: {exc}") from exc
