"""What brokerctl prints: tables and descriptions for people, ``-o json|yaml`` for scripts.

Human output goes through rich (no colour when stdout is not a terminal); machine output is the
API's JSON unchanged, so scripts see exactly what the API said.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

FORMATS = ("json", "yaml")


def _console(stderr: bool = False) -> Any:
    from rich.console import Console

    stream = sys.stderr if stderr else sys.stdout
    # Not a terminal (a pipe, a test): wide enough that rows are never folded.
    width = None if stream.isatty() else 240
    return Console(file=stream, width=width, highlight=False, soft_wrap=False)


def stderr_console() -> Any:
    """For progress bars: stdout stays the command's output."""
    return _console(stderr=True)


def emit(doc: Any, fmt: str) -> None:
    """The document as JSON or YAML on stdout."""
    if fmt == "yaml":
        import yaml

        sys.stdout.write(yaml.safe_dump(doc, sort_keys=False, allow_unicode=True))
    else:
        sys.stdout.write(json.dumps(doc, indent=2, ensure_ascii=False) + "\n")
    sys.stdout.flush()


def say(text: str) -> None:
    print(text, flush=True)


def warn(text: str) -> None:
    print(f"Warning: {text}", file=sys.stderr, flush=True)


def error(text: str) -> None:
    print(f"Error: {text}", file=sys.stderr, flush=True)


def table(columns: Sequence[str], rows: Iterable[Sequence[Any]], empty: str = "") -> None:
    from rich import box
    from rich.table import Table

    rows = list(rows)
    if not rows and empty:
        say(empty)
        return
    t = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, header_style="bold")
    for column in columns:
        t.add_column(column, overflow="fold")
    for row in rows:
        t.add_row(*("" if v is None else str(v) for v in row))
    _console().print(t)


# ---- resources ---------------------------------------------------------------------------------


