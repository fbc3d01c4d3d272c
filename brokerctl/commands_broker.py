"""``brokerctl broker create|list|describe|delete`` and ``broker token create|list|revoke``."""

from __future__ import annotations

import argparse
from typing import Any

from brokerctl import output
from brokerctl.client import BrokerClient
from brokerctl.commands_common import (
    apply_delivery,
    command,
    connection_options,
    delivery_options,
    key_value,
    show,
    wait_options,
    wait_ready,
)

ANNOTATION = "serverless-broker/"


def add_broker_parser(sub: Any) -> None:
    conn = connection_options()
    broker = sub.add_parser("broker", help="manage brokers")
    verbs = broker.add_subparsers(dest="verb", metavar="VERB", required=True)

    create = verbs.add_parser("create", parents=[conn], help="create a broker")
    create.add_argument("name")
    create.add_argument(
        "--annotation", type=key_value, action="append", default=[], metavar="KEY=VALUE"
    )
    create.add_argument("--ingress-auth", choices=("none", "token"), help="ingress authentication")
    create.add_argument("--max-event-bytes", type=int, metavar="N", help="largest event accepted")
    create.add_argument(
        "--legacy-spec-versions", action="store_true", help="accept CloudEvents 0.1 and 0.2"
    )
    create.add_argument("--class", dest="broker_class", help="broker class annotation")
    create.add_argument(
        "--dedup-window",
        metavar="DURATION",
        help="drop repeats of (source, id) within this ISO-8601 duration, e.g. PT5M",
    )
    delivery_options(create)
    wait_options(create, "broker")
    create.set_defaults(func=command(_create))

    ls = verbs.add_parser("list", parents=[conn], help="list brokers")
    ls.set_defaults(func=command(_list))

    describe = verbs.add_parser("describe", parents=[conn], help="show a broker and its status")
    describe.add_argument("name")
    describe.set_defaults(func=command(_describe))

    delete = verbs.add_parser("delete", parents=[conn], help="delete a broker")
    delete.add_argument("name")
    delete.set_defaults(func=command(_delete))

    _add_token_parser(verbs, conn)


def _add_token_parser(verbs: Any, conn: argparse.ArgumentParser) -> None:
    token = verbs.add_parser("token", help="ingress bearer tokens of a broker")
    ops = token.add_subparsers(dest="token_verb", metavar="VERB", required=True)
    create = ops.add_parser("create", parents=[conn], help="create a token (shown only once)")
    create.add_argument("broker")
    create.set_defaults(func=command(_token_create))
    ls = ops.add_parser("list", parents=[conn], help="list a broker's tokens (ids only)")
    ls.add_argument("broker")
    ls.set_defaults(func=command(_token_list))
    revoke = ops.add_parser("revoke", parents=[conn], help="revoke a token")
    revoke.add_argument("broker")
    revoke.add_argument("id")
    revoke.set_defaults(func=command(_token_revoke))


def broker_body(args: argparse.Namespace) -> dict[str, Any]:
    annotations = dict(args.annotation)
    if args.ingress_auth:
        annotations[ANNOTATION + "ingress-auth"] = args.ingress_auth
    if args.max_event_bytes is not None:
        annotations[ANNOTATION + "max-event-bytes"] = str(args.max_event_bytes)
    if args.legacy_spec_versions:
        annotations[ANNOTATION + "legacy-spec-versions"] = "true"
    if args.broker_class:
        annotations["eventing.knative.dev/broker.class"] = args.broker_class
    if args.dedup_window:
        annotations[ANNOTATION + "dedup-window"] = args.dedup_window
    metadata: dict[str, Any] = {"name": args.name}
    if annotations:
        metadata["annotations"] = annotations
    body: dict[str, Any] = {
        "apiVersion": "eventing.knative.dev/v1",
        "kind": "Broker",
        "metadata": metadata,
    }
    delivery = apply_delivery(args, None)
    if delivery:
        body["spec"] = {"delivery": delivery}
    return body


def _create(args: argparse.Namespace, client: BrokerClient) -> None:
    doc = client.post(client.path("brokers"), broker_body(args))
    if args.wait:
        doc = wait_ready(
            lambda: client.get(client.path("brokers", args.name)),
            f"broker {args.name!r}",
            args.wait_timeout,
        )

    def human() -> None:
        output.say(f"Broker {args.name!r} created in namespace {client.target.namespace!r}.")
        url = ((doc.get("status") or {}).get("address") or {}).get("url")
        if url:
            output.say(f"Ingress: {url}")

    show(args, doc, human)


def _list(args: argparse.Namespace, client: BrokerClient) -> None:
    doc = client.get(client.path("brokers"))
    show(args, doc, lambda: output.broker_table(doc.get("items") or [], client.target.namespace))


def _describe(args: argparse.Namespace, client: BrokerClient) -> None:
    doc = client.get(client.path("brokers", args.name))
    show(args, doc, lambda: output.describe_broker(doc))


def _delete(args: argparse.Namespace, client: BrokerClient) -> None:
    doc = client.delete(client.path("brokers", args.name))

    def human() -> None:
        output.say(f"Broker {args.name!r} deleted in namespace {client.target.namespace!r}.")
        left = ((doc or {}).get("details") or {}).get("triggersLeftNotReady") or []
        if left:
            output.warn(f"its triggers stay and are now not Ready: {', '.join(left)}")

    show(args, doc, human)


def _token_create(args: argparse.Namespace, client: BrokerClient) -> None:
    doc = client.post(client.path("brokers", args.broker, "tokens"))

    def human() -> None:
        # The token alone on stdout, so TOKEN=$(brokerctl broker token create b) works.
        output.say(doc["token"])
        output.warn(
            f"token {doc.get('id')} of broker {args.broker!r} is shown only once: store it now "
            "(send it as 'Authorization: Bearer <token>', or with brokerctl send --token); "
            f"EventPolicies name its sender {doc.get('identity')}"
        )

    show(args, doc, human)


def _token_list(args: argparse.Namespace, client: BrokerClient) -> None:
    doc = client.get(client.path("brokers", args.broker, "tokens"))
    rows = [(t.get("id"), output.age(t.get("createdAt"))) for t in doc.get("items") or []]
    show(
        args,
        doc,
        lambda: output.table(("ID", "AGE"), rows, empty=f"Broker {args.broker!r} has no tokens."),
    )


def _token_revoke(args: argparse.Namespace, client: BrokerClient) -> None:
    doc = client.delete(client.path("brokers", args.broker, "tokens", args.id))
    show(args, doc, lambda: output.say(f"Token {args.id} of broker {args.broker!r} revoked."))
