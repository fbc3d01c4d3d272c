"""The bounds of a JSONata evaluation hold on every evaluation path (issue 31, item 3): inside
array and object constructors (which the library marks as parallel calls), inside a regular
expression, and inside built-ins that would run long or allocate in one call."""

from __future__ import annotations

import time
from typing import Any

import pytest
from jsonata import Jsonata

from chalicelib.core import transforms
from chalicelib.core.transforms import Limits, TransformError


def timed(expression: str, document: Any, bounded: Limits = Limits()) -> tuple[Any, float]:
    """The result (or the TransformError) and the seconds it took."""
    started = time.monotonic()
    try:
        result: Any = transforms.evaluate(expression, document, bounded)
    except TransformError as exc:
        result = exc
    return result, time.monotonic() - started


SLOW = '$count($split($pad("", 3000000), "").$uppercase($))'


@pytest.mark.parametrize(
    "expression",
    [
        f"[0, {SLOW}]",  # the issue's: held a delivery for 28 s
        f'{{"a": 0, "b": {SLOW}}}',  # an object constructor's later members
        f"[0, [0, {SLOW}]]",
        f"[0, 1].{SLOW}",
    ],
)
def test_constructor_items_after_the_first_are_bounded(expression: str) -> None:
    result, seconds = timed(expression, {}, Limits(timeout_ms=300))
    assert isinstance(result, TransformError), result
    assert seconds < 2.0


def test_depth_is_bounded_inside_an_array_constructor() -> None:
    recursive = "[0, ($f := function($x){ $x > 0 ? 1 + $f($x - 1) : 0 }; $f(%d))]"
    result, _ = timed(recursive % 100_000, {}, Limits(timeout_ms=60_000))
    assert isinstance(result, TransformError)
    assert "nests deeper than 300 steps" in str(result)


def test_a_catastrophic_regex_of_the_issue_is_fast() -> None:
    """``/(a+)+$/`` on 26 characters took 4.6 s with ``re`` (4x per 2 more characters)."""
    document = {"s": "a" * 26 + "!"}
    result, seconds = timed("$match(s, /(a+)+$/)", document, Limits(timeout_ms=1000))
    assert result is None  # no match
    assert seconds < 1.0


@pytest.mark.parametrize(
    "expression",
    [
        "$match(s, /(a|aa)+$/)",
        "$contains(s, /(a|aa)+$/)",
        '$replace(s, /(a|aa)+$/, "x")',
        "$split(s, /(a|aa)+$/)",
        "$exists(s ~> /(a|aa)+$/)",
    ],
)
def test_a_regex_that_backtracks_for_ever_stops_at_the_deadline(expression: str) -> None:
    document = {"s": "a" * 60 + "!"}  # the regex module too backtracks on this one
    result, seconds = timed(expression, document, Limits(timeout_ms=300))
    assert isinstance(result, TransformError)
    assert "ran longer than 300 ms (in the regular expression /(a|aa)+$/)" in str(result)
    assert seconds < 1.5


def test_an_invalid_regex_is_refused_at_put_naming_it() -> None:
    (problem,) = transforms.expression_problems('$match("a", /[b-a]/)', "spec.jsonata.expression")
    assert problem.field == "spec.jsonata.expression"
    assert problem.message == "has an invalid regular expression: bad character range at position 4"


@pytest.mark.parametrize(
    ("expression", "document"),
    [
        ('$match(s, /l(o)/).groups[0] & $replace(s, /(l)(o)/, "$2$1$3$12")', {"s": "hello"}),
        ('$split(s, /[, ]+/, 2) ~> $join("|")', {"s": "a, b  c,d"}),
        ('$replace(s, /L/i, "_", 2)', {"s": "hello world"}),
        ('$replace(s, /o/, "0", 0)', {"s": "foo"}),
        ("$contains(s, /^w/m)", {"s": "hello\nworld"}),
        ('$distinct([1, 1.0, true, "1", [1], [1], {"a": 1}, {"a": 1}, null, null])', {}),
        ("$distinct(xs)", {"xs": [3, 1, 3, 2, 1]}),
        ('$string({"a": [1, "x"]}, true)', {}),
        ('$join(["a", "b"], "-")', {}),
    ],
)
def test_bounded_functions_answer_as_the_library(expression: str, document: Any) -> None:
    assert transforms.evaluate(expression, document) == Jsonata(expression).evaluate(document)


def test_distinct_is_not_quadratic() -> None:
    result, seconds = timed("$count($distinct([1..200000]))", {}, Limits(timeout_ms=2000))
    assert result == 200_000  # the library's compares every pair: minutes
    assert seconds < 1.5


@pytest.mark.parametrize(
    ("expression", "reason"),
    [
        ('$join([1..10000].($$.s), "")', r"\$join would make 10000000000 characters"),
        ("$string([1..10000].($$.s))", r"\$string would make more than"),
        ('{"data": [1..10000].($$.s)}', "the transformed event is over"),
    ],
)
def test_references_to_one_big_string_are_not_written_out(expression: str, reason: str) -> None:
    """An array of ten thousand references to one 1 MB string costs nothing until it is
    written: 10 GB in one call of $join, $string or the result's encoding."""
    document = {"specversion": "1.0", "id": "1", "source": "/s", "type": "t", "s": "x" * 1_000_000}
    started = time.monotonic()
    with pytest.raises(TransformError, match=reason):
        if expression.startswith("{"):
            event = transforms.codec.from_json(
                {k: v for k, v in document.items() if k != "s"} | {"data": document["s"]}
            )
            transforms.apply(expression.replace("$$.s", "$$.data"), event, Limits(timeout_ms=5000))
        else:
            transforms.evaluate(expression, document, Limits(timeout_ms=5000))
    assert time.monotonic() - started < 5.0
