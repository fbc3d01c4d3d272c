"""``brokerctl trigger create|list|describe|update|delete|test``."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from brokerctl import output
from brokerctl.client import BrokerClient, UsageError
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
from chalicelib.core.resources import refs
from chalicelib.core.resources.broker import MAX_RATE_ANNOTATION
from chalicelib.core.resources.delivery_spec import CONNECTION_ANNOTATION as CONNECTION
from chalicelib.core.resources.delivery_spec import (
    DEAD_LETTER_CONNECTION_ANNOTATION as DEAD_LETTER_CONNECTION,
)
from chalicelib.core.resources.trigger import DELIVERY_ORDER_ANNOTATION


def filter_change(text: str) -> tuple[str, str | None]:
    """``key=value`` sets a filter attribute; ``key-`` removes it (as ``kn trigger update``)."""
    if "=" not in text and text.endswith("-") and len(text) > 1:
        return text[:-1], None
    return key_value(text)


def json_arg(text: str) -> Any:
    """An argparse type for JSON given inline or as ``@file``."""
    try:
        raw = Path(text[1:]).read_text() if text.startswith("@") else text
    except OSError as exc:
        raise argparse.ArgumentTypeError(f"cannot read {text[1:]!r}: {exc.strerror}") from None
    try:
        return json.loads(raw)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not JSON: {exc}") from None


def filter_options(parser: argparse.ArgumentParser) -> None:
    """One flag per ``spec.filters`` dialect; every flag adds one element (ANDed, in order)."""
    group = parser.add_argument_group("filters (spec.filters; every element must match)")
    for dialect in ("exact", "prefix", "suffix"):
        group.add_argument(
            f"--{dialect}",
            type=key_value,
            action="append",
            default=[],
            metavar="KEY=VALUE",
            help=f"{dialect} match on an attribute, repeatable (one {dialect} filter, AND)",
        )
    group.add_argument(
        "--cesql", action="append", default=[], metavar="EXPR", help="a CESQL expression"
    )
    group.add_argument(
        "--event-pattern",
        type=json_arg,
        action="append",
        default=[],
        metavar="JSON|@FILE",
        help="an EventBridge event pattern (attributes top level, JSON data under data)",
    )
    group.add_argument(
        "--filters",
        type=json_arg,
        metavar="JSON|@FILE",
        help="a JSON list of filter objects (any dialect: all, any, not ...), added first",
    )


def filters_from(args: argparse.Namespace) -> list[Any]:
    filters: list[Any] = []
    if args.filters is not None:
        if not isinstance(args.filters, list):
            raise UsageError("--filters takes a JSON list of filter objects")
        filters.extend(args.filters)
    for dialect in ("exact", "prefix", "suffix"):
        pairs = getattr(args, dialect)
        if pairs:
            filters.append({dialect: dict(pairs)})
    filters.extend({"cesql": expression} for expression in args.cesql)
    filters.extend({"eventPattern": pattern} for pattern in args.event_pattern)
    return filters


def add_trigger_parser(sub: Any) -> None:
    conn = connection_options()
    trigger = sub.add_parser("trigger", help="manage triggers")
    verbs = trigger.add_subparsers(dest="verb", metavar="VERB", required=True)

    create = verbs.add_parser("create", parents=[conn], help="create a trigger")
    create.add_argument("name")
    create.add_argument("--broker", default="default", help="broker name (default: default)")
    create.add_argument(
        "--filter",
        type=key_value,
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="exact match on a CloudEvent attribute, repeatable (AND); KEY= means present",
    )
    filter_options(create)
    subscriber = create.add_mutually_exclusive_group(required=True)
    subscriber.add_argument(
        "--sink", metavar="URI", help="subscriber URI or AWS target ARN (docs/targets.md)"
    )
    subscriber.add_argument(
        "--transform",
        metavar="NAME",
        help="deliver through this EventTransform (brokerctl transform; docs/transforms.md)",
    )
    subscriber.add_argument(
        "--integration-sink",
        metavar="NAME",
        help="deliver to this IntegrationSink (an AWS target or a log; docs/targets.md)",
    )
    create.add_argument(
        "--audience",
        metavar="AUD",
        help="each request to --sink carries a broker-signed token for this audience "
        "(Authorization: Bearer; docs/targets.md)",
    )
    create.add_argument(
        "--dead-letter-audience",
        metavar="AUD",
        help="the same for each request to --dead-letter-sink",
    )
    for flag, target in (
        ("--connection", "--sink"),
        ("--dead-letter-connection", "--dead-letter-sink"),
    ):
        create.add_argument(
            flag,
            metavar="NAME",
            help=f"requests to {target} authenticate with this Connection (brokerctl connection; "
            "docs/targets.md)",
        )
    create.add_argument(
        "--ordered",
        action="store_true",
        help="deliver in arrival order per partitionkey, one at a time (SQS FIFO queues; "
        "fixed for the trigger's life; docs/ordering.md)",
    )
    _max_rate_option(create)
    delivery_options(create)
    wait_options(create, "trigger")
    create.set_defaults(func=command(_create))

    ls = verbs.add_parser("list", parents=[conn], help="list triggers")
    ls.add_argument("--broker", help="only the triggers of this broker")
    ls.set_defaults(func=command(_list))

    describe = verbs.add_parser("describe", parents=[conn], help="show a trigger and its status")
    describe.add_argument("name")
    describe.set_defaults(func=command(_describe))

    update = verbs.add_parser(
        "update",
        parents=[conn],
        help="change a trigger's filter, sink or delivery",
        description="Fields not named keep their values. A trigger's delivery replaces its "
        "broker's as a whole (no per-field merge).",
    )
    update.add_argument("name")
    update.add_argument(
        "--filter",
        type=filter_change,
        action="append",
        default=[],
        metavar="KEY=VALUE|KEY-",
        help="set a filter attribute, or remove it with KEY-; repeatable",
    )
    update.add_argument(
        "--sink", metavar="URI", help="subscriber URI or AWS target ARN (docs/targets.md)"
    )
    _max_rate_option(update)
    delivery_options(update)
    wait_options(update, "trigger")
    update.set_defaults(func=command(_update))

    delete = verbs.add_parser("delete", parents=[conn], help="delete a trigger")
    delete.add_argument("name")
    delete.set_defaults(func=command(_delete))

    test = verbs.add_parser(
        "test",
        parents=[conn],
        help="does a filter pass an event, and why (creates nothing)",
        description="Give a trigger's NAME to test its stored filter, or filter flags. "
        "Exit code 0 either way; -o json prints {matched, reasons}.",
    )
    test.add_argument("name", nargs="?", help="a trigger whose filter to test")
    test.add_argument(
        "--event", type=json_arg, required=True, metavar="JSON|@FILE", help="a CloudEvent (JSON)"
    )
    test.add_argument(
        "--filter",
        type=key_value,
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="legacy filter.attributes exact match, repeatable",
    )
    filter_options(test)
    test.set_defaults(func=command(_test))


def _max_rate_option(parser: Any) -> None:
    parser.add_argument(
        "--max-rate",
        metavar="N",
        help="deliver at most N events per second to the subscriber, across all concurrent "
        "deliveries; more wait, none fail (annotation serverless-broker/max-rate, a decimal "
        "from 0.1 to 10000; docs/flow-control.md)",
    )


def _annotate_max_rate(metadata: dict[str, Any], args: argparse.Namespace) -> None:
    rate = getattr(args, "max_rate", None)
    if rate is not None:
        metadata["annotations"] = {**(metadata.get("annotations") or {}), MAX_RATE_ANNOTATION: rate}


def trigger_body(args: argparse.Namespace) -> dict[str, Any]:
    subscriber: dict[str, Any] = {"uri": args.sink}
    if getattr(args, "transform", None):
        subscriber = refs.ref_json(refs.TRANSFORM, args.transform)
    if getattr(args, "integration_sink", None):
        subscriber = refs.ref_json(refs.SINK, args.integration_sink)
    if getattr(args, "audience", None):
        if "ref" in subscriber:
            raise UsageError("--audience applies to --sink (a ref is not called over HTTP)")
        subscriber["audience"] = args.audience
    spec: dict[str, Any] = {"broker": args.broker, "subscriber": subscriber}
    filters = filters_from(args)
    if args.filter and filters:
        raise UsageError("--filter is ignored when spec.filters is set: use --exact instead")
    if args.filter:
        spec["filter"] = {"attributes": dict(args.filter)}
    if filters:
        spec["filters"] = filters
    delivery = apply_delivery(args, None)
    if getattr(args, "dead_letter_audience", None):
        if "deadLetterSink" not in delivery:
            raise UsageError("--dead-letter-audience applies to --dead-letter-sink")
        delivery["deadLetterSink"]["audience"] = args.dead_letter_audience
    if delivery:
        spec["delivery"] = delivery
    metadata: dict[str, Any] = {"name": args.name}
    if getattr(args, "ordered", False):
        metadata["annotations"] = {DELIVERY_ORDER_ANNOTATION: "ordered"}
    _annotate_max_rate(metadata, args)
    for key, name in (
        (CONNECTION, "connection"),
        (DEAD_LETTER_CONNECTION, "dead_letter_connection"),
    ):
        if getattr(args, name, None):
            metadata["annotations"] = {
                **(metadata.get("annotations") or {}),
                key: getattr(args, name),
            }
    return {
        "apiVersion": "eventing.knative.dev/v1",
        "kind": "Trigger",
        "metadata": metadata,
        "spec": spec,
    }


def updated_body(current: dict[str, Any], args: argparse.Namespace) -> dict[str, Any]:
    """The stored trigger with the command line's changes; server-owned fields left out."""
    spec = dict(current.get("spec") or {})
    if args.filter:
        attributes = dict((spec.get("filter") or {}).get("attributes") or {})
        for key, value in args.filter:
            if value is None:
                attributes.pop(key, None)
            else:
                attributes[key] = value
        spec["filter"] = {**(spec.get("filter") or {}), "attributes": attributes}
    if args.sink is not None:
        spec["subscriber"] = {"uri": args.sink}  # replaces a ref to a transform too
    delivery = apply_delivery(args, spec.get("delivery"))
    if delivery:
        spec["delivery"] = delivery
    meta = current.get("metadata") or {}
    metadata = {k: meta[k] for k in ("name", "labels", "annotations") if k in meta}
    _annotate_max_rate(metadata, args)
    body = {"apiVersion": current.get("apiVersion"), "kind": current.get("kind")}
    return {**body, "metadata": metadata, "spec": spec}


