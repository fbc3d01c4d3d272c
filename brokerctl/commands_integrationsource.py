"""``brokerctl integrationsource create|list|describe|delete``: IntegrationSources
(docs/sources.md): a timer, or an SQS queue's messages, a bucket's object events or a DynamoDB
table's stream, as events to a broker of the namespace or a URL."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

from brokerctl import output
from brokerctl.client import BrokerClient, UsageError
from brokerctl.commands_common import command, connection_options, show
from brokerctl.commands_pingsource import sink_of, sink_text

API = "/apis/sources.knative.dev/v1alpha1/namespaces"
KIND = "IntegrationSource"


def add_integrationsource_parser(sub: Any) -> None:
    conn = connection_options()
    source = sub.add_parser(
        "integrationsource", help="manage integration sources (a timer, SQS, S3, DynamoDB)"
    )
    verbs = source.add_subparsers(dest="verb", metavar="VERB", required=True)

    create = verbs.add_parser(
        "create",
        parents=[conn],
        help="create or replace an integration source",
        description="Exactly one of --timer-period, --sqs, --s3 and --ddb-table. Events go to "
        "a broker of the namespace (--sink broker:NAME) or a URL.",
    )
    create.add_argument("name")
    origin = create.add_mutually_exclusive_group(required=True)
    origin.add_argument(
        "--timer-period",
        type=int,
        metavar="MS",
        help="a timer: an event every MS milliseconds (a deployed stage: whole minutes)",
    )
    origin.add_argument("--sqs", metavar="QUEUE_ARN", help="an SQS queue's messages")
    origin.add_argument("--s3", metavar="BUCKET_ARN", help="a bucket's object-created events")
    origin.add_argument("--ddb-table", metavar="TABLE", help="a DynamoDB table's stream records")
    create.add_argument("--message", default="", help="the timer's event data")
    create.add_argument("--content-type", metavar="TYPE", help="the timer's data media type")
    create.add_argument("--region", help="the queue's, bucket's or table's region")
    create.add_argument(
        "--sink", required=True, metavar="broker:NAME|URL", help="where the events go"
    )
    create.set_defaults(func=command(_create))

    ls = verbs.add_parser("list", parents=[conn], help="list integration sources")
    ls.set_defaults(func=command(_list))

    describe = verbs.add_parser("describe", parents=[conn], help="show an integration source")
    describe.add_argument("name")
    describe.set_defaults(func=command(_describe))

    delete = verbs.add_parser("delete", parents=[conn], help="delete an integration source")
    delete.add_argument("name")
    delete.set_defaults(func=command(_delete))


def _path(client: BrokerClient, *parts: str) -> str:
    tail = "/".join(quote(p, safe="") for p in ("integrationsources", *parts))
    return f"{API}/{quote(client.target.namespace, safe='')}/{tail}"


def integrationsource_body(args: argparse.Namespace) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if args.timer_period is not None:
        if args.region is not None:
            raise UsageError("--region is for --sqs, --s3 and --ddb-table, not a timer")
        timer: dict[str, Any] = {"period": args.timer_period, "message": args.message}
        if args.content_type is not None:
            timer["contentType"] = args.content_type
        spec["timer"] = timer
    else:
        if args.content_type is not None or args.message:
            raise UsageError("--message and --content-type are for a timer (--timer-period)")
        key, field, value = (
            ("sqs", "arn", args.sqs)
            if args.sqs is not None
            else ("s3", "arn", args.s3)
            if args.s3 is not None
            else ("ddbStreams", "table", args.ddb_table)
        )
        aws: dict[str, Any] = {field: value}
        if args.region is not None:
            aws["region"] = args.region
        spec["aws"] = {key: aws}
    spec["sink"] = sink_of(args.sink)
    return {
        "apiVersion": "sources.knative.dev/v1alpha1",
        "kind": KIND,
        "metadata": {"name": args.name},
        "spec": spec,
    }


def origin_text(doc: Mapping[str, Any]) -> str:
    """What a source reads: ``timer 2000ms``, ``sqs <arn>``, ``s3 <arn>``, ``ddbStreams <t>``."""
    spec = doc.get("spec") or {}
    timer = spec.get("timer")
    if isinstance(timer, Mapping):
        return f"timer {timer.get('period', '')}ms"
    for key, value in (spec.get("aws") or {}).items():
        if isinstance(value, Mapping):
            return f"{key} {value.get('arn') or value.get('table') or ''}"
    return ""


def _create(args: argparse.Namespace, client: BrokerClient) -> None:
    doc = client.put(_path(client, args.name), integrationsource_body(args))
    said = f"{KIND} {args.name!r} saved in namespace {client.target.namespace!r}."
    show(args, doc, lambda: output.say(said))


def _list(args: argparse.Namespace, client: BrokerClient) -> None:
    doc = client.get(_path(client))
    rows = [
        (
            (s.get("metadata") or {}).get("name", ""),
            origin_text(s),
            sink_text(s),
            output.age((s.get("metadata") or {}).get("creationTimestamp")),
            output.ready(s),
            output.condition(s, "Ready").get("reason", ""),
        )
        for s in doc.get("items") or []
    ]
    empty = f"No integration sources found in namespace {client.target.namespace!r}."
    show(
        args,
        doc,
        lambda: output.table(("NAME", "SOURCE", "SINK", "AGE", "READY", "REASON"), rows, empty),
    )


def _describe(args: argparse.Namespace, client: BrokerClient) -> None:
    doc = client.get(_path(client, args.name))
    show(args, doc, lambda: _print_description(doc))


def _print_description(doc: Mapping[str, Any]) -> None:
    meta, spec = doc.get("metadata") or {}, doc.get("spec") or {}
    status = doc.get("status") or {}
    timer = spec.get("timer") or {}
    for label, value in (
        ("Name", meta.get("name")),
        ("Namespace", meta.get("namespace")),
        ("Age", output.age(meta.get("creationTimestamp"))),
        ("Source", origin_text(doc)),
        ("Message", timer.get("message")),
        ("Content type", timer.get("contentType")),
        ("Sink", sink_text(doc)),
        ("Sink URI", status.get("sinkUri")),
    ):
        if value not in (None, ""):
            output.say(f"{label + ':':<15}{value}")
    for attributes in status.get("ceAttributes") or []:
        output.say(f"{'Event type:':<15}{attributes.get('type', '')}")
    output.conditions_table(doc)


def _delete(args: argparse.Namespace, client: BrokerClient) -> None:
    doc = client.delete(_path(client, args.name))
    said = f"{KIND} {args.name!r} deleted in namespace {client.target.namespace!r}."
    show(args, doc, lambda: output.say(said))
