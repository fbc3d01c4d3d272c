"""Replay: re-send archived events of a broker to (some of) its triggers (design.md §12,
docs/replay.md). Parsing with every problem named, admission (the spec is immutable), JSON shapes
and the status from the runner's progress. Pure.

    PUT .../namespaces/{ns}/brokers/{broker}/replays/{name}
    spec.from:     RFC 3339, inclusive (the archive record's ``at``, i.e. knativearrivaltime)
    spec.to:       RFC 3339, exclusive; after ``from``; at most MAX_RANGE after it
    spec.triggers: [trigger names]  default: every trigger of the broker
    spec.filters:  the trigger filter dialects, applied on top of each trigger's own filter
    spec.packing:  true: a standard queue's events travel many to an SQS message (packs);
                   default false: one event a message, ten to a SendMessageBatch call

A replay lives under its broker: its store name is ``<broker>/<name>`` (two brokers may each have
a replay called ``nightly``), and the API shows ``metadata.name`` as the short name.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from chalicelib.core.clock import rfc3339
from chalicelib.core.errors import ImmutableFieldError, Problem, ValidationError
from chalicelib.core.filtering.filters import validate_filters
from chalicelib.core.names import name_problems, quote
from chalicelib.core.resources import meta
from chalicelib.core.resources.conditions import FALSE, READY, ConditionSet, previous_conditions
from chalicelib.core.resources.fields import unknown_fields
from chalicelib.core.resources.kind import ResourceKind

API_VERSION = "eventing.knative.dev/v1"
KIND = "Replay"
EXTENSION = "replayname"  # set on every replayed event: the replay's short name
MAX_RANGE = timedelta(days=93)  # a quarter; longer ranges are split into several replays
MAX_TRIGGERS = 100
MAX_TIME_CHARS = 64
# Unfinished replays a namespace may have; a new one beyond it is refused (409) until one ends.
MAX_ACTIVE_PER_NAMESPACE = 10

BROKER_READY = "BrokerReady"
TRIGGERS_RESOLVED = "TriggersResolved"
SUCCEEDED = "Succeeded"
# Ready: the replay can run (its broker and triggers exist). Succeeded: it ran to the end of its
# range (True), failed or was stopped (False), or is pending or running (Unknown).
REPLAY_CONDITIONS = ConditionSet((BROKER_READY, TRIGGERS_RESOLVED))

# The runner's phases, kept in the stored state.
PENDING, RUNNING, SUCCEEDED_PHASE, FAILED = "Pending", "Running", "Succeeded", "Failed"


@dataclass(frozen=True, slots=True)
class Replay:
    namespace: str
    name: str  # the store name: "<broker>/<short name>"
    # Set at admission (meta.admitted); a parsed body has none yet.
    uid: str = field(default="", kw_only=True)
    generation: int = field(default=0, kw_only=True)
    creation_timestamp: str = field(default="", kw_only=True)
    broker: str
    start: str  # spec.from, normalised RFC 3339 (milliseconds, Z)
    end: str  # spec.to
    triggers: tuple[str, ...] = ()  # empty: every trigger of the broker
    filters: tuple[Any, ...] = ()  # raw spec.filters, validated
    packing: bool = False  # spec.packing: many events to an SQS message (docs/replay.md, Packs)
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)

    @property
    def short_name(self) -> str:
        return self.name.split("/", 1)[1]

    @property
    def start_time(self) -> datetime:
        return parse_time(self.start)

    @property
    def end_time(self) -> datetime:
        return parse_time(self.end)


def store_name(broker: str, name: str) -> str:
    return f"{broker}/{name}"


def parse_time(text: str) -> datetime:
    """An RFC 3339 timestamp with a zone (``Z`` or an offset); ValueError otherwise."""
    if len(text) > MAX_TIME_CHARS or "T" not in text.upper():
        raise ValueError(text)
    moment = datetime.fromisoformat(text.replace("z", "Z").replace("Z", "+00:00"))
    if moment.tzinfo is None:
        raise ValueError(text)
    try:
        return moment.astimezone(UTC)
    except OverflowError:  # year 1 or 9999 shifted out of range by its offset
        raise ValueError(text) from None


def _time(value: object, path: str, problems: list[Problem]) -> datetime | None:
    if value is None:
        problems.append(Problem(path, "is required (an RFC 3339 time, e.g. 2026-01-31T12:00:00Z)"))
        return None
    if not isinstance(value, str):
        problems.append(Problem(path, "must be an RFC 3339 time string"))
        return None
    try:
        return parse_time(value)
    except ValueError:
        problems.append(
            Problem(path, f"must be an RFC 3339 time with a zone, got {quote(value[:64])}")
        )
        return None


def parse_replay(namespace: str, body: object, path_name: str) -> Replay:
    """Validate a Replay body; ``path_name`` is ``<broker>/<name>`` from the path. Raises
    ValidationError naming every problem."""
    problems: list[Problem] = []
    broker, _, short = path_name.partition("/")
    problems += name_problems(broker, "path.broker", what="broker name")
    _, labels, annotations, spec = meta.envelope(
        namespace, body, API_VERSION, KIND, short, problems
    )
    unknown_fields(spec, ("from", "to", "triggers", "filters", "packing"), "spec", problems)
    start = _time(spec.get("from"), "spec.from", problems)
    end = _time(spec.get("to"), "spec.to", problems)
    if start is not None and end is not None:
        if end <= start:
            problems.append(Problem("spec.to", "must be after spec.from"))
        elif end - start > MAX_RANGE:
            problems.append(
                Problem(
                    "spec.to",
                    f"the range is {end - start}; at most {MAX_RANGE.days} days per replay "
                    "(split a longer range into several replays)",
                )
            )
    triggers = _triggers(spec.get("triggers"), problems)
    raw_filters = spec.get("filters")
    filters: tuple[Any, ...] = ()
    if raw_filters is not None:
        problems += validate_filters(None, raw_filters, path="spec")
        if isinstance(raw_filters, list):
            filters = tuple(raw_filters)
    packing = spec.get("packing", False)
    if not isinstance(packing, bool):
        problems.append(Problem("spec.packing", "must be true or false"))
    if problems:
        raise ValidationError(problems)
    assert start is not None and end is not None
    return Replay(
        namespace=namespace,
        name=store_name(broker, short),
        broker=broker,
        start=rfc3339(start),
        end=rfc3339(end),
        triggers=triggers,
        filters=filters,
        packing=packing is True,
        labels=labels,
        annotations=annotations,
    )


def _triggers(value: object, problems: list[Problem]) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not value:
        problems.append(Problem("spec.triggers", "must be a non-empty list of trigger names"))
        return ()
    if len(value) > MAX_TRIGGERS:
        problems.append(Problem("spec.triggers", f"at most {MAX_TRIGGERS} triggers"))
        return ()
    out: list[str] = []
    for i, item in enumerate(value):
        found = name_problems(item, f"spec.triggers[{i}]", what="trigger name")
        problems += found
        if found:
            continue
        if item in out:
            problems.append(Problem(f"spec.triggers[{i}]", f"{quote(item)} is listed twice"))
        else:
            out.append(str(item))
    return tuple(out)


def replay_spec_json(replay: Replay) -> dict[str, Any]:
    spec: dict[str, Any] = {"from": replay.start, "to": replay.end}
    if replay.triggers:
        spec["triggers"] = list(replay.triggers)
    if replay.filters:
        spec["filters"] = list(replay.filters)
    if replay.packing:
        spec["packing"] = True
    return spec


def admit_replay(parsed: Replay, existing: Replay | None, *, uid: str, now: datetime) -> Replay:
    """The spec cannot change: the runner's checkpoint is a position in the range it reads. A
    new replay's range starts in the past (the archive holds nothing later)."""
    if existing is None and parsed.start_time > now:
        raise ValidationError(
            [Problem("spec.from", f"is in the future (now is {rfc3339(now, 'seconds')})")]
        )
    if existing is not None:
        old, new = replay_spec_json(existing), replay_spec_json(parsed)
        changed = [
            meta.immutable_problem(f"spec.{k}", old.get(k), new.get(k), "replay")
            for k in sorted(set(old) | set(new))
            if old.get(k) != new.get(k)
        ]
        if changed:
            raise ImmutableFieldError(changed)
    return meta.admitted(parsed, existing, uid=uid, now=now, configuration=lambda _: None)


