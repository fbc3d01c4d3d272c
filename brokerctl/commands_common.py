"""What every API command shares: connection options, ``key=value`` arguments, the client, error
reporting with exit codes (0 ok, 1 API error, 2 usage error), and waiting for Ready."""

from __future__ import annotations

import argparse
import functools
import time
from collections.abc import Callable, Mapping
from typing import Any

from brokerctl import output
from brokerctl.client import BrokerClient, CliError, resolve_target

Handler = Callable[[argparse.Namespace, BrokerClient], int | None]


def connection_options(top_level: bool = False) -> argparse.ArgumentParser:
    """``--url``, ``-n``, ``--sigv4``, ``-o``: accepted before the command and after it.

    On sub-commands the defaults are suppressed so a value given before the command is kept.
    """
    default: Any = None if top_level else argparse.SUPPRESS
    parser = argparse.ArgumentParser(add_help=False)
    group = parser.add_argument_group("connection")
    group.add_argument(
        "--url", default=default, help="API base URL (env BROKERCTL_URL; http://127.0.0.1:8080)"
    )
    group.add_argument(
        "-n", "--namespace", default=default, help="namespace (env BROKERCTL_NAMESPACE; default)"
    )
    group.add_argument(
        "--sigv4",
        action="store_true",
        default=False if top_level else argparse.SUPPRESS,
        help="sign requests with AWS SigV4 (automatic for *.execute-api.<region>.amazonaws.com)",
    )
    group.add_argument(
        "-o", "--output", choices=output.FORMATS, default=default, help="machine-readable output"
    )
    return parser


def key_value(text: str) -> tuple[str, str]:
    """An argparse type for ``key=value`` (the value may be empty, the key may not)."""
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected key=value, got {text!r}")
    return key, value


def command(handler: Handler) -> Callable[[argparse.Namespace], int]:
    """Runs ``handler(args, client)``; a ``CliError`` is printed on stderr and becomes the exit
    code, so every command reports problems the same way."""

    @functools.wraps(handler)
    def run(args: argparse.Namespace) -> int:
        client: BrokerClient | None = None
        try:
            target = resolve_target(
                getattr(args, "url", None),
                getattr(args, "namespace", None),
                getattr(args, "sigv4", False),
            )
            client = BrokerClient(target)
            return int(handler(args, client) or 0)
        except CliError as exc:
            output.error(str(exc))
            return exc.exit_code
        finally:
            if client is not None:
                client.close()

    return run


def wait_ready(
    fetch: Callable[[], Mapping[str, Any]],
    what: str,
    timeout: float,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    every: float = 0.25,
) -> Mapping[str, Any]:
    """Polls ``fetch`` until the resource reports ``Ready=True``. Not Ready by the deadline is an
    error naming the last reason and message (a False may still turn True: a trigger waits for
    its broker)."""
    deadline = clock() + timeout
    while True:
        doc = fetch()
        cond = output.condition(doc, "Ready")
        if cond.get("status") == "True":
            return doc
        if clock() >= deadline:
            reason = cond.get("reason") or cond.get("status") or "no Ready condition"
            raise CliError(
                f"{what} is not Ready after {timeout:g}s: {reason}: {cond.get('message', '')}"
            )
        sleep(every)


# ---- delivery options, shared by brokers (their triggers' default) and triggers -------------


def delivery_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("delivery")
    group.add_argument("--retry", type=non_negative_int, help="retries after the first attempt")
    group.add_argument("--backoff-policy", choices=("exponential", "linear"))
    group.add_argument("--backoff-delay", metavar="ISO8601", help="e.g. PT0.5S")
    group.add_argument("--timeout", metavar="ISO8601", help="per attempt, e.g. PT10S")
    group.add_argument("--retry-after-max", metavar="ISO8601", help="cap on honoured Retry-After")
    group.add_argument("--dead-letter-sink", metavar="URI", help="where exhausted events go")
    group.add_argument("--format", choices=("binary", "json"), help="delivery content mode")


_DELIVERY_FLAGS = {
    "retry": "retry",
    "backoff_policy": "backoffPolicy",
    "backoff_delay": "backoffDelay",
    "timeout": "timeout",
    "retry_after_max": "retryAfterMax",
    "format": "format",
}


def apply_delivery(args: argparse.Namespace, delivery: Mapping[str, Any] | None) -> dict[str, Any]:
    """``delivery`` with the fields given on the command line set; the rest kept as they were."""
    out = dict(delivery or {})
    for flag, key in _DELIVERY_FLAGS.items():
        value = getattr(args, flag, None)
        if value is not None:
            out[key] = value
    if getattr(args, "dead_letter_sink", None) is not None:
        out["deadLetterSink"] = {"uri": args.dead_letter_sink}
    return out


def non_negative_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {value}")
    return value


def wait_options(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument("--wait", action="store_true", help=f"wait until the {what} is Ready")
    parser.add_argument(
        "--wait-timeout", type=float, default=60.0, metavar="SECONDS", help="for --wait"
    )


def show(args: argparse.Namespace, doc: Any, human: Callable[[], None]) -> None:
    """``-o json|yaml`` prints the API's document; otherwise ``human()`` prints for people."""
    chosen = getattr(args, "output", None)
    if chosen:
        output.emit(doc, chosen)
    else:
        human()
