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
in a pattern within ±5.0e9 (EventBridge's numeric range).
"""

from __future__ import annotations

import ipaddress
import json
import math
import operator
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from chalicelib.core.cloudevents.event import ABSENT, CloudEvent
from chalicelib.core.errors import Problem
from chalicelib.core.filtering.event_data import json_data
from chalicelib.core.limits import (
    MAX_OR_COMBINATIONS,
    MAX_PATTERN_CHARS,
    MAX_PATTERN_DEPTH,
    MAX_PATTERN_VALUES,
    MAX_WILDCARDS,
)

MAX_NUMBER: Final = 5.0e9

Hints = Mapping[str, frozenset[str]]
MISSING: Any = ABSENT

_OPERATORS: Final = (
    "prefix",
    "suffix",
    "equals-ignore-case",
    "anything-but",
    "numeric",
    "exists",
    "wildcard",
    "cidr",
)
_COMPARE: Final[dict[str, Callable[[float, float], bool]]] = {
    "=": operator.eq,
    ">": operator.gt,
    ">=": operator.ge,
    "<": operator.lt,
    "<=": operator.le,
}


# -- matchers ------------------------------------------------------------------------------------


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _same(expected: object, value: object) -> bool:
    if isinstance(expected, str):
        return isinstance(value, str) and value == expected
    if isinstance(expected, bool) or expected is None:
        return value is expected
    return _is_number(value) and value == expected


@dataclass(frozen=True, slots=True)
class Equals:
    value: str | int | float | bool | None

    def test(self, value: object) -> bool:
        return _same(self.value, value)

    def describe(self) -> str:
        return json.dumps(self.value)


@dataclass(frozen=True, slots=True)
class Affix:
    """``{"prefix"}`` or ``{"suffix"}`` (``at_end``): the value starts (ends) with ``text``, with
    ``{"equals-ignore-case"}`` compared casefolded."""

    text: str
    at_end: bool = False
    ignore_case: bool = False

    def test(self, value: object) -> bool:
        if not isinstance(value, str):
            return False
        if not self.ignore_case:
            return value.endswith(self.text) if self.at_end else value.startswith(self.text)
        # Only the end that can match is casefolded, not a whole (possibly long) value; a value
        # no longer than the text is compared whole (as equals-ignore-case compares it).
        n, part = len(self.text), value
        if len(value) > n:
            part = value[len(value) - n :] if self.at_end else value[:n]
        return part.casefold() == self.text.casefold()

    def describe(self) -> str:
        inner = {"equals-ignore-case": self.text} if self.ignore_case else self.text
        return json.dumps({"suffix" if self.at_end else "prefix": inner})


@dataclass(frozen=True, slots=True)
class EqualsIgnoreCase:
    texts: tuple[str, ...]

    def test(self, value: object) -> bool:
        return isinstance(value, str) and value.casefold() in {t.casefold() for t in self.texts}

    def describe(self) -> str:
        shown = self.texts[0] if len(self.texts) == 1 else list(self.texts)
        return json.dumps({"equals-ignore-case": shown})


class Wildcard:
    """``*`` = any run of characters, ``\\*`` = a star, ``\\\\`` = a backslash. Matched segment by
    segment (head anchored, tail anchored, each middle at its leftmost fit), never by
    backtracking, so a match costs one forward search per segment."""

    __slots__ = ("pattern", "segments")

    def __init__(self, pattern: str) -> None:
        self.pattern = pattern
        self.segments = _wildcard_segments(pattern)

    def test(self, value: object) -> bool:
        if not isinstance(value, str):
            return False
        segments = self.segments
        if len(segments) == 1:
            return value == segments[0]
        head, tail = segments[0], segments[-1]
        if len(value) < len(head) + len(tail) or not value.startswith(head):
            return False
        pos, end = len(head), len(value) - len(tail)
        for middle in segments[1:-1]:
            found = value.find(middle, pos, end)
            if found < 0:
                return False
            pos = found + len(middle)
        return value.endswith(tail)

    def describe(self) -> str:
        return json.dumps({"wildcard": self.pattern})

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Wildcard) and other.pattern == self.pattern

    def __hash__(self) -> int:
        return hash(self.pattern)


def _wildcard_segments(pattern: str) -> tuple[str, ...]:
    segments, current, i = [], [], 0
    while i < len(pattern):
        char = pattern[i]
        if char == "\\" and i + 1 < len(pattern) and pattern[i + 1] in "*\\":
            current.append(pattern[i + 1])
            i += 2
            continue
        if char == "*":
            segments.append("".join(current))
            current = []
        else:
            current.append(char)
        i += 1
    segments.append("".join(current))
    return tuple(segments)


@dataclass(frozen=True, slots=True)
class AnythingBut:
    values: tuple[str | int | float | bool | None, ...] = ()
    inner: Affix | EqualsIgnoreCase | Wildcard | None = None

    def test(self, value: object) -> bool:
        if self.inner is not None:
            return isinstance(value, str) and not self.inner.test(value)
        return not any(_same(expected, value) for expected in self.values)

    def describe(self) -> str:
        if self.inner is not None:
            return f'{{"anything-but": {self.inner.describe()}}}'
        shown = self.values[0] if len(self.values) == 1 else list(self.values)
        return json.dumps({"anything-but": shown})


@dataclass(frozen=True, slots=True)
class Numeric:
    conditions: tuple[tuple[str, int | float], ...]

    def test(self, value: object) -> bool:
        if not _is_number(value):
            return False
        assert isinstance(value, (int, float))
        return all(_COMPARE[op](value, bound) for op, bound in self.conditions)

    def describe(self) -> str:
        return json.dumps({"numeric": [x for pair in self.conditions for x in pair]})


@dataclass(frozen=True, slots=True)
class Exists:
    present: bool

    def test(self, value: object) -> bool:
        return self.present

    def describe(self) -> str:
        return json.dumps({"exists": self.present})


@dataclass(frozen=True, slots=True)
class Cidr:
    network: ipaddress.IPv4Network | ipaddress.IPv6Network

    def test(self, value: object) -> bool:
        if not isinstance(value, str) or len(value) > 64:
            return False
        try:
            address = ipaddress.ip_address(value)
        except ValueError:  # not an IP address: the term does not match, as in EventBridge
            return False
        return address.version == self.network.version and address in self.network

    def describe(self) -> str:
        return json.dumps({"cidr": str(self.network)})


Matcher = Equals | Affix | EqualsIgnoreCase | Wildcard | AnythingBut | Numeric | Exists | Cidr


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


def _leaf_values(value: Any, out: list[Any]) -> list[Any]:
    if isinstance(value, list):
        for item in value:
            _leaf_values(item, out)
    elif value is not MISSING and not isinstance(value, dict):
        out.append(value)
    return out


def _match_leaf(leaf: Leaf, value: Any, path: str, why: list[str] | None) -> bool:
    if why is None and value is not MISSING and not isinstance(value, (list, dict)):
        # The usual case: one scalar, no explanation wanted.
        for matcher in leaf.matchers:  # noqa: SIM110 - hot path, no generator
            if matcher.test(value):
                return True
        return False
    values = _leaf_values(value, [])
    if not values:
        if any(isinstance(m, Exists) and not m.present for m in leaf.matchers):
            return True
        if why is not None:
            shown = "an object" if isinstance(value, dict) else "a missing field"
            why.append(f"{path}: {leaf.describe()} did not match {shown}")
        return False
    for matcher in leaf.matchers:
        test = matcher.test
        for item in values:
            if test(item):
                return True
    if why is not None:
        shown = json.dumps(values[0] if len(values) == 1 else values)
        why.append(f"{path}: {leaf.describe()} did not match {_clip(shown)}")
    return False


def _clip(text: str, limit: int = 80) -> str:
    return text if len(text) <= limit else text[:limit] + "…"


def _match_child(child: Leaf | Node, value: Any, path: str, why: list[str] | None) -> bool:
    if isinstance(child, Leaf):
        return _match_leaf(child, value, path, why)
    if isinstance(value, list) and value:
        if any(_match_child(child, item, path, None) for item in value):
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


def _root_getter(event: CloudEvent) -> Callable[[str, Any], Any]:
    return _Root(event).get


# -- the routing path: the same semantics as _match_node, compiled into closures -------------

Getter = Callable[[str, Any], Any]


def _fast_test(matcher: Matcher) -> Callable[[Any], bool]:
    if isinstance(matcher, Equals) and isinstance(matcher.value, str):
        text = matcher.value
        return lambda value: value == text  # only an equal str equals a str
    if isinstance(matcher, Numeric) and len(matcher.conditions) == 1:
        ((op, bound),) = matcher.conditions
        compare = _COMPARE[op]
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

    def nested(value: Any) -> bool:
        if isinstance(value, dict):
            return node(value.get)
        if isinstance(value, list) and value:
            return any(nested(item) for item in value)
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
    """``_fast_node`` for the event itself: attribute fields read without building a getter."""
    fields = tuple((key, _fast_child(child)) for key, child in node.fields)
    alternatives = tuple(_fast_node(alt) for alt in node.alternatives)

    def match(event: CloudEvent) -> bool:
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

    return match


@dataclass(frozen=True, slots=True)
class EventPatternFilter:
    """An EventBridge event pattern, compiled once (see the module docstring)."""

    root: Node
    source: Mapping[str, Any]
    matches: Callable[[CloudEvent], bool] = field(repr=False, compare=False)

    def matches_document(self, document: Mapping[str, Any]) -> bool:
        """Matches a plain JSON object (an EventBridge event as documented, for the table)."""
        return _match_node(self.root, document.get, "", None)

    def explain(self, event: CloudEvent, path: str) -> tuple[bool, list[str]]:
        """Whether it matches, and the term that decided (for ``triggers:test``)."""
        why: list[str] = []
        matched = _match_node(self.root, _root_getter(event), path, why)
        if matched:
            fields = ", ".join(key for key, _ in self.root.fields) or "$or"
            return True, [f"{path}: every field matched ({fields})"]
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
        inner = _compile_matcher(arg)
        assert isinstance(inner, (Affix, EqualsIgnoreCase, Wildcard))
        return AnythingBut(inner=inner)
    return AnythingBut(values=tuple(arg) if isinstance(arg, list) else (arg,))


# -- validation ----------------------------------------------------------------------------------


@dataclass
class _Budget:
    values: int = 0


def check(pattern: object, path: str, problems: list[Problem]) -> None:
    """Every problem with an event pattern, each with its path, appended to ``problems``."""
    if not isinstance(pattern, Mapping):
        problems.append(Problem(path, "must be an EventBridge event pattern (a JSON object)"))
        return
    try:
        size = len(json.dumps(pattern, separators=(",", ":"), ensure_ascii=False))
    except (TypeError, ValueError, RecursionError):
        problems.append(Problem(path, "must be JSON"))
        return
    if size > MAX_PATTERN_CHARS:
        problems.append(
            Problem(path, f"is {size} characters as compact JSON; at most {MAX_PATTERN_CHARS}")
        )
        return
    if not pattern:
        problems.append(Problem(path, "must name at least one field"))
        return
    budget = _Budget()
    combinations = _check_node(pattern, path, 1, budget, problems)
    if budget.values > MAX_PATTERN_VALUES:
        problems.append(Problem(path, f"has {budget.values} values; at most {MAX_PATTERN_VALUES}"))
    if combinations > MAX_OR_COMBINATIONS:
        problems.append(
            Problem(
                path,
                f"$or expands to {combinations} combinations; at most {MAX_OR_COMBINATIONS}",
            )
        )


def _check_node(
    node: Mapping[str, Any], path: str, depth: int, budget: _Budget, problems: list[Problem]
) -> int:
    """Checks ``node``; answers the number of plain patterns its ``$or`` branches expand to."""
    if depth > MAX_PATTERN_DEPTH:
        problems.append(Problem(path, f"nests deeper than {MAX_PATTERN_DEPTH} levels"))
        return 1
    combinations = 1
    for key, value in node.items():
        where = f"{path}.{key}"
        if not isinstance(key, str) or not key:
            problems.append(Problem(where, "field names must be non-empty strings"))
        elif key == "$or":
            combinations *= _check_or(value, where, depth, budget, problems)
        elif isinstance(value, Mapping):
            if not value:
                problems.append(Problem(where, "an object must name at least one field"))
            combinations *= _check_node(value, where, depth + 1, budget, problems)
        elif isinstance(value, list):
            _check_leaf(value, where, budget, problems)
        else:
            problems.append(
                Problem(where, "must be an array of values or matchers, or a nested object")
            )
    return combinations


def _check_or(
    value: object, path: str, depth: int, budget: _Budget, problems: list[Problem]
) -> int:
    if not isinstance(value, list) or len(value) < 2:
        problems.append(Problem(path, "must be an array of at least two patterns"))
        return 1
    total = 0
    for i, alternative in enumerate(value):
        where = f"{path}[{i}]"
        if not isinstance(alternative, Mapping) or not alternative:
            problems.append(Problem(where, "must be a non-empty pattern object"))
            continue
        total += _check_node(alternative, where, depth + 1, budget, problems)
    return max(total, 1)


def _check_leaf(values: list[Any], path: str, budget: _Budget, problems: list[Problem]) -> None:
    if not values:
        problems.append(Problem(path, "must list at least one value or matcher"))
    budget.values += len(values)
    for i, value in enumerate(values):
        where = f"{path}[{i}]"
        if isinstance(value, Mapping):
            _check_matcher(value, where, budget, problems)
        elif isinstance(value, list):
            problems.append(Problem(where, "arrays do not nest in a pattern"))
        else:
            _check_scalar(value, where, problems)


def _check_scalar(value: object, path: str, problems: list[Problem]) -> None:
    if value is None or isinstance(value, (str, bool)):
        return
    if not _is_number(value):
        problems.append(Problem(path, "must be a string, number, boolean or null"))
    elif not math.isfinite(float(value)) or abs(float(value)) > MAX_NUMBER:  # type: ignore[arg-type]
        problems.append(Problem(path, f"numbers must be between -{MAX_NUMBER} and {MAX_NUMBER}"))


def _string_or_ignore_case(arg: object, name: str, path: str, problems: list[Problem]) -> None:
    if isinstance(arg, Mapping):
        if set(arg) != {"equals-ignore-case"} or not isinstance(arg["equals-ignore-case"], str):
            problems.append(
                Problem(path, f'{name} takes a string or {{"equals-ignore-case": "..."}}')
            )
    elif not isinstance(arg, str):
        problems.append(Problem(path, f"{name} takes a string"))


def _check_matcher(
    matcher: Mapping[str, Any], path: str, budget: _Budget, problems: list[Problem]
) -> None:
    if len(matcher) != 1:
        problems.append(
            Problem(path, f"a matcher object has exactly one of: {', '.join(_OPERATORS)}")
        )
        return
    ((name, arg),) = matcher.items()
    where = f"{path}.{name}"
    if name not in _OPERATORS:
        problems.append(Problem(where, f"unknown matcher; known: {', '.join(_OPERATORS)}"))
    elif name in ("prefix", "suffix"):
        _string_or_ignore_case(arg, name, where, problems)
    elif name == "equals-ignore-case":
        texts = arg if isinstance(arg, list) else [arg]
        if not texts or not all(isinstance(t, str) for t in texts):
            problems.append(Problem(where, "takes a string or a non-empty array of strings"))
        budget.values += max(len(texts) - 1, 0)
    elif name == "wildcard":
        _check_wildcard(arg, where, problems)
    elif name == "numeric":
        _check_numeric(arg, where, problems)
    elif name == "exists":
        if not isinstance(arg, bool):
            problems.append(Problem(where, "takes true or false"))
    elif name == "cidr":
        _check_cidr(arg, where, problems)
    else:
        _check_anything_but(arg, where, budget, problems)


def _check_wildcard(arg: object, path: str, problems: list[Problem]) -> None:
    if not isinstance(arg, str):
        problems.append(Problem(path, "takes a string"))
        return
    segments = _wildcard_segments(arg)
    if len(segments) - 1 > MAX_WILDCARDS:
        problems.append(Problem(path, f"at most {MAX_WILDCARDS} '*' per wildcard"))
    if any(not s for s in segments[1:-1]):
        problems.append(Problem(path, "consecutive '*' are not allowed"))


def _check_numeric(arg: object, path: str, problems: list[Problem]) -> None:
    shape = "takes [op, number] or [lower-op, number, upper-op, number], op one of = > >= < <="
    if not isinstance(arg, list) or len(arg) not in (2, 4):
        problems.append(Problem(path, shape))
        return
    ops = arg[0::2]
    numbers = arg[1::2]
    if any(op not in _COMPARE for op in ops):
        problems.append(Problem(path, shape))
        return
    for number in numbers:
        if not _is_number(number):
            problems.append(Problem(path, "bounds must be numbers"))
            return
        _check_scalar(number, path, problems)
    if len(ops) == 2:
        lower, upper = ops
        if lower not in (">", ">=") or upper not in ("<", "<="):
            problems.append(Problem(path, "a range is a lower bound (> or >=) then an upper one"))
        elif numbers[0] >= numbers[1]:
            problems.append(Problem(path, "the lower bound must be below the upper bound"))


def _check_cidr(arg: object, path: str, problems: list[Problem]) -> None:
    if not isinstance(arg, str) or "/" not in arg:
        problems.append(Problem(path, 'takes a CIDR block such as "10.0.0.0/24"'))
        return
    try:
        ipaddress.ip_network(arg, strict=False)
    except ValueError as exc:
        problems.append(Problem(path, f"invalid CIDR block: {exc}"))


def _check_anything_but(arg: object, path: str, budget: _Budget, problems: list[Problem]) -> None:
    if isinstance(arg, Mapping):
        inner = ("prefix", "suffix", "equals-ignore-case", "wildcard")
        if len(arg) != 1 or next(iter(arg)) not in inner:
            problems.append(Problem(path, f"takes a value, a list, or one of: {', '.join(inner)}"))
            return
        ((name, value),) = arg.items()
        if name == "wildcard":
            _check_wildcard(value, f"{path}.wildcard", problems)
        elif name == "equals-ignore-case":
            _check_matcher(arg, path, budget, problems)
        elif not isinstance(value, str):
            problems.append(Problem(f"{path}.{name}", "takes a string"))
        return
    if isinstance(arg, list):
        budget.values += len(arg)
        if not arg:
            problems.append(Problem(path, "takes a non-empty list"))
        elif not (all(isinstance(v, str) for v in arg) or all(_is_number(v) for v in arg)):
            problems.append(Problem(path, "a list must hold only strings or only numbers"))
        for i, value in enumerate(arg):
            _check_scalar(value, f"{path}[{i}]", problems)
        return
    if isinstance(arg, (list, Mapping)):
        return
    _check_scalar(arg, path, problems)