class _ReplayKind(ResourceKind[Replay]):
    def to_json(self, res: Replay, status: Mapping[str, Any]) -> dict[str, Any]:
        """The API names a replay by its short name, beside its broker."""
        doc = super().to_json(res, status)
        doc["metadata"]["name"] = res.short_name
        doc["metadata"]["broker"] = res.broker
        return doc


REPLAYS: ResourceKind[Replay] = _ReplayKind(
    store_kind="replay",
    api_version=API_VERSION,
    kind=KIND,
    plural="replays",
    parse=lambda namespace, body, name: parse_replay(namespace, body, name or ""),
    admit=lambda parsed, old, uid, now: admit_replay(parsed, old, uid=uid, now=now),
    spec_json=replay_spec_json,
)


# ---- status -------------------------------------------------------------------------------------


def replay_status(
    replay: Replay,
    state: Mapping[str, Any],
    *,
    broker_exists: bool,
    missing_triggers: tuple[str, ...],
    now: datetime,
    previous: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The status from the runner's state (``phase``, counters, ``message``) and what the
    control plane sees now (the broker and the named triggers)."""
    manager = REPLAY_CONDITIONS.manage(previous_conditions(previous), now)
    if broker_exists:
        manager.mark_true(BROKER_READY)
    else:
        manager.mark_false(
            BROKER_READY, "BrokerDoesNotExist", f'Broker "{replay.broker}" does not exist'
        )
    if missing_triggers:
        names = ", ".join(f'"{t}"' for t in missing_triggers)
        manager.mark_false(
            TRIGGERS_RESOLVED, "TriggerNotFound", f"Broker has no trigger(s) {names}"
        )
    else:
        manager.mark_true(TRIGGERS_RESOLVED)
    phase = str(state.get("phase", PENDING))
    message = str(state.get("message", ""))
    ready = manager.get(READY)
    if phase == SUCCEEDED_PHASE:
        manager.mark_true(SUCCEEDED, "Completed", message or "Every event of the range was read.")
    elif phase == FAILED:
        manager.mark_false(SUCCEEDED, str(state.get("reason") or "Failed"), message or "Failed.")
    elif ready is not None and ready.status == FALSE:
        manager.mark_unknown(SUCCEEDED, ready.reason, ready.message)
    elif phase == RUNNING:
        manager.mark_unknown(SUCCEEDED, "Running", message or "Reading the archive.")
    else:
        manager.mark_unknown(SUCCEEDED, "Pending", message or "Waiting for the runner.")
    status: dict[str, Any] = {
        "observedGeneration": replay.generation,
        "conditions": manager.to_json(),
        "progress": progress_json(state),
    }
    for key, out in (("started_at", "startTime"), ("completed_at", "completionTime")):
        if state.get(key):
            status[out] = state[key]
    return status


def progress_json(state: Mapping[str, Any]) -> dict[str, Any]:
    progress: dict[str, Any] = {
        "eventsRead": int(state.get("events_read", 0)),
        "eventsEnqueued": int(state.get("events_enqueued", 0)),
    }
    if state.get("events_missing"):
        progress["eventsMissing"] = int(state["events_missing"])
    if state.get("last_arrival"):
        progress["lastArrivalTime"] = state["last_arrival"]
    return progress


def is_finished(state: Mapping[str, Any]) -> bool:
    return state.get("phase") in (SUCCEEDED_PHASE, FAILED)


def run_order(unfinished: list[tuple[Replay, Mapping[str, Any]]]) -> list[Replay]:
    """The order a runner takes unfinished replays in (with their stored state): round-robin
    across namespaces (one of each, then a second of each, ...), the oldest first within a
    namespace. The namespace served least recently (its latest ``ran_at``; never: first) leads,
    so that a runner whose budget ends before the last replay starts there next time."""
    queues: dict[str, list[Replay]] = {}
    served: dict[str, str] = {}
    for replay, state in sorted(
        unfinished, key=lambda item: (item[0].creation_timestamp, item[0].name)
    ):
        queues.setdefault(replay.namespace, []).append(replay)
        served[replay.namespace] = max(
            served.get(replay.namespace, ""), str(state.get("ran_at", ""))
        )
    namespaces = sorted(queues, key=lambda ns: (served[ns], ns))
    order: list[Replay] = []
    for turn in range(max((len(q) for q in queues.values()), default=0)):
        order.extend(queues[ns][turn] for ns in namespaces if turn < len(queues[ns]))
    return order
