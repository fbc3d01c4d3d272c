"""``brokerctl registry list|show|export``: the xRegistry endpoint registry (design.md §9).

``list`` shows every endpoint (brokers, trigger subscribers, the control plane, user-defined
ones); ``show`` one endpoint with its messages (the event types seen); ``export`` writes the
whole registry (every endpoint and message inlined, and the model) to a file.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any
from urllib.parse import quote

from brokerctl import output
from brokerctl.client import BrokerClient
from brokerctl.commands_common import command, connection_options, show

REGISTRY = "/registry"


def add_registry_parser(sub: Any) -> None:
    conn = connection_options()
    registry = sub.add_parser(
        "registry", help="the xRegistry endpoint registry: brokers, triggers, event types"
    )
    verbs = registry.add_subparsers(dest="verb", metavar="VERB", required=True)

    ls = verbs.add_parser("list", parents=[conn], help="list the registry's endpoints")
    ls.set_defaults(func=command(_list))

    one = verbs.add_parser("show", parents=[conn], help="show an endpoint and its messages")
    one.add_argument("endpoint", help="endpoint id, e.g. _broker.default.orders")
    one.set_defaults(func=command(_show))

    export = verbs.add_parser(
        "export", parents=[conn], help="write the whole registry document to a file"
    )
    export.add_argument(
        "file", nargs="?", default="registry.json", help="output file (registry.json; - = stdout)"
    )
    export.set_defaults(func=command(_export))


def _list(args: argparse.Namespace, client: BrokerClient) -> None:
    doc = client.get(f"{REGISTRY}/endpoints")
    show(args, doc, lambda: endpoint_table(doc))


def _show(args: argparse.Namespace, client: BrokerClient) -> None:
    path = f"{REGISTRY}/endpoints/{quote(args.endpoint, safe='')}"
    doc = client.get(path, params={"inline": "messages"})
    show(args, doc, lambda: describe_endpoint(doc))


def _export(args: argparse.Namespace, client: BrokerClient) -> None:
    doc = client.get(REGISTRY, params={"inline": "*,model"})
    text = json.dumps(doc, indent=2, ensure_ascii=False) + "\n"
    if args.file == "-":
        output.emit(doc, "json")
        return
    Path(args.file).write_text(text, encoding="utf-8")
    endpoints = doc.get("endpoints") or {}
    messages = sum(len(e.get("messages") or {}) for e in endpoints.values())
    output.say(f"Wrote {len(endpoints)} endpoints and {messages} messages to {args.file}.")


def _address(endpoint: dict[str, Any]) -> str:
    addresses = (endpoint.get("protocoloptions") or {}).get("endpoints") or []
    first = addresses[0] if addresses and isinstance(addresses[0], dict) else {}
    value = first.get("uri") or first.get("bootstrap.servers") or ""
    return ",".join(value) if isinstance(value, list) else str(value)


def _usage(endpoint: dict[str, Any]) -> str:
    usage = endpoint.get("usage")
    return ",".join(usage) if isinstance(usage, list) else str(usage or "")


def endpoint_table(doc: dict[str, Any]) -> None:
    rows = [
        (
            eid,
            _usage(e),
            e.get("channel"),
            e.get("protocol"),
            _address(e),
            e.get("messagescount", 0),
            e.get("epoch"),
        )
        for eid, e in sorted(doc.items())
    ]
    output.table(
        ("ID", "USAGE", "CHANNEL", "PROTOCOL", "ADDRESS", "MESSAGES", "EPOCH"),
        rows,
        empty="No endpoints.",
    )


def describe_endpoint(doc: dict[str, Any]) -> None:
    for label, value in (
        ("Endpoint", doc.get("endpointid")),
        ("Name", doc.get("name")),
        ("Description", doc.get("description")),
        ("Usage", _usage(doc)),
        ("Channel", doc.get("channel")),
        ("Protocol", doc.get("protocol")),
        ("Address", _address(doc)),
        ("Envelope", doc.get("envelope")),
        ("Epoch", doc.get("epoch")),
        ("Created", doc.get("createdat")),
        ("Modified", doc.get("modifiedat")),
    ):
        if value not in (None, ""):
            output.say(f"{label + ':':<13}{value}")
    delivery = doc.get("delivery")
    if isinstance(delivery, dict) and delivery:
        output.say("Delivery:    " + ", ".join(f"{k}={v}" for k, v in delivery.items()))
    messages = doc.get("messages") or {}
    output.say("")
    rows = [
        (
            mid,
            _type(m),
            ", ".join(m.get("sources") or []),
            m.get("firstseen"),
            m.get("lastseen"),
            m.get("eventcount"),
        )
        for mid, m in sorted(messages.items())
    ]
    output.table(
        ("MESSAGE", "TYPE", "SOURCES", "FIRST SEEN", "LAST SEEN", "COUNT"),
        rows,
        empty="No messages (no event types seen yet).",
    )


def _type(message: dict[str, Any]) -> str:
    declared = ((message.get("envelopemetadata") or {}).get("type") or {}).get("value")
    return str(declared or message.get("name") or "")
