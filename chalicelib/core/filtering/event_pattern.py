"""The ``eventPattern`` filter dialect: Amazon EventBridge event patterns over a CloudEvent.

The pattern is matched against the event's JSON form: context attributes at the top level, as
their canonical CloudEvents text (so an event routes the same way in binary and structured mode;
``{"sequence": ["5"]}``, never ``[5]``), and the JSON ``data`` under ``data`` (see
``event_data``: data that is not JSON is absent). EventBridge's semantics
(https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-event-patterns.html and
``eb-event-patterns-content-based-filtering.html``):

- fields of one object are ANDed; the values of a field's array are ORed; a pattern object
  matches a nested object (or any element of an array of objects);
- a leaf is an array of matchers: an exact string, number (``300`` matches ``3.0e2``), ``true``,
  ``false`` or ``null``, or one of ``{"prefix"}``, ``{"suffix"}`` (each with an optional
  ``{"equals-ignore-case": ...}`` value), ``{"equals-ignore-case"}``, ``{"anything-but"}`` (a
  value, a list of strings or of numbers, or ``{"prefix"|"suffix"|"equals-ignore-case"|
  "wildcard"}``), ``{"numeric": [op, n, ...]}``, ``{"exists": bool}``, ``{"wildcard"}``,
  ``{"cidr"}``;
- when the event's value is an array, the leaf matches if any element matches (so
  ``anything-but`` matches an array holding one other value, as in EventBridge);
- ``"$or": [pattern, ...]`` at any object level: the object's other fields and any one
  alternative;
- a missing field matches only ``{"exists": false}``; so does an object where a leaf was expected
  (``exists`` works on leaf nodes only); ``anything-but`` does not match a missing field.

Limits (``check``): the pattern's compact JSON ≤ 2,048 characters (EventBridge's default
"Event pattern size" quota, eb-quota.html); ours, since EventBridge documents no number for them:
≤ 16 levels, ≤ 256 values, ≤ 1,000 ``$or`` combinations (EventBridge refuses "too complex" ``$or``
rules), ≤ 8 ``*`` per wildcard and no ``**`` (EventBridge refuses consecutive wildcards); numbers
in a pattern within ±5.0e9 (EventBridge's numeric range). Checked in ``event_pattern_check``; the
leaf matchers are ``event_pattern_matchers``.

Matching is bounded (``core/limits.py``): arrays nested deeper than 64 levels (deeper than JSON data
the broker reads at all) hold nothing a pattern matches; and an event has a budget of work across
all its patterns (``MAX_PATTERN_WORK`` array elements visited): an event that exhausts it matches
no pattern that needed more (logged with the event id, counted in ``overruns()``).
"""

from __future__ import annotations

import ipaddress
import json
import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from chalicelib.core.cloudevents.event import ABSENT, CloudEvent
from chalicelib.core.filtering.event_data import json_data
from chalicelib.core.filtering.event_pattern_check import MAX_NUMBER, check
from chalicelib.core.filtering.event_pattern_matchers import (
    COMPARE,
    Affix,
    AnythingBut,
    Cidr,
    Equals,
    EqualsIgnoreCase,
    Exists,
    Matcher,
    Numeric,
    Wildcard,
)
from chalicelib.core.limits import MAX_JSON_DEPTH, MAX_PATTERN_WORK

__all__ = ["MAX_NUMBER", "EventPatternFilter", "check", "compile_pattern", "overruns"]

log = logging.getLogger(__name__)

Hints = Mapping[str, frozenset[str]]
MISSING: Any = ABSENT


# -- the work budget -----------------------------------------------------------------------------


class _OverBudget(Exception):
    """Raised inside matching when the event's budget is spent: its pattern does not match."""


class _Work(threading.local):
    """The budget of the event this thread matches (one event at a time per thread)."""

    def __init__(self) -> None:
        self.event: CloudEvent | None = None
        self.left = MAX_PATTERN_WORK
        self.overran = False


_work = _Work()
_overruns = [0]
_overruns_lock = threading.Lock()


def reset_budget(event: CloudEvent) -> None:
    """A whole budget for ``event`` (the next match of another event gets one anyway)."""
    _work.event, _work.left, _work.overran = event, MAX_PATTERN_WORK, False


