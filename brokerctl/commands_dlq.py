"""``brokerctl dlq list|redrive|purge TRIGGER``: the dead letters a trigger kept."""

from __future__ import annotations

import argparse
from typing import Any

from brokerctl import output
from brokerctl.client import BrokerClient
from brokerctl.commands_common import command, connection_options, show

MAX_LIST = 1000


def add_dlq_parser(sub: Any) -> None:
    conn = connection_options()
    dlq = sub.add_parser("dlq", help="inspect, redrive or purge a trigger's dead letters")
    verbs = dlq.add_subparsers(dest="verb", metavar="VERB", required=True)

    ls = verbs.add_parser("list", parents=[conn], help="show dead letters without consuming them")
    ls.add_argument("trigger")
    ls.add_argument("--limit", type=_limit, default=100, help=f"1..{MAX_LIST} (default 100)")
    ls.set_defaults(func=command(_list))

    redrive = verbs.add_parser("redrive", parents=[conn], help="move them back to the trigger")
    redrive.add_argument("trigger")
    redrive.set_defaults(func=command(_redrive))

    purge = verbs.add_parser("purge", parents=[conn], help="delete them")
    purge.add_argument("trigger")
    purge.set_defaults(func=command(_purge))


def _limit(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if not 1 <= value <= MAX_LIST:
        raise argparse.ArgumentTypeError(f"expected an integer in 1..{MAX_LIST}, got {text!r}")
    return value


def _path(client: BrokerClient, trigger: str, *rest: str) -> str:
    return client.path("triggers", trigger, "deadletters", *rest)


def _row(item: dict[str, Any]) -> tuple[Any, ...]:
    event = item.get("event") or {}
    if "unreadable" in item:
        return (item.get("messageId"), "", "", "", "", "", f"unreadable: {item['unreadable']}")
    return (
        item.get("messageId"),
        item.get("receiveCount"),
        event.get("id"),
        event.get("type"),
        event.get("source"),
        event.get("knativeerrorcode"),
        event.get("knativeerrordest"),
    )


def _list(args: argparse.Namespace, client: BrokerClient) -> None:
    doc = client.get(_path(client, args.trigger), params={"limit": args.limit})

    def human() -> None:
        items = doc.get("items") or []
        columns = ("MESSAGE", "RECEIVES", "ID", "TYPE", "SOURCE", "ERROR", "DESTINATION")
        output.table(columns, [_row(i) for i in items], empty="")
        output.say(f"{len(items)} shown, {doc.get('depth', '?')} in the dead-letter queue.")

    show(args, doc, human)


def _redrive(args: argparse.Namespace, client: BrokerClient) -> None:
    doc = client.post(_path(client, args.trigger, "redrive"))
    show(
        args,
        doc,
        lambda: output.say(
            f"Redrove {doc.get('redriven', 0)} event(s) to trigger {args.trigger!r}; "
            f"{doc.get('remaining', 0)} remain in its dead-letter queue."
        ),
    )


def _purge(args: argparse.Namespace, client: BrokerClient) -> None:
    doc = client.delete(_path(client, args.trigger))
    show(
        args,
        doc,
        lambda: output.say(
            f"Purged {doc.get('purged', 0)} event(s) from the dead-letter queue of trigger "
            f"{args.trigger!r}."
        ),
    )
