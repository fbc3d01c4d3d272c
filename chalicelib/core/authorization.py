"""Whether a broker admits events from a sender (docs/security.md; Knative's ``verifyAuthZ``):
pure, over the policies that apply to the broker, compiled once per policy generation.

- Policies apply: the sender must be admitted by one of them (``sub`` equal to its identity, or
  a prefix of it before a trailing ``*``; case-insensitive, as Knative's ``EqualFold``), and every
  event must pass the ``filters`` of one policy that admits the sender. Policies add up: any one
  admitting is enough. An anonymous sender is admitted by none.
- No policy applies: the stage's default mode decides. ``allow-all`` admits every identified
  sender, ``allow-same-namespace`` (the default) those of the broker's namespace (tokens,
  sources and triggers are; an IAM principal is not), ``deny-all`` none.

The caller decides when to ask: a broker without ``ingress-auth`` and without policies accepts
anonymous events as before, and nobody asks (services/ingress.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from chalicelib.core import senders
from chalicelib.core.cloudevents.event import CloudEvent
from chalicelib.core.errors import ForbiddenError
from chalicelib.core.filtering.filters import Filter, build_filter
from chalicelib.core.resources.event_policy import EventPolicy
from chalicelib.core.senders import ALLOW_ALL, ALLOW_SAME_NAMESPACE, DENY_ALL

# The decisions, as the 403 answer's ``decision`` names them (never a policy's contents).
OPEN = "open"  # nobody asks: no policy applies and the broker has no ingress-auth
ADMITTED = "admitted"
NOT_ADMITTED = "sender-not-admitted"
FILTERED = "event-not-admitted"
ANONYMOUS = "anonymous-sender"
DEFAULT_DENY_ALL = "default-deny-all"
DEFAULT_OTHER_NAMESPACE = "default-allow-same-namespace"


@dataclass(frozen=True, slots=True)
class Rule:
    """One applying policy, compiled: the senders it admits and the filter their events pass."""

    policy: str
    exact: frozenset[str]  # lower-case identities
    prefixes: tuple[str, ...]  # lower-case, the trailing '*' removed
    filter: Filter | None  # None: every event

    def admits(self, sender: str) -> bool:
        folded = sender.lower()
        return folded in self.exact or any(folded.startswith(p) for p in self.prefixes)

    def passes(self, event: CloudEvent) -> bool:
        return self.filter is None or self.filter.matches(event)


def compile_rule(policy: EventPolicy) -> Rule:
    identities = [i.lower() for i in policy.identities()]
    return Rule(
        policy=policy.name,
        exact=frozenset(i for i in identities if not i.endswith("*")),
        prefixes=tuple(i[:-1] for i in identities if i.endswith("*")),
        filter=build_filter(None, policy.filters) if policy.filters else None,
    )


def guarded(rules: Sequence[Rule], ingress_auth: str) -> bool:
    """Whether a broker decides who sends at all: once a policy applies to it, or when it
    authenticates its senders (``ingress-auth: token``). Otherwise it accepts anonymous events,
    as it did before policies existed, whatever the default mode."""
    return bool(rules) or ingress_auth == "token"


@dataclass(frozen=True, slots=True)
class Decision:
    allowed: bool
    decision: str  # one of the decisions above, or the default mode's
    detail: str  # for the sender: what was decided, naming no policy's contents
    policy: str | None = None  # the policy that admitted the (first) event

    def error(self) -> ForbiddenError:
        return ForbiddenError(self.detail, self.decision)


def decide(
    rules: Sequence[Rule],
    mode: str,
    namespace: str,
    broker: str,
    sender: str | None,
    events: Sequence[CloudEvent],
) -> Decision:
    """The decision for every event of one request: admitted only if each one is (a batch is
    all or nothing, refused by the first event refused)."""
    scope = f'broker "{namespace}/{broker}"'
    if sender is None:
        return Decision(
            False,
            ANONYMOUS,
            f"{scope} admits only identified senders (an ingress token of the broker, or an IAM "
            "principal through an IAM-authenticated URL); this request carried neither",
        )
    if not rules:
        return _default(mode, namespace, scope, sender)
    admitting = [r for r in rules if r.admits(sender)]
    if not admitting:
        return Decision(
            False, NOT_ADMITTED, f"sender {sender} is not admitted by the policies of {scope}"
        )
    first: str | None = None
    for i, event in enumerate(events):
        passed = next((r for r in admitting if r.passes(event)), None)
        if passed is None:
            where = f"event [{i}]" if len(events) > 1 else "the event"
            return Decision(
                False,
                FILTERED,
                f"{where} (type {event.type}) is not one sender {sender} may post to {scope}; "
                "nothing of the request was accepted",
            )
        first = first or passed.policy
    return Decision(True, ADMITTED, f"admitted by policy {first}", first)


def _default(mode: str, namespace: str, scope: str, sender: str) -> Decision:
    if mode == ALLOW_ALL:
        return Decision(True, ALLOW_ALL, f"no policy applies to {scope}; the default admits all")
    if mode == DENY_ALL:
        return Decision(
            False,
            DEFAULT_DENY_ALL,
            f"no policy applies to {scope}, and the default mode (deny-all) admits no sender",
        )
    if senders.namespace_of(sender) == namespace:
        return Decision(
            True,
            ALLOW_SAME_NAMESPACE,
            f"no policy applies to {scope}; the default admits senders of its namespace",
        )
    return Decision(
        False,
        DEFAULT_OTHER_NAMESPACE,
        f"no policy applies to {scope}, and the default mode (allow-same-namespace) admits only "
        f"senders of namespace {namespace}; sender {sender} is not one",
    )
