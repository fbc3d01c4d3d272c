"""``brokerctl integrationsource create|list|describe|delete``: IntegrationSources
(docs/sources.md): a timer, or an SQS queue's messages, a bucket's object events or a DynamoDB
table's stream, as events to a broker of the namespace or a URL."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from typing import Any

from brokerctl.client import UsageError
from brokerctl.commands_common import connection_options
from brokerctl.source_commands import SourceCommands


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
    create.set_defaults(func=INTEGRATION_SOURCES.create)

    INTEGRATION_SOURCES.add_verbs(verbs, conn)


def _spec(args: argparse.Namespace) -> dict[str, Any]:
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
    return spec


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


def _fields(doc: Mapping[str, Any]) -> list[tuple[str, Any]]:
    timer = (doc.get("spec") or {}).get("timer") or {}
    return [
        ("Source", origin_text(doc)),
        ("Message", timer.get("message")),
        ("Content type", timer.get("contentType")),
    ]


def _event_types(doc: Mapping[str, Any]) -> list[str]:
    attributes = (doc.get("status") or {}).get("ceAttributes") or []
    return [f"{'Event type:':<15}{a.get('type', '')}" for a in attributes]


INTEGRATION_SOURCES = SourceCommands(
    kind="IntegrationSource",
    api_version="sources.knative.dev/v1alpha1",
    plural="integrationsources",
    words="integration sources",
    column="SOURCE",
    origin=origin_text,
    spec=_spec,
    fields=_fields,
    notes=_event_types,
)
