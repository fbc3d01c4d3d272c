"""CESQL unit tests, one table per operator family and built-in function (the TCK runs apart)."""

from __future__ import annotations

import re
import time
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chalicelib.core.cloudevents.event import CloudEvent
from chalicelib.core.filtering.cesql import CesqlParseError, evaluate, parse
from chalicelib.core.filtering.cesql.nodes import LikeMatcher

EVENT = CloudEvent(
    {
        "specversion": "1.0",
        "id": "e-1",
        "source": "https://example.com/src",
        "type": "com.example.order.created",
        "subject": "Order 42",
        "seq": "5",
        "count": 7,
        "flag": True,
        "word": "TrUe",
        "empty": "",
        "padded": " \t x y \u3000",
        "big": 2**40,
    }
)

Row = tuple[str, Any, set[str]]


def run(expression: str) -> tuple[Any, set[str]]:
    value, errors = evaluate(parse(expression), EVENT)
    return value, {e.kind for e in errors}


def check(expression: str, expected: Any, kinds: set[str]) -> None:
    value, found = run(expression)
    assert (type(value), value, found) == (type(expected), expected, kinds)


LITERALS: list[Row] = [
    ("0", 0, set()),
    ("+7", 7, set()),
    ("-2147483648", -(2**31), set()),
    ("2147483647", 2**31 - 1, set()),
    ("TrUe", True, set()),
    ("false", False, set()),
    ("'it\\'s'", "it's", set()),
    ('"say \\"hi\\""', 'say "hi"', set()),
    ("'keeps \\n and \\% as written'", "keeps \\n and \\% as written", set()),
    ("'unicode ✓'", "unicode ✓", set()),
]

ATTRIBUTES: list[Row] = [
    ("id", "e-1", set()),
    ("ID", "e-1", set()),
    ("count", 7, set()),
    ("flag", True, set()),
    ("big", str(2**40), set()),  # outside 32 bits: represented as String
    ("nope", False, {"missingAttribute"}),
    ("EXISTS subject", True, set()),
    ("EXISTS nope", False, set()),
    ("NOT EXISTS nope", True, set()),
    ("EXISTS empty", True, set()),
]

ARITHMETIC: list[Row] = [
    ("1 + 2 * 3", 7, set()),
    ("(1 + 2) * 3", 9, set()),
    ("10 - 2 - 3", 5, set()),  # left to right
    ("7 / 2", 3, set()),
    ("-7 / 2", -3, set()),  # towards zero
    ("7 / -2", -3, set()),
    ("-7 % 3", -1, set()),  # sign of x
    ("7 % -3", 1, set()),
    ("1 / 0", 0, {"math"}),
    ("1 % 0", 0, {"math"}),
    ("seq * 2", 10, set()),
    ("count + TRUE", 8, set()),
    ("'x' + 1", 1, {"cast"}),
    ("nope + 1", 0, {"missingAttribute"}),
    ("2147483647 + 1", 2**31 - 1, {"math"}),  # saturates, like ABS
    ("-2147483648 - 1", -(2**31), {"math"}),
    ("65536 * 65536", 2**31 - 1, {"math"}),
    ("-2147483648 / -1", 2**31 - 1, {"math"}),
    ("-(-2147483648)", 2**31 - 1, {"math"}),
    ("--5", 5, set()),
    ("-'5'", -5, set()),
    ("'99999999999' + 0", 0, {"cast"}),
    ("big + 0", 0, {"cast"}),
    ("4 -1", 3, set()),
]

COMPARISON: list[Row] = [
    ("1 < 2", True, set()),
    ("2 <= 2", True, set()),
    ("3 > 4", False, set()),
    ("3 >= 4", False, set()),
    ("seq < 10", True, set()),  # '5' cast to Integer, not compared as text
    ("'10' > '9'", True, set()),
    ("'a' < 1", True, {"cast"}),  # the failed cast reads as 0
    ("1 = 1", True, set()),
    ("1 <> 1", False, set()),
    ("1 != 2", True, set()),
    ("seq = 5", True, set()),
    ("5 = seq", True, set()),
    ("count = '7'", True, set()),
    ("count = '07'", False, set()),  # the right operand's type (String) wins
    ("'07' = count", True, set()),
    ("flag = 'true'", True, set()),
    ("word = TRUE", True, set()),
    ("TRUE = word", False, set()),
    ("'abc' = 1", False, {"cast"}),
    ("1 = TRUE", False, {"cast"}),  # no implicit Integer -> Boolean
    ("type = 'com.example.order.created'", True, set()),
    ("type = 'COM.example.order.created'", False, set()),
    ("nope = ''", False, {"missingAttribute"}),
    ("nope != ''", False, {"missingAttribute"}),
]