def conditions(doc: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    status = doc.get("status") or {}
    return [c for c in status.get("conditions") or [] if isinstance(c, Mapping)]


def condition(doc: Mapping[str, Any], kind: str) -> Mapping[str, Any]:
    return next((c for c in conditions(doc) if c.get("type") == kind), {})


def ready(doc: Mapping[str, Any]) -> str:
    return str(condition(doc, "Ready").get("status", "Unknown"))


def age(timestamp: str | None, now: datetime | None = None) -> str:
    """``kubectl``-style age: 42s, 5m, 3h, 2d."""
    if not timestamp:
        return ""
    try:
        then = datetime.fromisoformat(timestamp.replace("Z", "+00:00"))
    except ValueError:
        return timestamp
    seconds = int(((now or datetime.now(UTC)) - then).total_seconds())
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{max(seconds, 0)}s"


def _created(doc: Mapping[str, Any]) -> str | None:
    return (doc.get("metadata") or {}).get("creationTimestamp")


def _name(doc: Mapping[str, Any]) -> str:
    return str((doc.get("metadata") or {}).get("name", ""))


def broker_table(items: Sequence[Mapping[str, Any]], namespace: str) -> None:
    rows = [
        (
            _name(b),
            ((b.get("status") or {}).get("address") or {}).get("url", ""),
            age(_created(b)),
            ready(b),
            condition(b, "Ready").get("reason", ""),
        )
        for b in items
    ]
    table(
        ("NAME", "URL", "AGE", "READY", "REASON"),
        rows,
        empty=f"No brokers found in namespace {namespace!r}.",
    )


def _conditions_ok(doc: Mapping[str, Any]) -> str:
    conds = conditions(doc)
    return f"{sum(1 for c in conds if c.get('status') == 'True')} OK / {len(conds)}"


def trigger_table(items: Sequence[Mapping[str, Any]], namespace: str) -> None:
    rows = [
        (
            _name(t),
            (t.get("spec") or {}).get("broker", ""),
            _subscriber(t),
            age(_created(t)),
            _conditions_ok(t),
            ready(t),
            condition(t, "Ready").get("reason", ""),
        )
        for t in items
    ]
    table(
        ("NAME", "BROKER", "SINK", "AGE", "CONDITIONS", "READY", "REASON"),
        rows,
        empty=f"No triggers found in namespace {namespace!r}.",
    )


def _subscriber(trigger: Mapping[str, Any]) -> str:
    """A trigger's subscriber URI, or ``KIND/NAME`` for a ref (``eventtransform/NAME``,
    ``integrationsink/NAME``; docs/transforms.md, docs/targets.md)."""
    subscriber = (trigger.get("spec") or {}).get("subscriber") or {}
    ref = subscriber.get("ref")
    if isinstance(ref, Mapping):
        return f"{str(ref.get('kind', '')).lower()}/{ref.get('name', '')}"
    return str(subscriber.get("uri", ""))


def transform_table(items: Sequence[Mapping[str, Any]], namespace: str) -> None:
    rows = [
        (
            _name(t),
            ((t.get("spec") or {}).get("sink") or {}).get("uri", "(reply)"),
            age(_created(t)),
            ready(t),
            condition(t, "Ready").get("reason", ""),
        )
        for t in items
    ]
    table(
        ("NAME", "SINK", "AGE", "READY", "REASON"),
        rows,
        empty=f"No event transforms found in namespace {namespace!r}.",
    )


def describe_transform(doc: Mapping[str, Any]) -> None:
    _metadata(doc)
    spec = doc.get("spec") or {}
    status = doc.get("status") or {}
    _field("Address", (status.get("address") or {}).get("url"))
    sink = (spec.get("sink") or {}).get("uri")
    _field("Sink", sink or "(none: the transformed event is the trigger's reply)")
    reply = spec.get("reply") or {}
    if reply.get("discard"):
        _field("Reply", "discarded")
    elif reply.get("jsonata"):
        say("Reply expression:")
        say(str(reply["jsonata"].get("expression", "")))
    say("Expression:")
    say(str((spec.get("jsonata") or {}).get("expression", "")))
    conditions_table(doc)


def _field(label: str, value: Any, indent: int = 0) -> None:
    if value in (None, "", {}, []):
        return
    say(f"{' ' * indent}{label + ':':<14}{value}")


def _mapping(label: str, values: Mapping[str, Any] | None) -> None:
    if not values:
        return
    say(f"{label}:")
    for key, value in values.items():
        say(f"  {key}: {value}")


def _delivery(delivery: Mapping[str, Any] | None) -> None:
    if not delivery:
        return
    say("Delivery:")
    labels = {
        "retry": "Retry",
        "backoffPolicy": "Backoff",
        "backoffDelay": "Delay",
        "timeout": "Timeout",
        "retryAfterMax": "RetryAfterMax",
        "format": "Format",
    }
    for key, label in labels.items():
        _field(label, delivery.get(key), indent=2)
    _field("DeadLetter", (delivery.get("deadLetterSink") or {}).get("uri"), indent=2)


def conditions_table(doc: Mapping[str, Any]) -> None:
    say("")
    say("Conditions:")
    rows = []
    for c in conditions(doc):
        ok = {"True": "++", "False": "!!"}.get(str(c.get("status")), "??")
        rows.append(
            (
                ok,
                c.get("type", ""),
                age(c.get("lastTransitionTime")),
                c.get("reason", ""),
                c.get("message", ""),
            )
        )
    table(("OK", "TYPE", "AGE", "REASON", "MESSAGE"), rows, empty="  (none reported)")


def _metadata(doc: Mapping[str, Any]) -> None:
    meta = doc.get("metadata") or {}
    _field("Name", meta.get("name"))
    _field("Namespace", meta.get("namespace"))
    _mapping("Labels", meta.get("labels"))
    _mapping("Annotations", meta.get("annotations"))
    _field("Age", age(meta.get("creationTimestamp")))
    _field("Generation", meta.get("generation"))


def describe_broker(doc: Mapping[str, Any]) -> None:
    _metadata(doc)
    status = doc.get("status") or {}
    _field("Address", (status.get("address") or {}).get("url"))
    # The EventPolicies that apply (docs/security.md): who may send to it.
    _field("Policies", ", ".join(str(p.get("name")) for p in status.get("policies") or []))
    _delivery((doc.get("spec") or {}).get("delivery"))
    conditions_table(doc)


def _filters(spec: Mapping[str, Any]) -> None:
    attributes = (spec.get("filter") or {}).get("attributes")
    if attributes is not None:
        say("Filter:")
        if not attributes:
            say("  (all events)")
        for key, value in attributes.items():
            say(f"  {key}: {value if value else '(present)'}")
    if spec.get("filters"):
        say("Filters:")
        for element in spec["filters"]:
            say(f"  {json.dumps(element, ensure_ascii=False)}")


def describe_trigger(doc: Mapping[str, Any]) -> None:
    _metadata(doc)
    spec = doc.get("spec") or {}
    status = doc.get("status") or {}
    _field("Broker", spec.get("broker"))
    annotations = (doc.get("metadata") or {}).get("annotations") or {}
    if annotations.get("serverless-broker/delivery-order") == "ordered":
        _field("Order", "ordered (per partitionkey, one at a time)")
    if annotations.get("serverless-broker/max-rate"):  # docs/flow-control.md
        _field("Max rate", f"{annotations['serverless-broker/max-rate']} events/s")
    _filters(spec)
    say("Sink:")
    _field("URI", (spec.get("subscriber") or {}).get("uri"), indent=2)
    ref = (spec.get("subscriber") or {}).get("ref")
    if isinstance(ref, Mapping):
        _field("Transform", ref.get("name"), indent=2)
    _field("Resolved", status.get("subscriberUri"), indent=2)
    _delivery(spec.get("delivery"))
    conditions_table(doc)
