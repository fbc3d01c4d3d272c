"""Who sent an event (design.md §13.4, docs/security.md): the identities an EventPolicy's
``spec.from[].sub`` names. Every path into a broker says who it carries events for: an ingress
token, an IAM principal (its ARN, as AWS authenticated it), one of the namespace's sources, or a
trigger whose subscriber replied. ``None`` is an anonymous sender."""

from __future__ import annotations

TOKEN = "token"
SOURCE = "source"
TRIGGER = "trigger"

# Who may send to a guarded broker that no EventPolicy applies to (a stage's setting, Knative's
# authorization default mode): every identified sender, those of the broker's namespace, or none.
ALLOW_SAME_NAMESPACE = "allow-same-namespace"
ALLOW_ALL = "allow-all"
DENY_ALL = "deny-all"
MODES = (ALLOW_SAME_NAMESPACE, ALLOW_ALL, DENY_ALL)


def token(namespace: str, token_id: str) -> str:
    """A request that carried an ingress token of the broker (services/tokens.py)."""
    return f"{TOKEN}:{namespace}:{token_id}"


def source(namespace: str, kind: str, name: str) -> str:
    """Events a source of the namespace produced (``KafkaSource``, ``PingSource``,
    ``IntegrationSource``; ``kind`` as the resource's ``kind``)."""
    return f"{SOURCE}:{namespace}:{kind}:{name}"


def trigger(namespace: str, name: str) -> str:
    """A reply of the trigger's subscriber, ingested into the trigger's broker."""
    return f"{TRIGGER}:{namespace}:{name}"


def namespace_of(sender: str) -> str | None:
    """The namespace a sender belongs to; None for an IAM principal (an ARN belongs to an
    account, not to a namespace)."""
    prefix, sep, rest = sender.partition(":")
    if not sep or prefix not in (TOKEN, SOURCE, TRIGGER):
        return None
    namespace, sep, _ = rest.partition(":")
    return namespace if sep and namespace else None
