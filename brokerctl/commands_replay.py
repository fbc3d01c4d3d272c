"""``brokerctl replay create|list|describe|cancel`` (docs/replay.md)."""

from __future__ import annotations

import argparse
import json
import re
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from brokerctl import output
from brokerctl.client import BrokerClient, CliError, UsageError
from brokerctl.commands_common import command, connection_options, show

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_RFC3339_START = re.compile(r"^\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}")


def moment(text: str, now: datetime | None = None) -> str:
    """An argparse type: an RFC 3339 time, ``now``, or an age such as ``15m``/``2h``/``1d``
    (that long ago), as the RFC 3339 text sent to the API."""
    now = now or datetime.now(UTC)
    if text == "now":
        return now.isoformat(timespec="milliseconds").replace("+00:00", "Z")
    unit = _UNITS.get(text[-1:])
    if unit is not None and text[:-1].isdigit() and len(text) <= 8:
        ago = now - timedelta(seconds=int(text[:-1]) * unit)
        return ago.isoformat(timespec="milliseconds").replace("+00:00", "Z")
    if not _RFC3339_START.match(text) or len(text) > 64:
        raise argparse.ArgumentTypeError(
            f"expected an RFC 3339 time (2026-01-31T12:00:00Z), now, or an age (15m), got {text!r}"
        )
    return text


def add_replay_parser(sub: Any) -> None:
    conn = connection_options()
    replay = sub.add_parser("replay", help="replay archived events to a broker's triggers")
    verbs = replay.add_subparsers(dest="verb", metavar="VERB", required=True)

    create = verbs.add_parser(
        "create",
        parents=[conn],
        help="replay the events a broker accepted in a time range",
        description="Events accepted in [--from, --to) are read from the archive and sent to "
        "the chosen triggers' queues (not re-ingested), with the extension replayname.",
    )
    create.add_argument("name")
    create.add_argument("--broker", default="default", help="broker name (default: default)")
    create.add_argument(
        "--from",
        dest="start",
        type=moment,
        required=True,
        metavar="TIME",
        help="inclusive: RFC 3339 (2026-01-31T12:00:00Z), now, or an age (90s, 15m, 2h, 1d)",
    )
    create.add_argument(
        "--to",
        dest="end",
        type=moment,
        default="now",
        metavar="TIME",
        help="exclusive (default: now)",
    )
    create.add_argument(
        "--trigger",
        action="append",
        default=[],
        metavar="NAME",
        help="only this trigger, repeatable (default: every trigger whose filter matches)",
    )
    create.add_argument(
        "--filter",
        action="append",
        default=[],
        metavar="JSON",
        help='a filter in the trigger dialects, repeatable: \'{"prefix": {"type": "com."}}\'',
    )
    create.add_argument(
        "--packing",
        action="store_true",
        help="many events to an SQS message on standard queues (spec.packing: fewer calls)",
    )
    create.add_argument(
        "--wait", action="store_true", help="show progress until the replay has Succeeded"
    )
    create.add_argument(
        "--wait-timeout", type=float, default=600.0, metavar="SECONDS", help="for --wait"
    )
    create.set_defaults(func=command(_create))

    ls = verbs.add_parser("list", parents=[conn], help="list a broker's replays")
    ls.add_argument("--broker", default="default")
    ls.set_defaults(func=command(_list))

    describe = verbs.add_parser("describe", parents=[conn], help="show a replay and its progress")
    describe.add_argument("name")
    describe.add_argument("--broker", default="default")
    describe.set_defaults(func=command(_describe))

    cancel = verbs.add_parser(
        "cancel",
        parents=[conn],
        help="stop a replay (deletes it; its runner stops within one batch)",
    )
    cancel.add_argument("name")
    cancel.add_argument("--broker", default="default")
    cancel.set_defaults(func=command(_cancel))


def replay_body(args: argparse.Namespace) -> dict[str, Any]:
    spec: dict[str, Any] = {"from": args.start, "to": args.end}
    if args.trigger:
        spec["triggers"] = list(args.trigger)
    if args.filter:
        filters = []
        for text in args.filter:
            try:
                filters.append(json.loads(text))
            except ValueError:
                raise UsageError(f"--filter {text!r} is not JSON") from None
        spec["filters"] = filters
    if args.packing:
        spec["packing"] = True
    return {
        "apiVersion": "eventing.knative.dev/v1",
        "kind": "Replay",
        "metadata": {"name": args.name},
        "spec": spec,
    }


def _path(client: BrokerClient, broker: str, *name: str) -> str:
    return client.path("brokers", broker, "replays", *name)


def _create(args: argparse.Namespace, client: BrokerClient) -> None:
    path = _path(client, args.broker, args.name)
    doc = client.put(path, replay_body(args))
    if args.wait:
        doc = wait_succeeded(lambda: client.get(path), args.name, args.wait_timeout)
    ns = client.target.namespace
    show(
        args,
        doc,
        lambda: output.say(
            f"Replay {args.name!r} of broker {args.broker!r} "
            f"{'succeeded' if args.wait else 'created'} in namespace {ns!r}: "
            f"{_progress_text(doc)}."
        ),
    )


