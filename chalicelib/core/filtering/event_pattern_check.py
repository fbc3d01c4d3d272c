"""Checking an ``eventPattern`` at create time (``event_pattern``'s rules and limits): every
problem at once, each named by its path. Where EventBridge (aws/event-ruler's
``JsonRuleCompiler``) refuses a pattern, so does this: a list under ``equals-ignore-case``
(allowed only under ``anything-but``), an empty ``anything-but`` prefix or suffix, a list mixing
strings and numbers, consecutive wildcards."""

from __future__ import annotations

import ipaddress
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from chalicelib.core.errors import Problem
from chalicelib.core.filtering.event_pattern_matchers import COMPARE, is_number, wildcard_segments
from chalicelib.core.limits import (
    MAX_OR_COMBINATIONS,
    MAX_PATTERN_CHARS,
    MAX_PATTERN_DEPTH,
    MAX_PATTERN_VALUES,
    MAX_WILDCARDS,
)

MAX_NUMBER: Final = 5.0e9
OPERATORS: Final = (
    "prefix",
    "suffix",
    "equals-ignore-case",
    "anything-but",
    "numeric",
    "exists",
    "wildcard",
    "cidr",
)


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
    if not is_number(value):
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
            Problem(path, f"a matcher object has exactly one of: {', '.join(OPERATORS)}")
        )
        return
    ((name, arg),) = matcher.items()
    where = f"{path}.{name}"
    if name not in OPERATORS:
        problems.append(Problem(where, f"unknown matcher; known: {', '.join(OPERATORS)}"))
    elif name in ("prefix", "suffix"):
        _string_or_ignore_case(arg, name, where, problems)
    elif name == "equals-ignore-case":
        if not isinstance(arg, str):  # as EventBridge: a list only under anything-but
            problems.append(Problem(where, "takes a string"))
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
    segments = wildcard_segments(arg)
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
    if any(op not in COMPARE for op in ops):
        problems.append(Problem(path, shape))
        return
    for number in numbers:
        if not is_number(number):
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
        where = f"{path}.{name}"
        texts = value if isinstance(value, list) else [value]
        budget.values += len(texts)
        if not texts or not all(isinstance(t, str) for t in texts):
            problems.append(Problem(where, "takes a string or a non-empty list of strings"))
            return
        for i, text in enumerate(texts):
            at = where if value is text else f"{where}[{i}]"
            if name == "wildcard":
                _check_wildcard(text, at, problems)
            elif name in ("prefix", "suffix") and not text:
                # EventBridge refuses it too ("Null prefix/suffix not allowed"): it would
                # exclude every string.
                problems.append(Problem(at, f"an anything-but {name} must not be empty"))
        return
    if isinstance(arg, list):
        budget.values += len(arg)
        if not arg:
            problems.append(Problem(path, "takes a non-empty list"))
        elif not (all(isinstance(v, str) for v in arg) or all(is_number(v) for v in arg)):
            problems.append(Problem(path, "a list must hold only strings or only numbers"))
        for i, value in enumerate(arg):
            _check_scalar(value, f"{path}[{i}]", problems)
        return
    _check_scalar(arg, path, problems)
