"""Writes to user-defined endpoints by the core rules: ``epoch`` checked (a request that names an
old epoch lost a race) and incremented, ``createdat``/``modifiedat`` as the request sets them or
now, and the request's messages created or updated. ``PUT`` does not delete from a collection, so
messages a request does not name are kept (``DELETE`` removes one)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from chalicelib.core.errors import Problem, ValidationError
from chalicelib.core.registry.validation import EndpointInput, TimeRequest


def write_endpoint(
    existing: Mapping[str, Any] | None, request: EndpointInput, now: str, *, xid: str
) -> dict[str, Any]:
    """The document to store after a PUT of ``request`` over ``existing`` (None: a create)."""
    problems: list[Problem] = []
    if existing is not None:
        _check_epoch(request.epoch, int(existing["epoch"]), "epoch", xid, problems)
    messages: dict[str, Any] = dict(existing.get("messages") or {}) if existing else {}
    lowered = {k.lower(): k for k in messages}
    for mid, m in (request.messages or {}).items():
        clash = lowered.get(mid.lower())
        if clash is not None and clash != mid:
            problems.append(
                Problem(f"messages.{mid}", f"ids are unique case-insensitively: {clash!r} exists")
            )
            continue
        old = messages.get(mid)
        if old is not None:
            _check_epoch(m.epoch, int(old["epoch"]), f"messages.{mid}.epoch", xid, problems)
        messages[mid] = {
            "attributes": m.attributes,
            "epoch": 1 if old is None else int(old["epoch"]) + 1,
            "createdat": _created(old, m.createdat, now),
            "modifiedat": _modified(old, m.modifiedat, now),
        }
        lowered[mid.lower()] = mid
    if problems:
        raise ValidationError(problems)
    return {
        "attributes": request.attributes,
        "epoch": 1 if existing is None else int(existing["epoch"]) + 1,
        "createdat": _created(existing, request.createdat, now),
        "modifiedat": _modified(existing, request.modifiedat, now),
        "messages": messages,
    }


def delete_message(
    existing: Mapping[str, Any], message_id: str, epoch: str | None, now: str, *, xid: str
) -> dict[str, Any]:
    """The endpoint after removing one message: a change of its collection, so the endpoint's
    epoch and modifiedat move."""
    messages = dict(existing.get("messages") or {})
    check_epoch(epoch, int(messages[message_id]["epoch"]), f"{xid}/messages/{message_id}")
    del messages[message_id]
    return {
        **existing,
        "messages": messages,
        "epoch": int(existing["epoch"]) + 1,
        "modifiedat": now,
    }


def check_epoch(requested: str | None, current: int, xid: str) -> None:
    """``?epoch=N`` on a delete: the entity must still be at epoch N."""
    problems: list[Problem] = []
    if requested is not None:
        if not requested.isascii() or not requested.isdigit():
            problems.append(Problem("epoch", f"must be an unsigned integer, got {requested!r}"))
        else:
            _check_epoch(int(requested), current, "epoch", xid, problems)
    if problems:
        raise ValidationError(problems)


def _check_epoch(
    requested: int | None, current: int, field: str, xid: str, problems: list[Problem]
) -> None:
    if requested is not None and requested != current:
        problems.append(
            Problem(
                field,
                f"the epoch given ({requested}) for {xid} does not match its current value "
                f"({current}): it changed since it was read",
            )
        )


def _created(old: Mapping[str, Any] | None, request: TimeRequest, now: str) -> str:
    if request.present:
        return request.value or now
    return str(old["createdat"]) if old else now


def _modified(old: Mapping[str, Any] | None, request: TimeRequest, now: str) -> str:
    value = request.value if request.present else None
    if value is not None and (old is None or value != old["modifiedat"]):
        return value
    return now
