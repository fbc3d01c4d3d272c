"""Argument parsing for brokerctl; each sub-command calls one function."""

from __future__ import annotations

import argparse
import os


def _dev(args: argparse.Namespace) -> int:
    from brokerctl.dev import DevOptions, run_dev

    return run_dev(
        DevOptions(
            host=args.host,
            port=args.port,
            aws_port=args.aws_port,
            reconcile_interval=args.reconcile_interval,
            cache_ttl=args.cache_ttl,
        )
    )


def _event_display(args: argparse.Namespace) -> int:
    from brokerctl.event_display import run_event_display

    return run_event_display(args.host, args.port)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="brokerctl", description=__doc__)
    sub = parser.add_subparsers(dest="command")

    dev = sub.add_parser("dev", help="run the broker in local mode (embedded AWS endpoint)")
    dev.add_argument("--host", default="127.0.0.1")
    dev.add_argument("--port", type=int, default=int(os.environ.get("BROKER_PORT", "8080")))
    dev.add_argument(
        "--aws-port", type=int, default=int(os.environ.get("BROKER_AWS_PORT", "4566"))
    )
    dev.add_argument("--reconcile-interval", type=float, default=30.0, help="seconds")
    dev.add_argument("--cache-ttl", type=float, default=None, help="ingress cache TTL, seconds")
    dev.set_defaults(func=_dev)

    display = sub.add_parser("event-display", help="a subscriber that prints the events it gets")
    display.add_argument("--host", default="127.0.0.1")
    display.add_argument("--port", type=int, default=8081)
    display.set_defaults(func=_event_display)
    return parser
