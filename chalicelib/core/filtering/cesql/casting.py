"""CESQL values and type casting (spec §3.1, §3.7).

Values are Python ``str``, ``int`` (always within 32 bits) and ``bool``; mind that ``bool`` is a
subclass of ``int``, so every type test here checks ``bool`` first. A failed cast appends a
``CastError`` and yields the zero value of the target type.

Implicit Integer -> Boolean is a CastError (the TCK's ``NOT 10`` is ``true`` plus a cast error),
while the explicit ``BOOL(10)`` is ``true``: the spec's cast table applies to explicit casts, and
the TCK pins the implicit case.
"""

from __future__ import annotations

import re
from typing import Final

from chalicelib.core.filtering.cesql.errors import CesqlError

Value = str | int | bool

INT_MIN: Final = -(2**31)
INT_MAX: Final = 2**31 - 1

STRING: Final = "String"
INTEGER: Final = "Integer"
BOOLEAN: Final = "Boolean"

_DECIMAL = re.compile(r"[+-]?[0-9]+\Z", re.ASCII)


def type_of(value: Value) -> str:
    if isinstance(value, bool):
        return BOOLEAN
    if isinstance(value, int):
        return INTEGER
    return STRING


_ZEROS: Final[dict[str, Value]] = {STRING: "", INTEGER: 0, BOOLEAN: False}


def zero(type_name: str) -> Value:
    return _ZEROS[type_name]


def to_string(value: Value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    return value


def to_integer(value: Value, errors: list[CesqlError]) -> int:
    if isinstance(value, bool):
        return 1 if value else 0
    if isinstance(value, int):
        return value
    if _DECIMAL.match(value):
        # An attribute may hold thousands of digits (int() refuses 4,300+): anything longer than
        # a 32-bit integer's 10 digits overflows without being converted.
        if len(value.lstrip("+-").lstrip("0")) > 10:
            errors.append(CesqlError("cast", f"{value[:20]!r}... overflows a 32-bit integer"))
            return 0
        number = int(value)
        if INT_MIN <= number <= INT_MAX:
            return number
        errors.append(CesqlError("cast", f"{value!r} overflows a 32-bit integer"))
        return 0
    errors.append(CesqlError("cast", f"cannot cast {value!r} to Integer"))
    return 0


def to_boolean(value: Value, errors: list[CesqlError], *, implicit: bool = True) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        if implicit:
            errors.append(CesqlError("cast", f"no implicit cast from Integer {value} to Boolean"))
            return False
        return value != 0
    lowered = value.lower()
    if lowered == "true":
        return True
    if lowered == "false":
        return False
    errors.append(CesqlError("cast", f"cannot cast {value!r} to Boolean"))
    return False


def cast(value: Value, type_name: str, errors: list[CesqlError], *, implicit: bool = True) -> Value:
    if type_name == STRING:
        return to_string(value)
    if type_name == INTEGER:
        return to_integer(value, errors)
    return to_boolean(value, errors, implicit=implicit)


def fit_integer(number: int, errors: list[CesqlError]) -> int:
    """Saturate a result to 32 bits, with a MathError (the rule the spec gives for ABS)."""
    if number > INT_MAX:
        errors.append(CesqlError("math", f"integer overflow: {number} > {INT_MAX}"))
        return INT_MAX
    if number < INT_MIN:
        errors.append(CesqlError("math", f"integer overflow: {number} < {INT_MIN}"))
        return INT_MIN
    return number


def from_attribute(value: object) -> Value:
    """An attribute value as a CESQL value: non-primitive types (and integers outside 32 bits,
    which CloudEvents does not allow) are represented as String (spec §3.2)."""
    if isinstance(value, (bool, str)):
        return value
    if isinstance(value, int) and INT_MIN <= value <= INT_MAX:
        return value
    return str(value)