LOGIC: list[Row] = [
    ("true AND false", False, set()),
    ("true OR false", True, set()),
    ("true XOR true", False, set()),
    ("false XOR true", True, set()),
    ("NOT false", True, set()),
    ("NOT NOT true", True, set()),
    ("NOT 'false'", True, set()),
    ("NOT 'maybe'", True, {"cast"}),
    ("'true' AND 'TRUE'", True, set()),
    ("false AND nope", False, set()),  # short-circuit: nope never looked up
    ("true OR nope", True, set()),
    ("nope AND true", False, {"missingAttribute"}),
    ("nope OR true", False, {"missingAttribute"}),
    ("true XOR nope", False, {"missingAttribute"}),
    ("1 AND true", False, {"cast"}),
    # AND/OR/XOR share one precedence level and group left to right (spec §3.6).
    ("true OR true AND false", False, set()),
    ("false AND false OR true", True, set()),
    ("true OR (true AND false)", True, set()),
    # Unary NOT binds tighter than comparisons: (NOT 'true') = false.
    ("NOT 'true' = false", True, set()),
    ("NOT (1 = 2)", True, set()),
]

LIKE: list[Row] = [
    ("type LIKE 'com.example.%'", True, set()),
    ("type LIKE '%.created'", True, set()),
    ("type LIKE 'com._xample%'", True, set()),
    ("type NOT LIKE 'com.%'", False, set()),
    ("'a%b' LIKE 'a\\%b'", True, set()),
    ("'axb' LIKE 'a\\%b'", False, set()),
    ("'a_b' LIKE 'a\\_b'", True, set()),
    ("'a.b' LIKE 'a.b'", True, set()),  # regex metacharacters are literal
    ("'aXb' LIKE 'a.b'", False, set()),
    ("'a\nb' LIKE 'a_b'", True, set()),
    ("'' LIKE '%'", True, set()),
    ("'' LIKE '_'", False, set()),
    ("'ABC' LIKE 'abc'", False, set()),
    ("count LIKE '7'", True, set()),
    ("flag LIKE 'tr%'", True, set()),
    ("nope LIKE '%'", False, {"missingAttribute"}),
    ("'x' LIKE 'x' = true", True, set()),
]

IN: list[Row] = [
    ("1 IN (1, 2)", True, set()),
    ("3 NOT IN (1, 2)", True, set()),
    ("seq IN (5, 6)", True, set()),  # the left type (String) is the target: 5 -> '5'
    ("count IN ('07')", True, set()),  # Integer target: '07' -> 7
    ("seq IN ('5', '6')", True, set()),
    ("count IN ('7', 'x')", True, {"cast"}),
    ("flag IN ('TRUE')", True, set()),
    ("'5' IN (4 + 1)", True, set()),
    ("type IN (source, id)", False, set()),
    ("nope IN (1)", False, {"missingAttribute"}),
    ("1 IN (nope, 1)", False, {"missingAttribute"}),
]

STRING_FUNCTIONS: list[Row] = [
    ("LENGTH('héllo')", 5, set()),
    ("LENGTH(count)", 1, set()),
    ("length(nope)", 0, {"missingAttribute"}),
    ("CONCAT()", "", set()),
    ("CONCAT('a', 1, TRUE)", "a1true", set()),
    ("CONCAT_WS('-', 'a', 'b')", "a-b", set()),
    ("CONCAT_WS('-')", "", set()),
    ("LOWER('ÀB')", "àb", set()),
    ("UPPER(type)", "COM.EXAMPLE.ORDER.CREATED", set()),
    ("TRIM(padded)", "x y", set()),
    ("TRIM('\x1fa\x1f')", "\x1fa\x1f", set()),  # control characters are not whitespace
    ("LEFT('abc', 0)", "", set()),
    ("LEFT('abc', 2)", "ab", set()),
    ("LEFT('abc', -1)", "abc", {"functionEvaluation"}),
    ("RIGHT('abc', 0)", "", set()),
    ("RIGHT('abc', 1)", "c", set()),
    ("RIGHT('abc', 5)", "abc", set()),
    ("RIGHT('abc', -1)", "abc", {"functionEvaluation"}),
    ("LEFT('abc', 'x')", "", {"cast"}),
    ("SUBSTRING('abc', 3)", "c", set()),
    ("SUBSTRING('abc', 4)", "", {"functionEvaluation"}),
    ("SUBSTRING('abc', -3)", "abc", set()),
    ("SUBSTRING('abc', -4)", "", {"functionEvaluation"}),
    ("SUBSTRING('abc', 2, 0)", "", set()),
    ("SUBSTRING('abc', 2, 100)", "bc", set()),
    ("SUBSTRING('abc', 1, -1)", "", {"functionEvaluation"}),
    ("SUBSTRING('', 0)", "", set()),
]

