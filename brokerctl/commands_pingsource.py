"""``brokerctl pingsource create|list|describe|delete``: PingSources (docs/sources.md), with
``kn source ping``'s flags where they mean the same."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

from brokerctl import output
from brokerctl.client import BrokerClient, UsageError
from brokerctl.commands_common import command, connection_options, key_value, show

API = "/apis/sources.knative.dev/v1/namespaces"
BROKER_PREFIX = "broker:"


def add_pingsource_parser(sub: Any) -> None:
    conn = connection_options()
    ping = sub.add_parser("pingsource", help="manage ping sources (events on a cron schedule)")
    verbs = ping.add_subparsers(dest="verb", metavar="VERB", required=True)

    create = verbs.add_parser(
        "create",
        parents=[conn],
        help="create or replace a ping source",
        description="Sends an event of type dev.knative.sources.ping on the schedule, to a "
        "broker of the namespace (--sink broker:NAME) or a URL.",
    )
    create.add_argument("name")
    create.add_argument(
        "--schedule",
        default="* * * * *",
        help='5-field cron, e.g. "*/2 * * * *" (default: every minute)',
    )
    create.add_argument("--timezone", metavar="ZONE", help="IANA time zone, e.g. Europe/Paris")
    data = create.add_mutually_exclusive_group()
    data.add_argument("--data", help="the event's data")
    data.add_argument("--data-base64", metavar="BASE64", help="the event's data, base64")
    create.add_argument("--content-type", metavar="TYPE", help="the data's media type")
    create.add_argument(
        "--sink", required=True, metavar="broker:NAME|URL", help="where the events go"
    )
    create.add_argument(
        "--ce-override",
        type=key_value,
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="an extension attribute every event carries (repeatable)",
    )
    create.set_defaults(func=command(_create))

    ls = verbs.add_parser("list", parents=[conn], help="list ping sources")
    ls.set_defaults(func=command(_list))

    describe = verbs.add_parser("describe", parents=[conn], help="show a ping source")
    describe.add_argument("name")
    describe.set_defaults(func=command(_describe))

    delete = verbs.add_parser("delete", parents=[conn], help="delete a ping source")
    delete.add_argument("name")
    delete.set_defaults(func=command(_delete))


def _path(client: BrokerClient, *parts: str) -> str:
    tail = "/".join(quote(p, safe="") for p in ("pingsources", *parts))
    return f"{API}/{quote(client.target.namespace, safe='')}/{tail}"


def sink_of(text: str) -> dict[str, Any]:
    """``broker:NAME`` (kn's form) or an http(s) URL."""
    if text.startswith(BROKER_PREFIX):
        name = text[len(BROKER_PREFIX) :]
        if not name:
            raise UsageError("--sink broker:NAME needs the broker's name")
        return {"ref": {"apiVersion": "eventing.knative.dev/v1", "kind": "Broker", "name": name}}
    if text.startswith(("http://", "https://")):
        return {"uri": text}
    raise UsageError(f"--sink {text!r}: expected broker:NAME or an http(s) URL")


def pingsource_body(args: argparse.Namespace) -> dict[str, Any]:
    spec: dict[str, Any] = {"schedule": args.schedule, "sink": sink_of(args.sink)}
    for flag, key in (
        ("timezone", "timezone"),
        ("data", "data"),
        ("data_base64", "dataBase64"),
        ("content_type", "contentType"),
    ):
        if getattr(args, flag) is not None:
            spec[key] = getattr(args, flag)
    if args.ce_override:
        spec["ceOverrides"] = {"extensions": dict(args.ce_override)}
    return {
        "apiVersion": "sources.knative.dev/v1",
        "kind": "PingSource",
        "metadata": {"name": args.name},
        "spec": spec,
    }


def _create(args: argparse.Namespace, client: BrokerClient) -> None:
    doc = client.put(_path(client, args.name), pingsource_body(args))
    said = f"PingSource {args.name!r} saved in namespace {client.target.namespace!r}."
    show(args, doc, lambda: output.say(said))


def sink_text(doc: Mapping[str, Any]) -> str:
    """A source's sink as its create command takes it: ``broker:NAME`` or the uri."""
    sink = (doc.get("spec") or {}).get("sink") or {}
    ref = sink.get("ref")
    return f"{BROKER_PREFIX}{ref.get('name', '')}" if ref else str(sink.get("uri", ""))


def _list(args: argparse.Namespace, client: BrokerClient) -> None:
    doc = client.get(_path(client))
    rows = [
        (
            (p.get("metadata") or {}).get("name", ""),
            (p.get("spec") or {}).get("schedule", ""),
            sink_text(p),
            output.age((p.get("metadata") or {}).get("creationTimestamp")),
            output.ready(p),
            output.condition(p, "Ready").get("reason", ""),
        )
        for p in doc.get("items") or []
    ]
    empty = f"No ping sources found in namespace {client.target.namespace!r}."
    show(
        args,
        doc,
        lambda: output.table(("NAME", "SCHEDULE", "SINK", "AGE", "READY", "REASON"), rows, empty),
    )


def _describe(args: argparse.Namespace, client: BrokerClient) -> None:
    doc = client.get(_path(client, args.name))
    show(args, doc, lambda: _print_description(doc))


def _print_description(doc: Mapping[str, Any]) -> None:
    meta, spec = doc.get("metadata") or {}, doc.get("spec") or {}
    status = doc.get("status") or {}
    for label, value in (
        ("Name", meta.get("name")),
        ("Namespace", meta.get("namespace")),
        ("Age", output.age(meta.get("creationTimestamp"))),
        ("Schedule", spec.get("schedule")),
        ("Timezone", spec.get("timezone")),
        ("Content type", spec.get("contentType")),
        ("Data", spec.get("data")),
        ("Data (base64)", spec.get("dataBase64")),
        ("Sink", sink_text(doc)),
        ("Sink URI", status.get("sinkUri")),
    ):
        if value not in (None, ""):
            output.say(f"{label + ':':<15}{value}")
    for key, value in ((spec.get("ceOverrides") or {}).get("extensions") or {}).items():
        output.say(f"{'Extension:':<15}{key}={value}")
    output.conditions_table(doc)


def _delete(args: argparse.Namespace, client: BrokerClient) -> None:
    doc = client.delete(_path(client, args.name))
    said = f"PingSource {args.name!r} deleted in namespace {client.target.namespace!r}."
    show(args, doc, lambda: output.say(said))
