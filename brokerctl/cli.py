"""Argument parsing for brokerctl; each sub-command calls one function.

One ``add_*_parser(sub)`` per command group; ``build_parser()`` is the entry. API commands take
``--url``, ``-n/--namespace``, ``--sigv4`` and ``-o json|yaml`` before or after the command.
Exit codes: 0 ok, 1 API error (or broker unreachable), 2 usage error.
"""

from __future__ import annotations

import argparse
import os
from typing import Any

from brokerctl.commands_apply import add_manifest_parsers
from brokerctl.commands_broker import add_broker_parser
from brokerctl.commands_common import connection_options
from brokerctl.commands_connection import add_connection_parser
from brokerctl.commands_dlq import add_dlq_parser
from brokerctl.commands_integrationsource import add_integrationsource_parser
from brokerctl.commands_metrics import add_metrics_parser
from brokerctl.commands_pingsource import add_pingsource_parser
from brokerctl.commands_policy import add_policy_parser
from brokerctl.commands_replay import add_replay_parser
from brokerctl.commands_send import add_send_parser
from brokerctl.commands_transform import add_transform_parser
from brokerctl.commands_trigger import add_trigger_parser
from brokerctl.registry_cmd import add_registry_parser


def _dev(args: argparse.Namespace) -> int:
    from brokerctl.dev import DevOptions, run_dev

    return run_dev(
        DevOptions(
            host=args.host,
            port=args.port,
            aws_port=args.aws_port,
            reconcile_interval=args.reconcile_interval,
            cache_ttl=args.cache_ttl,
            kafka=args.kafka,
            kafka_port=args.kafka_port,
            kafka_bootstrap=args.kafka_bootstrap,
            endpoint=args.endpoint,
            functions=tuple(args.function),
        )
    )


def _event_display(args: argparse.Namespace) -> int:
    from brokerctl.event_display import run_event_display

    return run_event_display(args.host, args.port, quiet=args.quiet)


def _console(args: argparse.Namespace) -> int:
    import sys
    import threading

    from brokerctl.client import CliError, resolve_target
    from brokerctl.console.proxy import ConsoleProxy

    try:
        target = resolve_target(args.url, args.namespace, args.sigv4)
        proxy = ConsoleProxy(target, args.host, args.port).start()
    except (CliError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"console for {target.url}: {proxy.url}/ui (Ctrl-C stops)", flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        pass
    finally:
        proxy.stop()
    return 0


def add_console_parser(sub: Any) -> None:
    console = sub.add_parser(
        "console",
        parents=[connection_options()],
        help="serve the console for a deployed API, its calls signed (docs/console.md)",
    )
    console.add_argument("--host", default="127.0.0.1")
    console.add_argument("--port", type=int, default=8090)
    console.set_defaults(func=_console)


def add_dev_parser(sub: Any) -> None:
    dev = sub.add_parser("dev", help="run the broker in local mode (embedded AWS endpoint)")
    dev.add_argument("--host", default="127.0.0.1")
    dev.add_argument("--port", type=int, default=int(os.environ.get("BROKER_PORT", "8080")))
    dev.add_argument("--aws-port", type=int, default=int(os.environ.get("BROKER_AWS_PORT", "4566")))
    dev.add_argument(
        "--reconcile-interval",
        type=float,
        default=float(os.environ.get("BROKER_RECONCILE_SECONDS", "300")),
        help="seconds between reconciler runs (BROKER_RECONCILE_SECONDS; deployed: 5 minutes)",
    )
    dev.add_argument(
        "--endpoint",
        default=None,
        help="use this AWS endpoint instead of the embedded one: `localstack` (localstack-client: "
        "AWS_ENDPOINT_URL, else LOCALSTACK_HOST, default localhost:4566) or a URL",
    )
    dev.add_argument("--cache-ttl", type=float, default=None, help="ingress cache TTL, seconds")
    dev.add_argument(
        "--kafka",
        action="store_true",
        default=os.environ.get("BROKER_KAFKA", "").lower() in {"1", "true", "yes", "on"},
        help="also run a local Kafka (Tansu) and the Kafka event source emulation",
    )
    dev.add_argument(
        "--kafka-port", type=int, default=int(os.environ.get("BROKER_KAFKA_PORT", "9092"))
    )
    dev.add_argument(
        "--kafka-bootstrap",
        default=os.environ.get("BROKER_KAFKA_BOOTSTRAP") or None,
        help="with --kafka: use this running Kafka (host:port) instead of starting one",
    )
    dev.add_argument(
        "--function",
        action="append",
        default=[],
        metavar="NAME=module:handler",
        help="a local Python handler that answers for arn:aws:lambda:...:function:NAME "
        "(repeatable; docs/targets.md)",
    )
    dev.set_defaults(func=_dev)


def add_event_display_parser(sub: Any) -> None:
    display = sub.add_parser("event-display", help="a subscriber that prints the events it gets")
    display.add_argument("--host", default="127.0.0.1")
    display.add_argument("--port", type=int, default=8081)
    display.add_argument(
        "--quiet", action="store_true", help="print nothing per event (a load-test sink)"
    )
    display.set_defaults(func=_event_display)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="brokerctl",
        description="The command line for the Serverless Broker (in the spirit of kn).",
        epilog="Exit codes: 0 ok, 1 API error or broker unreachable, 2 usage error.",
        parents=[connection_options(top_level=True)],
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    add_broker_parser(sub)
    add_trigger_parser(sub)
    add_transform_parser(sub)
    add_pingsource_parser(sub)
    add_integrationsource_parser(sub)
    add_policy_parser(sub)
    add_connection_parser(sub)
    add_send_parser(sub)
    add_dlq_parser(sub)
    add_metrics_parser(sub)
    add_replay_parser(sub)
    add_registry_parser(sub)
    add_manifest_parsers(sub)
    add_dev_parser(sub)
    add_event_display_parser(sub)
    add_console_parser(sub)
    return parser