MATH_AND_CASTING_FUNCTIONS: list[Row] = [
    ("ABS(-3)", 3, set()),
    ("ABS('-3')", 3, set()),
    ("ABS(-2147483648)", 2**31 - 1, {"math"}),
    ("INT('+12')", 12, set()),
    ("INT(' 12')", 0, {"cast"}),
    ("INT('1_000')", 0, {"cast"}),
    ("INT('١٢')", 0, {"cast"}),  # only ASCII digits
    ("INT('2147483648')", 0, {"cast"}),
    ("INT(flag)", 1, set()),
    ("BOOL(0)", False, set()),
    ("BOOL(-1)", True, set()),
    ("BOOL('False')", False, set()),
    ("BOOL('yes')", False, {"cast"}),
    ("STRING(-12)", "-12", set()),
    ("STRING(flag)", "true", set()),
    ("IS_INT('12')", True, set()),
    ("IS_INT('x')", False, set()),
    ("IS_INT(TRUE)", True, set()),
    ("IS_BOOL('FALSE')", True, set()),
    ("IS_BOOL(2)", True, set()),
    ("IS_BOOL('2')", False, set()),
    ("IS_STRING(1)", True, set()),
    ("is_int(seq)", True, set()),
    ("INT(hop) < INT(ttl)", False, {"missingAttribute"}),
    ("NOPE(1)", False, {"missingFunction"}),
    ("ABS(1, 2)", False, {"missingFunction"}),
    ("SUBSTRING('a')", False, {"missingFunction"}),
    ("NOPE(nope)", False, {"missingAttribute", "missingFunction"}),
    ("LENGTH(1 / 0)", 0, {"math"}),
]


def _params(rows: list[Row]) -> Any:
    return pytest.mark.parametrize(
        ("expression", "expected", "kinds"), rows, ids=[r[0] for r in rows]
    )


@_params(LITERALS)
def test_literals(expression: str, expected: Any, kinds: set[str]) -> None:
    check(expression, expected, kinds)


@_params(ATTRIBUTES)
def test_attribute_access_and_exists(expression: str, expected: Any, kinds: set[str]) -> None:
    check(expression, expected, kinds)


@_params(ARITHMETIC)
def test_arithmetic(expression: str, expected: Any, kinds: set[str]) -> None:
    check(expression, expected, kinds)


@_params(COMPARISON)
def test_comparison(expression: str, expected: Any, kinds: set[str]) -> None:
    check(expression, expected, kinds)


@_params(LOGIC)
def test_logic(expression: str, expected: Any, kinds: set[str]) -> None:
    check(expression, expected, kinds)


@_params(LIKE)
def test_like(expression: str, expected: Any, kinds: set[str]) -> None:
    check(expression, expected, kinds)


@_params(IN)
def test_in(expression: str, expected: Any, kinds: set[str]) -> None:
    check(expression, expected, kinds)


@_params(STRING_FUNCTIONS)
def test_string_functions(expression: str, expected: Any, kinds: set[str]) -> None:
    check(expression, expected, kinds)


@_params(MATH_AND_CASTING_FUNCTIONS)
def test_math_and_casting_functions(expression: str, expected: Any, kinds: set[str]) -> None:
    check(expression, expected, kinds)


