"""``brokerctl policy create|list|describe|delete|test``: EventPolicies, who may send what to
which brokers (docs/security.md)."""

from __future__ import annotations

import argparse
from typing import Any
from urllib.parse import quote

from brokerctl import output
from brokerctl.client import BrokerClient, UsageError
from brokerctl.commands_common import command, connection_options, key_value, show
from brokerctl.commands_trigger import filter_options, filters_from, json_arg
from chalicelib.core.resources.event_policy import API_VERSION, BROKER_API_VERSION, SENDER_KINDS

API = "/apis/eventing.knative.dev/v1alpha1/namespaces"
GROUPS = {"sources.knative.dev": "v1", "eventing.knative.dev": "v1"}


def add_policy_parser(sub: Any) -> None:
    conn = connection_options()
    policy = sub.add_parser("policy", help="manage event policies (who may send what)")
    verbs = policy.add_subparsers(dest="verb", metavar="VERB", required=True)

    create = verbs.add_parser(
        "create",
        parents=[conn],
        help="create or replace an event policy",
        description="Once a policy applies to a broker, only the senders some policy admits "
        "may post to it, and only the events that pass that policy's filters. Without --to "
        "and --selector the policy applies to every broker of the namespace.",
    )
    create.add_argument("name")
    create.add_argument(
        "--to", action="append", default=[], metavar="BROKER", help="a broker, repeatable"
    )
    create.add_argument(
        "--selector",
        type=key_value,
        action="append",
        default=[],
        metavar="LABEL=VALUE",
        help="the brokers with these labels (one selector, AND), repeatable",
    )
    create.add_argument(
        "--from",
        dest="subs",
        action="append",
        default=[],
        metavar="IDENTITY",
        help="a sender: token:NS:ID, an IAM ARN, source:NS:KIND:NAME, trigger:NS:NAME; a "
        "trailing * matches any suffix; repeatable",
    )
    create.add_argument(
        "--from-ref",
        action="append",
        default=[],
        metavar="KIND/NAME",
        help=f"a sender by reference ({', '.join(SENDER_KINDS)}), repeatable",
    )
    filter_options(create)
    create.set_defaults(func=command(_create))

    ls = verbs.add_parser("list", parents=[conn], help="list event policies")
    ls.set_defaults(func=command(_list))

    describe = verbs.add_parser("describe", parents=[conn], help="show a policy and its status")
    describe.add_argument("name")
    describe.set_defaults(func=command(_describe))

    delete = verbs.add_parser("delete", parents=[conn], help="delete an event policy")
    delete.add_argument("name")
    delete.set_defaults(func=command(_delete))

    test = verbs.add_parser(
        "test",
        parents=[conn],
        help="would a broker admit this event from this sender (sends nothing)",
        description="Exit code 0 either way; -o json prints {allowed, policy, decision, "
        "reason, policies}.",
    )
    test.add_argument("--broker", default="default", help="broker name (default: default)")
    test.add_argument(
        "--identity", metavar="IDENTITY", help="the sender (omitted: an anonymous sender)"
    )
    test.add_argument(
        "--event", type=json_arg, required=True, metavar="JSON|@FILE", help="a CloudEvent (JSON)"
    )
    test.set_defaults(func=command(_test))


def path(client: BrokerClient, *parts: str) -> str:
    tail = "/".join(quote(p, safe="") for p in parts)
    return f"{API}/{quote(client.target.namespace, safe='')}/{tail}"


def sender_ref(text: str) -> dict[str, str]:
    kind, sep, name = text.partition("/")
    group = SENDER_KINDS.get(kind)
    if not sep or not name or group is None:
        raise UsageError(f"--from-ref takes KIND/NAME with KIND one of {', '.join(SENDER_KINDS)}")
    return {"apiVersion": f"{group}/{GROUPS[group]}", "kind": kind, "name": name}


def policy_body(args: argparse.Namespace) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    to: list[dict[str, Any]] = [
        {"ref": {"apiVersion": BROKER_API_VERSION, "kind": "Broker", "name": name}}
        for name in args.to
    ]
    if args.selector:
        to.append({"selector": {"matchLabels": dict(args.selector)}})
    if to:
        spec["to"] = to
    senders = [{"sub": sub} for sub in args.subs]
    senders += [{"ref": sender_ref(ref)} for ref in args.from_ref]
    if senders:
        spec["from"] = senders
    filters = filters_from(args)
    if filters:
        spec["filters"] = filters
    return {
        "apiVersion": API_VERSION,
        "kind": "EventPolicy",
        "metadata": {"name": args.name},
        "spec": spec,
    }


def _create(args: argparse.Namespace, client: BrokerClient) -> None:
    doc = client.put(path(client, "eventpolicies", args.name), policy_body(args))
    said = f"EventPolicy {args.name!r} saved in namespace {client.target.namespace!r}."
    show(args, doc, lambda: output.say(said))


def _targets(doc: dict[str, Any]) -> str:
    parts = []
    for to in (doc.get("spec") or {}).get("to") or []:
        if "ref" in to:
            parts.append(str(to["ref"].get("name")))
        else:
            labels = (to.get("selector") or {}).get("matchLabels") or {}
            more = " ..." if (to.get("selector") or {}).get("matchExpressions") else ""
            parts.append("{" + ",".join(f"{k}={v}" for k, v in labels.items()) + more + "}")
    return ", ".join(parts) or "(every broker)"


def _list(args: argparse.Namespace, client: BrokerClient) -> None:
    doc = client.get(path(client, "eventpolicies"))

    def human() -> None:
        rows = [
            (
                (p.get("metadata") or {}).get("name", ""),
                _targets(p),
                len((p.get("status") or {}).get("from") or []),
                len((p.get("spec") or {}).get("filters") or []),
                output.age((p.get("metadata") or {}).get("creationTimestamp")),
                output.ready(p),
            )
            for p in doc.get("items") or []
        ]
        empty = f"No event policies found in namespace {client.target.namespace!r}."
        output.table(("NAME", "TO", "SENDERS", "FILTERS", "AGE", "READY"), rows, empty=empty)

    show(args, doc, human)


def _describe(args: argparse.Namespace, client: BrokerClient) -> None:
    doc = client.get(path(client, "eventpolicies", args.name))

    def human() -> None:
        meta = doc.get("metadata") or {}
        output.say(f"Name:         {meta.get('name')}")
        output.say(f"Namespace:    {meta.get('namespace')}")
        output.say(f"To:           {_targets(doc)}")
        output.say("From:")
        for identity in (doc.get("status") or {}).get("from") or ["(nobody)"]:
            output.say(f"  {identity}")
        filters = (doc.get("spec") or {}).get("filters") or []
        if filters:
            output.say("Filters (every one must pass):")
            for element in filters:
                output.say(f"  {element}")
        output.conditions_table(doc)

    show(args, doc, human)


def _delete(args: argparse.Namespace, client: BrokerClient) -> None:
    doc = client.delete(path(client, "eventpolicies", args.name))
    said = f"EventPolicy {args.name!r} deleted in namespace {client.target.namespace!r}."
    show(args, doc, lambda: output.say(said))


def _test(args: argparse.Namespace, client: BrokerClient) -> None:
    body = {"broker": args.broker, "identity": args.identity, "event": args.event}
    doc = client.post(path(client, "eventpolicies-test"), body)

    def human() -> None:
        verdict = "allowed" if doc.get("allowed") else "refused"
        by = f" by policy {doc['policy']}" if doc.get("policy") else ""
        output.say(f"{verdict}{by} ({doc.get('decision')})")
        output.say(f"  {doc.get('reason')}")

    show(args, doc, human)