def _wait(args: argparse.Namespace, client: BrokerClient, doc: Any) -> Any:
    if not args.wait:
        return doc
    return wait_ready(
        lambda: client.get(client.path("triggers", args.name)),
        f"trigger {args.name!r}",
        args.wait_timeout,
    )


def _create(args: argparse.Namespace, client: BrokerClient) -> None:
    doc = _wait(args, client, client.post(client.path("triggers"), trigger_body(args)))
    ns = client.target.namespace
    show(args, doc, lambda: output.say(f"Trigger {args.name!r} created in namespace {ns!r}."))


def _list(args: argparse.Namespace, client: BrokerClient) -> None:
    doc = client.get(client.path("triggers"))
    if args.broker:
        items = [
            t for t in doc.get("items") or [] if (t.get("spec") or {}).get("broker") == args.broker
        ]
        doc = {**doc, "items": items}
    show(args, doc, lambda: output.trigger_table(doc.get("items") or [], client.target.namespace))


def _describe(args: argparse.Namespace, client: BrokerClient) -> None:
    doc = client.get(client.path("triggers", args.name))
    show(args, doc, lambda: output.describe_trigger(doc))


def _update(args: argparse.Namespace, client: BrokerClient) -> None:
    if not (args.filter or args.sink is not None or args.max_rate or apply_delivery(args, None)):
        raise UsageError(
            "nothing to update: give --filter, --sink, --max-rate or a delivery option"
        )
    body = updated_body(client.get(client.path("triggers", args.name)), args)
    doc = _wait(args, client, client.put(client.path("triggers", args.name), body))
    ns = client.target.namespace
    show(args, doc, lambda: output.say(f"Trigger {args.name!r} updated in namespace {ns!r}."))