def _progress_text(doc: Mapping[str, Any]) -> str:
    progress = (doc.get("status") or {}).get("progress") or {}
    return (
        f"{progress.get('eventsRead', 0)} event(s) read, "
        f"{progress.get('eventsEnqueued', 0)} enqueued"
    )


def wait_succeeded(
    fetch: Callable[[], Mapping[str, Any]],
    name: str,
    timeout: float,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    every: float = 0.25,
) -> Mapping[str, Any]:
    """Polls until ``Succeeded`` is True, with a progress bar on stderr (rich) counting the
    events read and the last arrival time reached; False or the deadline is an error."""
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    deadline = clock() + timeout
    columns = (
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        TextColumn("{task.fields[read]} read, {task.fields[enqueued]} enqueued"),
        TextColumn("{task.fields[at]}"),
        TimeElapsedColumn(),
    )
    with Progress(*columns, console=output.stderr_console(), transient=True) as bar:
        task = bar.add_task(f"replay {name}", total=None, read=0, enqueued=0, at="")
        while True:
            doc = fetch()
            progress = (doc.get("status") or {}).get("progress") or {}
            spec = doc.get("spec") or {}
            done = _fraction(spec, progress.get("lastArrivalTime"))
            bar.update(
                task,
                total=None if done is None else 1000.0,
                completed=0.0 if done is None else 1000.0 * done,
                read=progress.get("eventsRead", 0),
                enqueued=progress.get("eventsEnqueued", 0),
                at=progress.get("lastArrivalTime", ""),
            )
            cond = output.condition(doc, "Succeeded")
            if cond.get("status") == "True":
                return doc
            if cond.get("status") == "False":
                raise CliError(
                    f"replay {name!r} failed: {cond.get('reason', '')}: {cond.get('message', '')}"
                )
            if clock() >= deadline:
                raise CliError(
                    f"replay {name!r} has not Succeeded after {timeout:g}s: "
                    f"{cond.get('reason') or 'no Succeeded condition'}: {cond.get('message', '')}"
                )
            sleep(every)


def _fraction(spec: Mapping[str, Any], reached: str | None) -> float | None:
    """How far through [from, to) the last replayed arrival time is (0..1), or None."""
    try:
        start, end = (_parse(spec["from"]), _parse(spec["to"]))
        at = _parse(reached) if reached else start
    except (KeyError, TypeError, ValueError):
        return None
    span = (end - start).total_seconds()
    if span <= 0:
        return None
    return max(0.0, min(1.0, (at - start).total_seconds() / span))


def _parse(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def _list(args: argparse.Namespace, client: BrokerClient) -> None:
    doc = client.get(_path(client, args.broker))
    show(args, doc, lambda: _table(doc.get("items") or [], args.broker))


def _table(items: list[Mapping[str, Any]], broker: str) -> None:
    rows = []
    for item in items:
        spec = item.get("spec") or {}
        progress = (item.get("status") or {}).get("progress") or {}
        succeeded = output.condition(item, "Succeeded")
        rows.append(
            (
                (item.get("metadata") or {}).get("name", ""),
                spec.get("from", ""),
                spec.get("to", ""),
                progress.get("eventsRead", 0),
                progress.get("eventsEnqueued", 0),
                succeeded.get("status", ""),
                succeeded.get("reason", ""),
            )
        )
    output.table(
        ("NAME", "FROM", "TO", "READ", "ENQUEUED", "SUCCEEDED", "REASON"),
        rows,
        empty=f"No replays found for broker {broker!r}.",
    )


def _describe(args: argparse.Namespace, client: BrokerClient) -> None:
    doc = client.get(_path(client, args.broker, args.name))
    show(args, doc, lambda: _describe_human(doc))


def _describe_human(doc: Mapping[str, Any]) -> None:
    meta = doc.get("metadata") or {}
    spec = doc.get("spec") or {}
    status = doc.get("status") or {}
    progress = status.get("progress") or {}
    output.say(f"Name:         {meta.get('name', '')}")
    output.say(f"Namespace:    {meta.get('namespace', '')}")
    output.say(f"Broker:       {meta.get('broker', '')}")
    output.say(f"From:         {spec.get('from', '')}")
    output.say(f"To:           {spec.get('to', '')}")
    if spec.get("triggers"):
        output.say(f"Triggers:     {', '.join(spec['triggers'])}")
    for element in spec.get("filters") or []:
        output.say(f"Filter:       {json.dumps(element, ensure_ascii=False)}")
    output.say(f"Packing:      {'yes' if spec.get('packing') else 'no (one event a message)'}")
    output.say(f"Read:         {progress.get('eventsRead', 0)}")
    output.say(f"Enqueued:     {progress.get('eventsEnqueued', 0)}")
    if progress.get("eventsMissing"):
        output.say(f"Missing:      {progress['eventsMissing']} (payload no longer stored)")
    if progress.get("lastArrivalTime"):
        output.say(f"Reached:      {progress['lastArrivalTime']}")
    output.conditions_table(doc)


def _cancel(args: argparse.Namespace, client: BrokerClient) -> None:
    doc = client.delete(_path(client, args.broker, args.name))
    ns = client.target.namespace
    show(args, doc, lambda: output.say(f"Replay {args.name!r} cancelled in namespace {ns!r}."))
