"""``brokerctl pingsource create|list|describe|delete``: PingSources (docs/sources.md), with
``kn source ping``'s flags where they mean the same."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from typing import Any

from brokerctl.commands_common import connection_options, key_value
from brokerctl.source_commands import SourceCommands


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
    create.set_defaults(func=PING_SOURCES.create)

    PING_SOURCES.add_verbs(verbs, conn)


def _spec(args: argparse.Namespace) -> dict[str, Any]:
    spec: dict[str, Any] = {"schedule": args.schedule}
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
    return spec


def _fields(doc: Mapping[str, Any]) -> list[tuple[str, Any]]:
    spec = doc.get("spec") or {}
    return [
        ("Schedule", spec.get("schedule")),
        ("Timezone", spec.get("timezone")),
        ("Content type", spec.get("contentType")),
        ("Data", spec.get("data")),
        ("Data (base64)", spec.get("dataBase64")),
    ]


def _extensions(doc: Mapping[str, Any]) -> list[str]:
    extensions = ((doc.get("spec") or {}).get("ceOverrides") or {}).get("extensions") or {}
    return [f"{'Extension:':<15}{key}={value}" for key, value in extensions.items()]


PING_SOURCES = SourceCommands(
    kind="PingSource",
    api_version="sources.knative.dev/v1",
    plural="pingsources",
    words="ping sources",
    column="SCHEDULE",
    origin=lambda doc: str((doc.get("spec") or {}).get("schedule", "")),
    spec=_spec,
    fields=_fields,
    notes=_extensions,
)