def _delete(args: argparse.Namespace, client: BrokerClient) -> None:
    doc = client.delete(client.path("triggers", args.name))
    discarded = int(((doc or {}).get("details") or {}).get("deadLettersDiscarded") or 0)
    if discarded > 0:
        output.warn(
            f"{discarded} dead-lettered event(s) of trigger {args.name!r} were discarded "
            "with its dead-letter queue"
        )
    ns = client.target.namespace
    show(args, doc, lambda: output.say(f"Trigger {args.name!r} deleted in namespace {ns!r}."))


def filter_test_body(args: argparse.Namespace) -> dict[str, Any]:
    filters = filters_from(args)
    given = [bool(args.name), bool(args.filter), bool(filters)]
    if sum(given) != 1:
        raise UsageError("give exactly one of: a trigger NAME, --filter, or filter flags")
    body: dict[str, Any] = {"event": args.event}
    if args.name:
        body["trigger"] = args.name
    elif args.filter:
        body["filter"] = {"attributes": dict(args.filter)}
    else:
        body["filters"] = filters
    return body


def _test(args: argparse.Namespace, client: BrokerClient) -> None:
    # triggers-test, not triggers:test: the spelling a deployed API Gateway serves too.
    doc = client.post(client.path("triggers-test"), filter_test_body(args))

    def human() -> None:
        output.say("matched" if doc.get("matched") else "not matched")
        for reason in doc.get("reasons") or []:
            output.say(f"  {reason}")

    show(args, doc, human)
