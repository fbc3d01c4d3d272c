"""The built-in CESQL functions (spec §3.5) and their dispatch by name and arity.

Arguments are cast to the parameter types before the call (spec §3.7); a function returns a value
of its return type even when it fails, plus the errors. ``ANY`` parameters are passed as they are.

Casting functions: ``INT``, ``BOOL`` and ``STRING`` are explicit casts (§3.7 table);
``IS_INT(x)``/``IS_BOOL(x)``/``IS_STRING(x)`` are true when the matching cast of ``x`` succeeds
without error (so ``IS_STRING`` is true for every value: every value has a String form).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from chalicelib.core.filtering.cesql.casting import (
    BOOLEAN,
    INT_MAX,
    INT_MIN,
    INTEGER,
    STRING,
    Value,
    to_boolean,
    to_integer,
    to_string,
)
from chalicelib.core.filtering.cesql.errors import CesqlError

ANY = "Any"

Impl = Callable[[Sequence[Value], list[CesqlError]], Value]


@dataclass(frozen=True, slots=True)
class Function:
    name: str
    params: tuple[str, ...]  # the fixed parameters' types
    variadic: str | None  # the type of the repeated trailing parameter, if any
    returns: str
    impl: Impl

    def accepts(self, arity: int) -> bool:
        if self.variadic is None:
            return arity == len(self.params)
        return arity >= len(self.params)

    def param_type(self, index: int) -> str:
        if index < len(self.params):
            return self.params[index]
        assert self.variadic is not None
        return self.variadic


# Unicode White_Space. Not str.isspace: it also accepts U+001C..U+001F, which TRIM must keep.
_WHITESPACE = (
    "\t\n\x0b\x0c\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009"
    "\u200a\u2028\u2029\u202f\u205f\u3000"
)


def _str(v: Value) -> str:
    assert isinstance(v, str)
    return v


def _int(v: Value) -> int:
    assert isinstance(v, int) and not isinstance(v, bool)
    return v


def _length(a: Sequence[Value], e: list[CesqlError]) -> Value:
    return len(_str(a[0]))


# The longest string a function may build (an event is at most a few MiB): without it nested
# CONCATs of a large attribute build gigabytes per event. Longer is an evaluation error.
MAX_RESULT_CHARS = 4 * 1024 * 1024


def _too_long(name: str, size: int, e: list[CesqlError]) -> bool:
    if size <= MAX_RESULT_CHARS:
        return False
    e.append(
        CesqlError(
            "functionEvaluation", f"{name}: the result would exceed {MAX_RESULT_CHARS} chars"
        )
    )
    return True


def _concat(a: Sequence[Value], e: list[CesqlError]) -> Value:
    if _too_long("CONCAT", sum(len(_str(x)) for x in a), e):
        return ""
    return "".join(_str(x) for x in a)


def _concat_ws(a: Sequence[Value], e: list[CesqlError]) -> Value:
    separator = _str(a[0])
    size = sum(len(_str(x)) for x in a[1:]) + len(separator) * max(len(a) - 2, 0)
    if _too_long("CONCAT_WS", size, e):
        return ""
    return separator.join(_str(x) for x in a[1:])


def _lower(a: Sequence[Value], e: list[CesqlError]) -> Value:
    return _str(a[0]).lower()


def _upper(a: Sequence[Value], e: list[CesqlError]) -> Value:
    return _str(a[0]).upper()


def _trim(a: Sequence[Value], e: list[CesqlError]) -> Value:
    return _str(a[0]).strip(_WHITESPACE)


def _left(a: Sequence[Value], e: list[CesqlError]) -> Value:
    text, count = _str(a[0]), _int(a[1])
    if count < 0:
        e.append(CesqlError("functionEvaluation", f"LEFT: negative length {count}"))
        return text
    return text[:count]


def _right(a: Sequence[Value], e: list[CesqlError]) -> Value:
    text, count = _str(a[0]), _int(a[1])
    if count < 0:
        e.append(CesqlError("functionEvaluation", f"RIGHT: negative length {count}"))
        return text
    return text[max(len(text) - count, 0) :]


def _substring(a: Sequence[Value], e: list[CesqlError]) -> Value:
    text, pos = _str(a[0]), _int(a[1])
    length = _int(a[2]) if len(a) == 3 else None
    if pos > len(text) or pos < -len(text):
        e.append(
            CesqlError("functionEvaluation", f"SUBSTRING: position {pos} is outside the string")
        )
        return ""
    if length is not None and length < 0:
        e.append(CesqlError("functionEvaluation", f"SUBSTRING: negative length {length}"))
        return ""
    if pos == 0:
        return ""
    start = pos - 1 if pos > 0 else len(text) + pos
    return text[start:] if length is None else text[start : start + length]


def _abs(a: Sequence[Value], e: list[CesqlError]) -> Value:
    number = _int(a[0])
    if number == INT_MIN:
        e.append(CesqlError("math", "ABS(-2147483648) overflows a 32-bit integer"))
        return INT_MAX
    return abs(number)


def _int_cast(a: Sequence[Value], e: list[CesqlError]) -> Value:
    return to_integer(a[0], e)


def _bool_cast(a: Sequence[Value], e: list[CesqlError]) -> Value:
    return to_boolean(a[0], e, implicit=False)


def _string_cast(a: Sequence[Value], e: list[CesqlError]) -> Value:
    return to_string(a[0])


def _is_int(a: Sequence[Value], e: list[CesqlError]) -> Value:
    probe: list[CesqlError] = []
    to_integer(a[0], probe)
    return not probe


def _is_bool(a: Sequence[Value], e: list[CesqlError]) -> Value:
    probe: list[CesqlError] = []
    to_boolean(a[0], probe, implicit=False)
    return not probe


def _is_string(a: Sequence[Value], e: list[CesqlError]) -> Value:
    return True


BUILTINS: tuple[Function, ...] = (
    Function("LENGTH", (STRING,), None, INTEGER, _length),
    Function("CONCAT", (), STRING, STRING, _concat),
    Function("CONCAT_WS", (STRING,), STRING, STRING, _concat_ws),
    Function("LOWER", (STRING,), None, STRING, _lower),
    Function("UPPER", (STRING,), None, STRING, _upper),
    Function("TRIM", (STRING,), None, STRING, _trim),
    Function("LEFT", (STRING, INTEGER), None, STRING, _left),
    Function("RIGHT", (STRING, INTEGER), None, STRING, _right),
    Function("SUBSTRING", (STRING, INTEGER), None, STRING, _substring),
    Function("SUBSTRING", (STRING, INTEGER, INTEGER), None, STRING, _substring),
    Function("ABS", (INTEGER,), None, INTEGER, _abs),
    Function("INT", (ANY,), None, INTEGER, _int_cast),
    Function("BOOL", (ANY,), None, BOOLEAN, _bool_cast),
    Function("STRING", (ANY,), None, STRING, _string_cast),
    Function("IS_INT", (ANY,), None, BOOLEAN, _is_int),
    Function("IS_BOOL", (ANY,), None, BOOLEAN, _is_bool),
    Function("IS_STRING", (ANY,), None, BOOLEAN, _is_string),
)


def resolve(name: str, arity: int) -> Function | None:
    """The overload of ``name`` for ``arity`` arguments: a fixed-arity one first, else the
    variadic one (spec §3.5 guarantees at most one candidate of each kind)."""
    variadic: Function | None = None
    for fn in BUILTINS:
        if fn.name != name or not fn.accepts(arity):
            continue
        if fn.variadic is None:
            return fn
        variadic = fn
    return variadic
