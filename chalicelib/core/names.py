"""Resource names: the DNS-1123 label rule, reserved namespaces, and the SQS queue names derived
from a trigger's identity.

SQS names allow 80 characters of ``[A-Za-z0-9_-]``. A queue name is
``{prefix}{trigger (truncated)}-{hash}`` and its DLQ adds ``-dlq``, where the hash is the first 16
hex digits (64 bits) of SHA-256 over ``{namespace}/{broker}/{trigger}``: the trigger part lets a
person find the queue in the console, the hash keeps names unique across namespaces and brokers
and stable across restarts (nothing is stored to map a trigger to its queues).

An ordered trigger (docs/ordering.md) has FIFO queues, whose names SQS requires to end in
``.fifo`` (within the same 80 characters): ``{prefix}{trigger}-{hash}.fifo`` and
``{prefix}{trigger}-{hash}-dlq.fifo``. The readable part of a FIFO name is 5 characters shorter;
standard names are unchanged.
"""

from __future__ import annotations

import hashlib
import json
import re

from chalicelib.core.errors import Problem

MAX_NAME_LENGTH = 63
RESERVED_NAMESPACES = frozenset({"apis", "registry", "healthz", "metrics"})
MAX_QUEUE_NAME_LENGTH = 80
MAX_PREFIX_LENGTH = 40
DLQ_SUFFIX = "-dlq"
FIFO_SUFFIX = ".fifo"
_HASH_LENGTH = 16

_DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_PREFIX = re.compile(r"^[A-Za-z0-9_-]*$")
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")
_OWNED_TAIL = re.compile(
    rf"^[A-Za-z0-9_-]*-[0-9a-f]{{{_HASH_LENGTH}}}({DLQ_SUFFIX})?({re.escape(FIFO_SUFFIX)})?$"
)


def quote(value: object) -> str:
    """A value as it appears in JSON, for messages read by API users (``"B"``, ``3``, ``null``),
    cut at 80 characters so that an oversized input does not come back whole in the error."""
    text = json.dumps(value, ensure_ascii=False, default=repr)
    return text if len(text) <= 80 else text[:79] + "…"


def is_dns1123_label(value: str) -> bool:
    return len(value) <= MAX_NAME_LENGTH and _DNS1123_LABEL.fullmatch(value) is not None


def name_problems(value: object, field: str, *, what: str = "name") -> list[Problem]:
    """Problems with ``value`` as a DNS-1123 label (empty when it is one). A namespace
    (``what="namespace"``) must also not be reserved: every path that names one (ingress, the
    control plane) checks it here, so none can forget (design.md §2)."""
    if not isinstance(value, str) or not value:
        return [Problem(field, f"{what} is required and must be a non-empty string")]
    if len(value) > MAX_NAME_LENGTH:
        return [
            Problem(field, f"{what} {quote(value)} is longer than {MAX_NAME_LENGTH} characters")
        ]
    if not _DNS1123_LABEL.fullmatch(value):
        return [
            Problem(
                field,
                f"{what} {quote(value)} must be a DNS-1123 label: lower-case letters, digits "
                "and '-', starting and ending with a letter or digit",
            )
        ]
    if what == "namespace" and value in RESERVED_NAMESPACES:
        reserved = ", ".join(sorted(RESERVED_NAMESPACES))
        return [Problem(field, f"namespace {quote(value)} is reserved ({reserved})")]
    return []


def namespace_problems(value: object, field: str = "metadata.namespace") -> list[Problem]:
    """Problems with ``value`` as a namespace: a DNS-1123 label that is not reserved."""
    return name_problems(value, field, what="namespace")


def check_prefix(prefix: str) -> None:
    if len(prefix) > MAX_PREFIX_LENGTH or not _PREFIX.fullmatch(prefix):
        raise ValueError(
            f"queue prefix {quote(prefix)} must be at most {MAX_PREFIX_LENGTH} characters of "
            "[A-Za-z0-9_-]"
        )


def trigger_hash(namespace: str, broker: str, trigger: str) -> str:
    digest = hashlib.sha256(f"{namespace}/{broker}/{trigger}".encode()).hexdigest()
    return digest[:_HASH_LENGTH]


def _base_name(prefix: str, namespace: str, broker: str, trigger: str, fifo: bool) -> str:
    check_prefix(prefix)
    room = MAX_QUEUE_NAME_LENGTH - len(prefix) - 1 - _HASH_LENGTH - len(DLQ_SUFFIX)
    if fifo:
        room -= len(FIFO_SUFFIX)
    readable = _UNSAFE.sub("-", trigger)[:room].rstrip("-")
    return f"{prefix}{readable}-{trigger_hash(namespace, broker, trigger)}"


def queue_name(
    prefix: str, namespace: str, broker: str, trigger: str, *, fifo: bool = False
) -> str:
    """The trigger's delivery queue, e.g. ``sb-local-orders-3f0c1a2b4d5e6f70`` (``.fifo`` added
    for an ordered trigger)."""
    base = _base_name(prefix, namespace, broker, trigger, fifo)
    return base + FIFO_SUFFIX if fifo else base


def dlq_name(prefix: str, namespace: str, broker: str, trigger: str, *, fifo: bool = False) -> str:
    """The trigger's dead-letter queue: the delivery queue's name plus ``-dlq`` (before
    ``.fifo``: the DLQ of a FIFO queue must be FIFO too)."""
    base = _base_name(prefix, namespace, broker, trigger, fifo) + DLQ_SUFFIX
    return base + FIFO_SUFFIX if fifo else base


def trigger_queue_names(prefix: str, namespace: str, broker: str, trigger: str) -> tuple[str, ...]:
    """Every name the trigger's queues may have (standard and FIFO, queue then DLQ): what to look
    for when the trigger's kind of queue is not known, or to find what a previous trigger of the
    same name left."""
    return tuple(
        make(prefix, namespace, broker, trigger, fifo=fifo)
        for fifo in (False, True)
        for make in (queue_name, dlq_name)
    )


def is_fifo(name: str) -> bool:
    return name.endswith(FIFO_SUFFIX)


def is_dlq(name: str) -> bool:
    return name.removesuffix(FIFO_SUFFIX).endswith(DLQ_SUFFIX)


def dlq_of(queue: str) -> str:
    """The DLQ of a trigger queue, from the queue's name."""
    if is_fifo(queue):
        return queue.removesuffix(FIFO_SUFFIX) + DLQ_SUFFIX + FIFO_SUFFIX
    return queue + DLQ_SUFFIX


def is_owned_queue(prefix: str, name: str) -> bool:
    """Whether ``name`` has the shape of a queue this deployment (``prefix``) creates.

    Prefixes of different deployments sharing an account must not be prefixes of each other
    (``sb-`` and ``sb-prod-``), or each would take the other's queues for its own.
    """
    return name.startswith(prefix) and _OWNED_TAIL.fullmatch(name[len(prefix) :]) is not None
