"""``brokerctl transform create|list|describe|delete``: EventTransforms (docs/transforms.md)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any
from urllib.parse import quote

from brokerctl import output
from brokerctl.client import BrokerClient, UsageError
from brokerctl.commands_common import command, connection_options, show

API = "/apis/eventing.knative.dev/v1alpha1/namespaces"
MAX_EXPRESSION_FILE_BYTES = 1024 * 1024  # the server refuses more than 16,384 characters anyway


def add_transform_parser(sub: Any) -> None:
    conn = connection_options()
    transform = sub.add_parser("transform", help="manage event transforms (JSONata)")
    verbs = transform.add_subparsers(dest="verb", metavar="VERB", required=True)

    create = verbs.add_parser(
        "create",
        parents=[conn],
        help="create or replace an event transform",
        description="A trigger created with --transform NAME delivers its events through it: "
        "to --sink when given, else the transformed event is the trigger's reply.",
    )
    create.add_argument("name")
    create.add_argument(
        "--expression",
        required=True,
        metavar="EXPR|@FILE",
        help="the JSONata expression, or @path to read it from a file",
    )
    create.add_argument("--sink", metavar="URI", help="where transformed events go")
    reply = create.add_mutually_exclusive_group()
    reply.add_argument(
        "--reply-expression",
        metavar="EXPR|@FILE",
        help="JSONata applied to the sink's reply event (needs --sink)",
    )
    reply.add_argument(
        "--discard-reply", action="store_true", help="drop the sink's reply (needs --sink)"
    )
    create.set_defaults(func=command(_create))

    ls = verbs.add_parser("list", parents=[conn], help="list event transforms")
    ls.set_defaults(func=command(_list))

    describe = verbs.add_parser("describe", parents=[conn], help="show a transform and its status")
    describe.add_argument("name")
    describe.set_defaults(func=command(_describe))

    delete = verbs.add_parser("delete", parents=[conn], help="delete an event transform")
    delete.add_argument("name")
    delete.set_defaults(func=command(_delete))


def path(client: BrokerClient, *parts: str) -> str:
    tail = "/".join(quote(p, safe="") for p in parts)
    return f"{API}/{quote(client.target.namespace, safe='')}/{tail}"


def read_expression(text: str) -> str:
    """``EXPR``, or the contents of ``@FILE``."""
    if not text.startswith("@"):
        return text
    file = Path(text[1:])
    try:
        if file.stat().st_size > MAX_EXPRESSION_FILE_BYTES:
            raise UsageError(f"{file} is larger than {MAX_EXPRESSION_FILE_BYTES} bytes")
        return file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"cannot read the expression from {file}: {exc}") from None


def transform_body(args: argparse.Namespace) -> dict[str, Any]:
    spec: dict[str, Any] = {"jsonata": {"expression": read_expression(args.expression)}}
    if args.sink:
        spec["sink"] = {"uri": args.sink}
    if args.reply_expression:
        spec["reply"] = {"jsonata": {"expression": read_expression(args.reply_expression)}}
    elif args.discard_reply:
        spec["reply"] = {"discard": True}
    return {
        "apiVersion": "eventing.knative.dev/v1alpha1",
        "kind": "EventTransform",
        "metadata": {"name": args.name},
        "spec": spec,
    }


def _create(args: argparse.Namespace, client: BrokerClient) -> None:
    doc = client.put(path(client, "eventtransforms", args.name), transform_body(args))
    ns = client.target.namespace
    said = f"EventTransform {args.name!r} saved in namespace {ns!r}."
    show(args, doc, lambda: output.say(said))


def _list(args: argparse.Namespace, client: BrokerClient) -> None:
    doc = client.get(path(client, "eventtransforms"))
    show(args, doc, lambda: output.transform_table(doc.get("items") or [], client.target.namespace))


def _describe(args: argparse.Namespace, client: BrokerClient) -> None:
    doc = client.get(path(client, "eventtransforms", args.name))
    show(args, doc, lambda: output.describe_transform(doc))


def _delete(args: argparse.Namespace, client: BrokerClient) -> None:
    doc = client.delete(path(client, "eventtransforms", args.name))
    ns = client.target.namespace
    said = f"EventTransform {args.name!r} deleted in namespace {ns!r}."
    show(args, doc, lambda: output.say(said))