def over_budget(event: CloudEvent) -> bool:
    """Whether matching ``event`` ran out of budget (since its budget began)."""
    return _work.event is event and _work.overran


def overruns() -> int:
    """Events that exhausted their budget in this process."""
    return _overruns[0]


def _charge(units: int) -> None:
    _work.left -= units
    if _work.left < 0:
        raise _OverBudget


def _overran(event: CloudEvent) -> None:
    if _work.overran:
        return
    _work.overran = True
    with _overruns_lock:
        _overruns[0] += 1
    log.warning(
        "eventPattern matching of event %r stopped after %d array elements (its budget): "
        "patterns that needed more did not match",
        event.get("id"),
        MAX_PATTERN_WORK,
    )


BUDGET_REASON = (
    f"matching stopped: the event's data needs more than {MAX_PATTERN_WORK} array elements "
    "visited (the work budget), so this pattern does not match"
)


# -- the compiled pattern ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Leaf:
    matchers: tuple[Matcher, ...]

    def describe(self) -> str:
        return "[" + ", ".join(m.describe() for m in self.matchers) + "]"


@dataclass(frozen=True, slots=True)
class Node:
    fields: tuple[tuple[str, Leaf | Node], ...]
    alternatives: tuple[Node, ...] = ()  # ``$or``; empty = none


def _leaf_values(value: Any) -> list[Any]:
    """The scalars of a value, arrays flattened (iteratively; arrays nested deeper than
    MAX_JSON_DEPTH hold none), each array's elements charged to the budget."""
    if not isinstance(value, list):
        return [] if value is MISSING or isinstance(value, dict) else [value]
    out: list[Any] = []
    stack = [(value, 1)]
    while stack:
        items, depth = stack.pop()
        _charge(len(items))
        for item in items:
            if isinstance(item, list):
                if depth < MAX_JSON_DEPTH:
                    stack.append((item, depth + 1))
            elif not isinstance(item, dict):
                out.append(item)
    return out


def _match_leaf(leaf: Leaf, value: Any, path: str, why: list[str] | None) -> bool:
    if why is None and value is not MISSING and not isinstance(value, (list, dict)):
        # The usual case: one scalar, no explanation wanted.
        for matcher in leaf.matchers:  # noqa: SIM110 - hot path, no generator
            if matcher.test(value):
                return True
        return False
    values = _leaf_values(value)
    if not values:
        if any(isinstance(m, Exists) and not m.present for m in leaf.matchers):
            return True
        if why is not None:
            shown = "an object" if isinstance(value, dict) else "a missing field"
            why.append(f"{path}: {leaf.describe()} did not match {shown}")
        return False
    _charge(len(values) * (len(leaf.matchers) - 1))
    for matcher in leaf.matchers:
        test = matcher.test
        for item in values:
            if test(item):
                return True
    if why is not None:
        shown = json.dumps(values[0] if len(values) == 1 else values[:20])
        why.append(f"{path}: {leaf.describe()} did not match {_clip(shown)}")
    return False


def _clip(text: str, limit: int = 80) -> str:
    return text if len(text) <= limit else text[:limit] + "…"


def _match_child(
    child: Leaf | Node, value: Any, path: str, why: list[str] | None, depth: int = 1
) -> bool:
    if isinstance(child, Leaf):
        return _match_leaf(child, value, path, why)
    if isinstance(value, list) and value:
        if depth > MAX_JSON_DEPTH:
            return False
        _charge(len(value))
        if any(_match_child(child, item, path, None, depth + 1) for item in value):
            return True
        if why is not None:
            why.append(f"{path}: no element of the array matched")
        return False
    return _match_node(child, value.get if isinstance(value, dict) else _nothing, path, why)


def _nothing(key: str, default: Any = MISSING) -> Any:
    return default


def _match_node(
    node: Node, get: Callable[[str, Any], Any], path: str, why: list[str] | None
) -> bool:
    for key, child in node.fields:
        where = path if why is None else f"{path}.{key}"  # paths only when explaining
        if not _match_child(child, get(key, MISSING), where, why):
            return False
    if node.alternatives:
        if any(_match_node(alt, get, path, None) for alt in node.alternatives):
            return True
        if why is not None:
            why.append(f"{path}.$or: no alternative matched")
            for i, alt in enumerate(node.alternatives):
                _match_node(alt, get, f"{path}.$or[{i}]", why)
        return False
    return True