PARSE_ERRORS: list[tuple[str, str]] = [
    ("", "empty expression at position 1"),
    ("   ", "empty expression"),
    ("1 +", "found end of expression at position 4"),
    ("(1 + 2", "expected ')'"),
    ("1 2", "found integer '2' at position 3"),
    ("'abc", "unterminated string literal at position 1"),
    ("a LIKE b", "the LIKE pattern must be a string literal"),
    ("a LIKE 1", "the LIKE pattern must be a string literal"),
    ("a NOT b", "expected LIKE or IN after NOT"),
    ("a IN 1", "'(' to open the IN set"),
    ("a IN ()", "expected a value"),
    ("EXISTS 1", "an attribute name after EXISTS"),
    ("EXISTS", "an attribute name after EXISTS"),
    ("2147483648", "outside the 32-bit signed range"),
    ("-2147483649", "outside the 32-bit signed range"),
    ("a_b = 1", "invalid identifier 'a_b'"),
    ("F1(2)", "invalid function name 'F1'"),
    ("a == b", "expected a value"),
    ("a = b;", "unexpected character ';' at position 6"),
    ("a ~ b", "unexpected character '~'"),
    ("ABC(", "found end of expression"),
    ("ABC(1,)", "expected a value"),
    ("+a", "expected an integer after '+'"),
    ("(" * 40 + "1" + ")" * 40, "nested deeper than"),
    ("NOT " * 70 + "true", "nested deeper than"),
    (" OR ".join(["true"] * 300), "nested deeper than 256"),
]


@pytest.mark.parametrize(
    ("expression", "message"), PARSE_ERRORS, ids=[p[0][:40] for p in PARSE_ERRORS]
)
def test_parse_errors_name_the_problem_and_position(expression: str, message: str) -> None:
    with pytest.raises(CesqlParseError) as caught:
        parse(expression)
    assert message in str(caught.value)
    assert isinstance(caught.value, ValueError)
    assert caught.value.kind == "parse"
    assert caught.value.position >= 1


@pytest.mark.parametrize(
    "expression",
    [
        "true",
        "int(hop) < int(ttl) and int(hop) < 1000",
        "(" * 20 + "1" + ")" * 20,
        " OR ".join(f"type = 't{i}'" for i in range(100)),
        "a\tAND\nb\r\nOR c",
        "LENGTH ( 'x' ) = 1",
    ],
)
def test_accepted_expressions(expression: str) -> None:
    assert parse(expression).source == expression


def test_expressions_are_reusable_and_do_not_mutate_the_event() -> None:
    expr = parse("CONCAT(id, '-', type) = 'e-1-com.example.order.created' AND nope = 1")
    before = dict(EVENT.attributes)
    first = evaluate(expr, EVENT)
    second = evaluate(expr, EVENT)
    assert first[0] is False and second[0] is False
    assert [e.kind for e in first[1]] == [e.kind for e in second[1]] == ["missingAttribute"]
    assert dict(EVENT.attributes) == before


def test_matches_requires_true_without_errors() -> None:
    assert parse("type LIKE 'com.%'").matches(EVENT)
    assert not parse("1").matches(EVENT)  # not a Boolean
    assert not parse("'true'").matches(EVENT)
    assert not parse("NOT 'maybe'").matches(EVENT)  # true, but with a CastError
    assert not parse("true XOR nope").matches(EVENT)


def _reference_like(pattern: str, text: str) -> bool:
    """LIKE as a backtracking regular expression: slow on purpose, obviously right."""
    out, i = [], 0
    while i < len(pattern):
        c = pattern[i]
        if c == "\\" and i + 1 < len(pattern) and pattern[i + 1] in "%_":
            out.append(re.escape(pattern[i + 1]))
            i += 2
            continue
        out.append(".*" if c == "%" else "." if c == "_" else re.escape(c))
        i += 1
    return re.fullmatch("".join(out), text, re.DOTALL) is not None


@settings(max_examples=1000, deadline=None)
@given(
    st.text(alphabet="ab%_\\\n", max_size=8),
    st.text(alphabet="ab%_\\\n", max_size=10),
)
def test_like_matcher_agrees_with_a_regular_expression(pattern: str, text: str) -> None:
    assert LikeMatcher(pattern).matches(text) is _reference_like(pattern, text)


def test_like_does_not_backtrack_on_hostile_patterns() -> None:
    e = CloudEvent(
        {"specversion": "1.0", "id": "1", "source": "s", "type": "t", "big": "a" * 200_000}
    )
    started = time.perf_counter()
    for pattern in ["%a%a%a%a%a%a%b", "%a_a%a_a%a_a%b", "%_%_%_%_%_%_b"]:
        assert evaluate(parse(f"big LIKE '{pattern}'"), e) == (False, [])
    assert time.perf_counter() - started < 1.0
