"""Kubernetes label selectors (``metav1.LabelSelector``): ``matchLabels`` and ``matchExpressions``
with the operators ``In``, ``NotIn``, ``Exists`` and ``DoesNotExist``, ANDed together. An empty
selector selects everything, as ``LabelSelectorAsSelector`` makes it. EventPolicies select the
brokers they apply to with one (``spec.to[].selector``)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from chalicelib.core.errors import Problem
from chalicelib.core.names import quote
from chalicelib.core.resources.fields import json_object, unknown_fields

OPERATORS: Final = ("In", "NotIn", "Exists", "DoesNotExist")
MAX_TERMS: Final = 64  # matchLabels entries, matchExpressions, values of one expression
# Kubernetes' label syntax: an optional DNS-subdomain prefix and a name of at most 63 characters;
# a value of at most 63 characters (empty allowed).
_NAME = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9]", re.ASCII)
_PREFIX = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*", re.ASCII)
_VALUE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9])?", re.ASCII)


@dataclass(frozen=True, slots=True)
class Requirement:
    key: str
    operator: str
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        value = labels.get(self.key)
        if self.operator == "In":
            return value is not None and value in self.values
        if self.operator == "NotIn":
            return value is None or value not in self.values
        if self.operator == "Exists":
            return value is not None
        return value is None  # DoesNotExist


@dataclass(frozen=True, slots=True)
class LabelSelector:
    match_labels: tuple[tuple[str, str], ...] = ()
    expressions: tuple[Requirement, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        return all(labels.get(k) == v for k, v in self.match_labels) and all(
            r.matches(labels) for r in self.expressions
        )

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {}
        if self.match_labels:
            doc["matchLabels"] = dict(self.match_labels)
        if self.expressions:
            doc["matchExpressions"] = [
                {
                    "key": r.key,
                    "operator": r.operator,
                    **({"values": list(r.values)} if r.values else {}),
                }
                for r in self.expressions
            ]
        return doc


def key_problem(key: object) -> str | None:
    if not isinstance(key, str) or not key:
        return "a label key is a non-empty string"
    prefix, _, name = key.rpartition("/")
    if "/" in key and (not prefix or len(prefix) > 253 or not _PREFIX.fullmatch(prefix)):
        return f"{quote(key)}: the prefix before '/' must be a DNS subdomain (≤ 253 characters)"
    if not _NAME.fullmatch(name):
        return (
            f"{quote(key)}: a label name is at most 63 letters, digits, '-', '_' or '.', "
            "starting and ending with a letter or digit"
        )
    return None


def value_problem(value: object) -> str | None:
    if not isinstance(value, str):
        return "a label value is a string"
    if not _VALUE.fullmatch(value):
        return (
            f"{quote(value)}: a label value is at most 63 letters, digits, '-', '_' or '.', "
            "starting and ending with a letter or digit (or empty)"
        )
    return None


def parse_selector(raw: Mapping[str, Any], path: str, problems: list[Problem]) -> LabelSelector:
    """The selector's ``matchLabels`` and ``matchExpressions`` from ``raw`` (other members are
    the caller's to check), with every problem."""
    labels: list[tuple[str, str]] = []
    raw_labels = json_object(raw.get("matchLabels"), f"{path}.matchLabels", problems)
    if len(raw_labels) > MAX_TERMS:
        problems.append(Problem(f"{path}.matchLabels", f"at most {MAX_TERMS} labels"))
        raw_labels = {}
    for key, value in raw_labels.items():
        where = f"{path}.matchLabels[{key}]"
        found = key_problem(key) or value_problem(value)
        if found:
            problems.append(Problem(where, found))
        else:
            labels.append((key, value))
    expressions: list[Requirement] = []
    raw_expressions = raw.get("matchExpressions")
    if raw_expressions is not None and not isinstance(raw_expressions, list):
        problems.append(Problem(f"{path}.matchExpressions", "must be a list"))
    elif raw_expressions is not None and len(raw_expressions) > MAX_TERMS:
        problems.append(Problem(f"{path}.matchExpressions", f"at most {MAX_TERMS} expressions"))
    else:
        for i, element in enumerate(raw_expressions or ()):
            found_requirement = _requirement(element, f"{path}.matchExpressions[{i}]", problems)
            if found_requirement is not None:
                expressions.append(found_requirement)
    return LabelSelector(tuple(labels), tuple(expressions))


def _requirement(element: object, path: str, problems: list[Problem]) -> Requirement | None:
    if not isinstance(element, Mapping):
        problems.append(Problem(path, "must be {key, operator, values}"))
        return None
    mark = len(problems)
    unknown_fields(element, ("key", "operator", "values"), path, problems)
    key, operator, values = element.get("key"), element.get("operator"), element.get("values")
    found = key_problem(key)
    if found:
        problems.append(Problem(f"{path}.key", found))
    if operator not in OPERATORS:
        problems.append(Problem(f"{path}.operator", f"must be one of {', '.join(OPERATORS)}"))
    if values is not None and not isinstance(values, list):
        problems.append(Problem(f"{path}.values", "must be a list of strings"))
        values = None
    values = values or []
    if len(values) > MAX_TERMS:
        problems.append(Problem(f"{path}.values", f"at most {MAX_TERMS} values"))
        values = []
    for j, value in enumerate(values):
        bad = value_problem(value)
        if bad:
            problems.append(Problem(f"{path}.values[{j}]", bad))
    if operator in ("In", "NotIn") and not values:
        problems.append(Problem(f"{path}.values", f"{operator} needs at least one value"))
    if operator in ("Exists", "DoesNotExist") and values:
        problems.append(Problem(f"{path}.values", f"{operator} takes no values"))
    if len(problems) > mark:
        return None
    return Requirement(str(key), str(operator), tuple(str(v) for v in values))