class _Root:
    """The event's JSON form, read lazily: attributes as canonical text, ``data`` as JSON."""

    __slots__ = ("attrs", "event")

    def __init__(self, event: CloudEvent) -> None:
        self.event = event
        self.attrs = event.attributes

    def get(self, key: str, default: Any = MISSING) -> Any:
        if key == "data":
            return json_data(self.event)
        value = self.attrs.get(key)
        if value is None:
            return default
        return value if type(value) is str else _canonical(value)


def _canonical(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


# -- the routing path: the same semantics as _match_node, compiled into closures -------------

Getter = Callable[[str, Any], Any]


def _fast_test(matcher: Matcher) -> Callable[[Any], bool]:
    if isinstance(matcher, Equals) and isinstance(matcher.value, str):
        text = matcher.value
        return lambda value: value == text  # only an equal str equals a str
    if isinstance(matcher, Numeric) and len(matcher.conditions) == 1:
        ((op, bound),) = matcher.conditions
        compare = COMPARE[op]
        return lambda value: (type(value) is int or type(value) is float) and compare(value, bound)
    return matcher.test


def _fast_leaf(leaf: Leaf) -> Callable[[Any], bool]:
    tests = tuple(_fast_test(m) for m in leaf.matchers)
    texts = [m.value for m in leaf.matchers if isinstance(m, Equals) and isinstance(m.value, str)]
    if len(texts) > 1 and len(texts) == len(leaf.matchers):
        # Only a str equals a str, and a hashable JSON scalar is all that reaches the tests.
        tests = (frozenset(texts).__contains__,)
    absent_ok = any(isinstance(m, Exists) and not m.present for m in leaf.matchers)

    def match(value: Any) -> bool:
        if value is MISSING:
            return absent_ok
        kind = type(value)
        if kind is list or kind is dict:
            return _match_leaf(leaf, value, "", None)
        for test in tests:  # noqa: SIM110 - hot path, no generator
            if test(value):
                return True
        return False

    return match


def _fast_child(child: Leaf | Node) -> Callable[[Any], bool]:
    if isinstance(child, Leaf):
        return _fast_leaf(child)
    node = _fast_node(child)

    def nested(value: Any, depth: int = 1) -> bool:
        if isinstance(value, dict):
            return node(value.get)
        if isinstance(value, list) and value:
            if depth > MAX_JSON_DEPTH:
                return False
            _charge(len(value))
            return any(nested(item, depth + 1) for item in value)
        return node(_nothing)

    return nested


def _fast_node(node: Node) -> Callable[[Getter], bool]:
    fields = tuple((key, _fast_child(child)) for key, child in node.fields)
    alternatives = tuple(_fast_node(alt) for alt in node.alternatives)

    def match(get: Getter) -> bool:
        for key, test in fields:
            if not test(get(key, MISSING)):
                return False
        if not alternatives:
            return True
        for alternative in alternatives:  # noqa: SIM110 - hot path, no generator
            if alternative(get):
                return True
        return False

    return match


def _fast_root(node: Node) -> Callable[[CloudEvent], bool]:
    """``_fast_node`` for the event itself: attribute fields read without building a getter;
    within the event's work budget."""
    fields = tuple((key, _fast_child(child)) for key, child in node.fields)
    alternatives = tuple(_fast_node(alt) for alt in node.alternatives)

    def walk(event: CloudEvent) -> bool:
        attrs = event.attributes
        for key, test in fields:
            if key == "data":
                value = json_data(event)
            else:
                value = attrs.get(key)
                if value is None:
                    value = MISSING
                elif type(value) is not str:
                    value = _canonical(value)
            if not test(value):
                return False
        if not alternatives:
            return True
        get = _Root(event).get
        for alternative in alternatives:  # noqa: SIM110 - hot path, no generator
            if alternative(get):
                return True
        return False

    def match(event: CloudEvent) -> bool:
        if _work.event is not event:
            reset_budget(event)
        try:
            return walk(event)
        except _OverBudget:
            _overran(event)
            return False

    return match


@dataclass(frozen=True, slots=True)
class EventPatternFilter:
    """An EventBridge event pattern, compiled once (see the module docstring)."""

    root: Node
    source: Mapping[str, Any]
    matches: Callable[[CloudEvent], bool] = field(repr=False, compare=False)

    def matches_document(self, document: Mapping[str, Any]) -> bool:
        """Matches a plain JSON object (an EventBridge event as documented, for the table),
        within a work budget of its own."""
        _work.event, _work.left = None, MAX_PATTERN_WORK
        try:
            return _match_node(self.root, document.get, "", None)
        except _OverBudget:
            return False

    def explain(self, event: CloudEvent, path: str) -> tuple[bool, list[str]]:
        """Whether it matches (as ``matches`` answers with a whole budget), and the term that
        decided (for ``triggers:test``)."""
        reset_budget(event)
        if self.matches(event):
            fields = ", ".join(key for key, _ in self.root.fields) or "$or"
            return True, [f"{path}: every field matched ({fields})"]
        if over_budget(event):
            return False, [f"{path}: {BUDGET_REASON}"]
        why: list[str] = []
        reset_budget(event)
        try:
            _match_node(self.root, _Root(event).get, path, why)
        except _OverBudget:  # the reasons walk more than the verdict: it had what it needed
            why.append(f"{path}: (the explanation stopped at the work budget)")
        return False, why

    def index_hints(self) -> Hints:
        return _node_hints(self.root)


def _node_hints(node: Node) -> Hints:
    hints: dict[str, frozenset[str]] = {}
    for key, child in node.fields:
        if key == "data" or not isinstance(child, Leaf):
            continue
        texts = [m.value for m in child.matchers if isinstance(m, Equals)]
        if len(texts) == len(child.matchers) and all(isinstance(t, str) for t in texts):
            hints[key] = frozenset(str(t) for t in texts)
    if node.alternatives:
        parts = [_node_hints(alt) for alt in node.alternatives]
        common = set(parts[0]).intersection(*parts[1:])
        for key in common:
            union = frozenset().union(*(p[key] for p in parts))
            hints[key] = hints[key] & union if key in hints else union
    return hints


def compile_pattern(pattern: Mapping[str, Any]) -> EventPatternFilter:
    """The compiled pattern; ``pattern`` must have passed ``check``."""
    root = _compile_node(pattern)
    return EventPatternFilter(root, pattern, _fast_root(root))


def _compile_node(pattern: Mapping[str, Any]) -> Node:
    fields = tuple(
        (key, _compile_node(value) if isinstance(value, Mapping) else _compile_leaf(value))
        for key, value in pattern.items()
        if key != "$or"
    )
    alternatives = tuple(_compile_node(alt) for alt in pattern.get("$or", ()))
    return Node(fields, alternatives)


def _compile_leaf(values: Sequence[Any]) -> Leaf:
    return Leaf(tuple(_compile_matcher(v) for v in values))


def _compile_matcher(value: Any) -> Matcher:
    if not isinstance(value, Mapping):
        return Equals(value)
    ((name, arg),) = value.items()
    if name in ("prefix", "suffix"):
        if isinstance(arg, Mapping):
            return Affix(arg["equals-ignore-case"], name == "suffix", True)
        return Affix(arg, name == "suffix")
    if name == "equals-ignore-case":
        return EqualsIgnoreCase(tuple(arg) if isinstance(arg, list) else (arg,))
    if name == "wildcard":
        return Wildcard(arg)
    if name == "numeric":
        return Numeric(tuple((arg[i], arg[i + 1]) for i in range(0, len(arg), 2)))
    if name == "exists":
        return Exists(arg)
    if name == "cidr":
        return Cidr(ipaddress.ip_network(arg, strict=False))
    # anything-but
    if isinstance(arg, Mapping):
        ((inner_name, inner_arg),) = arg.items()
        texts = inner_arg if isinstance(inner_arg, list) else [inner_arg]
        if inner_name == "equals-ignore-case":
            return AnythingBut(inner=(EqualsIgnoreCase(tuple(texts)),))
        inner = tuple(_compile_matcher({inner_name: text}) for text in texts)
        assert all(isinstance(m, Affix | Wildcard) for m in inner)
        return AnythingBut(inner=inner)  # type: ignore[arg-type]
    return AnythingBut(values=tuple(arg) if isinstance(arg, list) else (arg,))
