"""Compiles a CESQL tree into nested closures, then evaluates them against event attributes.

Error semantics (spec §3.2, §3.3, and pinned by the TCK):

- A missing attribute evaluates to ``false`` (its type is unknown, so Boolean) plus a
  MissingAttributeError.
- An operator or function whose operand produced an error returns the zero value of its own
  return type without applying itself, so errors do not cascade (``1 / missing`` is ``0`` with only
  the MissingAttributeError; ``true AND (1 != 1 / 0)`` is ``false`` with a MathError).
- A failed cast yields the target type's zero value and the operation goes on (``NOT 10`` is
  ``true`` with a CastError).
- Evaluation always continues (complete evaluation mode), except where AND/OR short-circuit.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from chalicelib.core.cloudevents.event import ABSENT, CloudEvent
from chalicelib.core.filtering.cesql.casting import (
    BOOLEAN,
    INTEGER,
    STRING,
    Value,
    cast,
    fit_integer,
    from_attribute,
    to_boolean,
    to_integer,
    to_string,
    type_of,
    zero,
)
from chalicelib.core.filtering.cesql.errors import CesqlError
from chalicelib.core.filtering.cesql.functions import ANY, resolve
from chalicelib.core.filtering.cesql.nodes import (
    Attribute,
    Binary,
    Call,
    Constant,
    DataPath,
    Exists,
    In,
    Like,
    Node,
    Unary,
)
from chalicelib.core.filtering.event_data import data_at, integral

Attributes = Mapping[str, Any]
Compiled = Callable[[Attributes, list[CesqlError]], Value]


def compile_tree(node: Node) -> Compiled:
    if isinstance(node, Constant):
        return _constant(node.value)
    if isinstance(node, Attribute):
        return _attribute(node.name)
    if isinstance(node, DataPath):
        return _data(node.path, node.name)
    if isinstance(node, Exists):
        return _data_exists(node.path) if node.path is not None else _exists(node.name)
    if isinstance(node, Unary):
        return _unary(node.op, compile_tree(node.operand))
    if isinstance(node, Binary):
        return _binary(node.op, compile_tree(node.left), compile_tree(node.right))
    if isinstance(node, Like):
        return _like(node, compile_tree(node.operand))
    if isinstance(node, In):
        return _in(node, compile_tree(node.operand), [compile_tree(i) for i in node.items])
    if isinstance(node, Call):
        return _call(node.name, [compile_tree(a) for a in node.args])
    raise TypeError(f"unknown CESQL node {node!r}")


def _constant(value: Value) -> Compiled:
    def constant(attrs: Attributes, errors: list[CesqlError]) -> Value:
        return value

    return constant


def _attribute(name: str) -> Compiled:
    def attribute(attrs: Attributes, errors: list[CesqlError]) -> Value:
        value = attrs.get(name)
        if value is None:
            errors.append(CesqlError("missingAttribute", f"the event has no attribute {name!r}"))
            return False
        return value if type(value) is str else from_attribute(value)

    return attribute


class EventView(Mapping[str, Any]):
    """An event's attributes that also carry the event, for expressions that read ``data.``
    paths (the others get the plain attribute mapping: nothing changes on their path)."""

    __slots__ = ("_attrs", "event")

    def __init__(self, event: CloudEvent) -> None:
        self.event = event
        self._attrs = event.attributes

    def __getitem__(self, name: str) -> Any:
        return self._attrs[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._attrs)

    def __len__(self) -> int:
        return len(self._attrs)


def _read_data(attrs: Attributes, path: tuple[str, ...]) -> Any:
    return data_at(attrs.event, path) if isinstance(attrs, EventView) else ABSENT


def _data(path: tuple[str, ...], name: str) -> Compiled:
    # Typed as CESQL types its attributes' JSON values: a string is a String, a boolean a
    # Boolean, a number an Integer when it is whole and within 32 bits. Missing (or no JSON data
    # at all) is a MissingAttributeError, like a missing attribute: the term does not match.
    def data(attrs: Attributes, errors: list[CesqlError]) -> Value:
        value = _read_data(attrs, path)
        if value is ABSENT:
            errors.append(CesqlError("missingAttribute", f"the event has no JSON data at {name}"))
            return False
        if isinstance(value, (str, bool)):
            return value
        number = integral(value)
        if number is None:
            what = "null" if value is None else type(value).__name__
            errors.append(CesqlError("cast", f"{name} is {what}, not a String, Integer or Boolean"))
            return False
        return number

    return data


def _data_exists(path: tuple[str, ...]) -> Compiled:
    def exists(attrs: Attributes, errors: list[CesqlError]) -> Value:
        return _read_data(attrs, path) is not ABSENT

    return exists


def _exists(name: str) -> Compiled:
    def exists(attrs: Attributes, errors: list[CesqlError]) -> Value:
        return name in attrs

    return exists


def _unary(op: str, operand: Compiled) -> Compiled:
    if op == "NOT":

        def not_(attrs: Attributes, errors: list[CesqlError]) -> Value:
            mark = len(errors)
            value = operand(attrs, errors)
            if len(errors) != mark:
                return False
            return not to_boolean(value, errors)

        return not_

    def negate(attrs: Attributes, errors: list[CesqlError]) -> Value:
        mark = len(errors)
        value = operand(attrs, errors)
        if len(errors) != mark:
            return 0
        return fit_integer(-to_integer(value, errors), errors)

    return negate


def _divide(x: int, y: int, errors: list[CesqlError]) -> int:
    if y == 0:
        errors.append(CesqlError("math", "division by zero"))
        return 0
    quotient = abs(x) // abs(y)  # rounded towards zero
    return fit_integer(quotient if (x < 0) == (y < 0) else -quotient, errors)


def _modulo(x: int, y: int, errors: list[CesqlError]) -> int:
    if y == 0:
        errors.append(CesqlError("math", "modulo by zero"))
        return 0
    remainder = abs(x) % abs(y)  # the sign of x
    return -remainder if x < 0 else remainder


_ARITHMETIC: dict[str, Callable[[int, int, list[CesqlError]], int]] = {
    "+": lambda x, y, e: fit_integer(x + y, e),
    "-": lambda x, y, e: fit_integer(x - y, e),
    "*": lambda x, y, e: fit_integer(x * y, e),
    "/": _divide,
    "%": _modulo,
}

_ORDERING: dict[str, Callable[[int, int], bool]] = {
    "<": lambda x, y: x < y,
    "<=": lambda x, y: x <= y,
    ">": lambda x, y: x > y,
    ">=": lambda x, y: x >= y,
}


def _binary(op: str, left: Compiled, right: Compiled) -> Compiled:
    if op in ("AND", "OR"):
        return _short_circuit(op == "AND", left, right)

    if op == "XOR":

        def xor(attrs: Attributes, errors: list[CesqlError]) -> Value:
            mark = len(errors)
            x, y = left(attrs, errors), right(attrs, errors)
            if len(errors) != mark:
                return False
            return to_boolean(x, errors) != to_boolean(y, errors)

        return xor

    if op in ("=", "!=", "<>"):
        negated = op != "="

        def equality(attrs: Attributes, errors: list[CesqlError]) -> Value:
            mark = len(errors)
            x, y = left(attrs, errors), right(attrs, errors)
            if len(errors) != mark:
                return False
            # '=' is ambiguous: the right operand's type picks the definition (spec §3.7).
            equal = cast(x, type_of(y), errors) == y
            return equal != negated

        return equality

    if op in _ORDERING:
        compare = _ORDERING[op]

        def ordering(attrs: Attributes, errors: list[CesqlError]) -> Value:
            mark = len(errors)
            x, y = left(attrs, errors), right(attrs, errors)
            if len(errors) != mark:
                return False
            return compare(to_integer(x, errors), to_integer(y, errors))

        return ordering

    apply = _ARITHMETIC[op]

    def arithmetic(attrs: Attributes, errors: list[CesqlError]) -> Value:
        mark = len(errors)
        x, y = left(attrs, errors), right(attrs, errors)
        if len(errors) != mark:
            return 0
        return apply(to_integer(x, errors), to_integer(y, errors), errors)

    return arithmetic


def _short_circuit(is_and: bool, left: Compiled, right: Compiled) -> Compiled:
    # AND stops at a false left operand, OR at a true one (spec §3.4.2, §3.6).
    def logic(attrs: Attributes, errors: list[CesqlError]) -> Value:
        mark = len(errors)
        x = left(attrs, errors)
        if len(errors) != mark:
            if not is_and:
                right(attrs, errors)  # an errored left is false: OR still evaluates the right
            return False
        bx = to_boolean(x, errors)
        if bx != is_and:
            return bx
        mark = len(errors)
        y = right(attrs, errors)
        if len(errors) != mark:
            return False
        return to_boolean(y, errors)

    return logic


def _like(node: Like, operand: Compiled) -> Compiled:
    match = node.matcher.matches
    negated = node.negated

    def like(attrs: Attributes, errors: list[CesqlError]) -> Value:
        mark = len(errors)
        value = operand(attrs, errors)
        if len(errors) != mark:
            return False
        return match(to_string(value)) != negated

    return like


def _in(node: In, operand: Compiled, items: Sequence[Compiled]) -> Compiled:
    negated = node.negated

    def in_(attrs: Attributes, errors: list[CesqlError]) -> Value:
        mark = len(errors)
        x = operand(attrs, errors)
        values = [item(attrs, errors) for item in items]
        if len(errors) != mark:
            return False
        # The left operand's type is the target of every element's cast (spec §3.7).
        target = type_of(x)
        # Every element is cast (only AND and OR short-circuit), so cast errors do not depend on
        # the order of the set.
        found = [cast(v, target, errors) == x for v in values]
        return any(found) != negated

    return in_


def _call(name: str, args: Sequence[Compiled]) -> Compiled:
    fn = resolve(name, len(args))
    if fn is None:
        message = f"no function {name} taking {len(args)} argument(s)"

        def missing(attrs: Attributes, errors: list[CesqlError]) -> Value:
            for arg in args:
                arg(attrs, errors)
            errors.append(CesqlError("missingFunction", message))
            return False

        return missing

    types = [fn.param_type(i) for i in range(len(args))]
    empty = zero(fn.returns)
    impl = fn.impl

    def call(attrs: Attributes, errors: list[CesqlError]) -> Value:
        mark = len(errors)
        values = [arg(attrs, errors) for arg in args]
        if len(errors) != mark:
            return empty
        cast_values = [
            v if t == ANY else cast(v, t, errors) for v, t in zip(values, types, strict=True)
        ]
        return impl(cast_values, errors)

    return call


__all__ = ["BOOLEAN", "INTEGER", "STRING", "Compiled", "EventView", "compile_tree"]
