"""eventPattern matching is bounded (issue 31, item 4): data nested deeper than the JSON limit is
no match (never a RecursionError), and an event has a work budget across its patterns; and the
matchers agree with AWS's own (aws/event-ruler, issue 31, item 9)."""

from __future__ import annotations

import logging
import time
from typing import Any

import pytest

from chalicelib.core.cloudevents.event import CloudEvent
from chalicelib.core.filtering import event_pattern
from chalicelib.core.filtering.explain import explain
from chalicelib.core.filtering.filters import build_filter, validate_filters
from chalicelib.core.limits import MAX_PATTERN_WORK


def with_data(data: Any, id_: str = "1") -> CloudEvent:
    # Built directly, as an archived or replayed event is: decoding refuses such data (tested
    # at ingress), the matcher must still hold.
    return CloudEvent({"specversion": "1.0", "id": id_, "source": "s", "type": "t"}, None, data)


def nested(levels: int, inner: Any) -> Any:
    for _ in range(levels):
        inner = [inner]
    return inner


PATTERNS = [
    {"data": ["x"]},
    {"data": [{"prefix": "x"}]},
    {"data": {"a": ["x"]}},
    {"data": {"a": [{"exists": False}]}},
    {"$or": [{"data": ["x"]}, {"data": {"a": ["x"]}}]},
]


@pytest.mark.parametrize("pattern", PATTERNS, ids=range(len(PATTERNS)))
def test_data_nested_900_arrays_deep_is_no_match(pattern: dict[str, Any]) -> None:
    """The issue's: 900 nested arrays answered 500 (RecursionError in the matcher)."""
    compiled = event_pattern.compile_pattern(pattern)
    deep = nested(900, "x")
    assert compiled.matches(with_data(deep)) is False
    assert compiled.matches_document({"data": deep}) is False
    matched, reasons = compiled.explain(with_data(deep), "p")
    assert matched is False and reasons


def test_data_within_the_depth_limit_still_matches() -> None:
    compiled = event_pattern.compile_pattern({"data": ["x"]})
    assert compiled.matches(with_data(nested(60, "x"))) is True
    assert event_pattern.compile_pattern({"data": {"a": ["x"]}}).matches(
        with_data(nested(60, {"a": "x"}))
    )


def test_a_large_or_over_a_huge_array_stops_at_the_budget(caplog: pytest.LogCaptureFixture) -> None:
    """The issue's: a 140-alternative $or over a 1.3 M-element data array took 25 s."""
    pattern = {"data": {"$or": [{"k": [-i]} for i in range(1, 141)]}}
    assert validate_filters(None, [{"eventPattern": pattern}]) == []
    compiled = build_filter(None, [{"eventPattern": pattern}])
    event = with_data([{"k": i} for i in range(1_300_000)], id_="huge-1")
    before = event_pattern.overruns()
    started = time.monotonic()
    with caplog.at_level(logging.WARNING, logger=event_pattern.__name__):
        assert compiled.matches(event) is False
    assert time.monotonic() - started < 2.0
    assert event_pattern.overruns() == before + 1
    assert "'huge-1'" in caplog.text and str(MAX_PATTERN_WORK) in caplog.text
    # The budget is the event's, across its patterns: the next pattern gets none of it back.
    scalar = build_filter(None, [{"eventPattern": {"data": {"k": [0]}}}])
    assert scalar.matches(event) is False
    assert event_pattern.overruns() == before + 1  # counted once per event


def test_scalar_arrays_are_charged_too() -> None:
    pattern = {"$or": [{"data": [-i]} for i in range(1, 141)]}
    compiled = event_pattern.compile_pattern(pattern)
    started = time.monotonic()
    assert compiled.matches(with_data(list(range(1_300_000)))) is False
    assert time.monotonic() - started < 2.0
    small = [*range(1000), -140]
    assert compiled.matches(with_data(small)) is True  # well within the budget


def test_the_filter_test_call_says_the_budget_stopped_it() -> None:
    pattern = {"data": {"k": ["nope"]}}
    matched, reasons = explain(
        None, [{"eventPattern": pattern}], with_data(nested(1, [{"k": 1}] * 1_100_000))
    )
    assert matched is False
    assert reasons == [event_pattern.BUDGET_REASON]


# ---- AWS's semantics (aws/event-ruler) -------------------------------------------------------


@pytest.mark.parametrize(
    ("matcher", "value", "expected"),
    [
        ({"prefix": {"equals-ignore-case": "straße"}}, "STRASSE-1", True),
        ({"prefix": {"equals-ignore-case": "STRASSE"}}, "straße-1", True),
        ({"prefix": {"equals-ignore-case": "ﬁle"}}, "FILE.txt", True),
        ({"prefix": {"equals-ignore-case": "file"}}, "ﬁle.txt", True),
        ({"suffix": {"equals-ignore-case": "STRASSE"}}, "Hauptstraße", True),
        ({"suffix": {"equals-ignore-case": ".TXT"}}, "ﬁle.txt", True),
        ({"prefix": {"equals-ignore-case": "straße"}}, "STRAS", False),
        ({"suffix": {"equals-ignore-case": "x"}}, "", False),
        ({"equals-ignore-case": "straße"}, "STRASSE", True),
        (
            {"anything-but": {"equals-ignore-case": ["STRASSE", "b"]}},
            "straße",
            False,
        ),
        ({"anything-but": {"equals-ignore-case": ["a", "b"]}}, "C", True),
        ({"anything-but": {"prefix": ["a", "b"]}}, "bx", False),
        ({"anything-but": {"prefix": ["a", "b"]}}, "cx", True),
        ({"anything-but": {"suffix": ["a", "b"]}}, "xb", False),
        ({"anything-but": {"wildcard": ["a*", "*z"]}}, "xyz", False),
        ({"anything-but": {"wildcard": ["a*", "*z"]}}, "xy", True),
    ],
)
def test_matchers_agree_with_event_ruler(
    matcher: dict[str, Any], value: str, expected: bool
) -> None:
    pattern = {"data": [matcher]}
    assert validate_filters(None, [{"eventPattern": pattern}]) == []
    assert event_pattern.compile_pattern(pattern).matches(with_data(value)) is expected


@pytest.mark.parametrize(
    ("matcher", "field", "message"),
    [
        ({"equals-ignore-case": ["a", "b"]}, ".data[0].equals-ignore-case", "takes a string"),
        (
            {"anything-but": {"prefix": ""}},
            ".data[0].anything-but.prefix",
            "an anything-but prefix must not be empty",
        ),
        (
            {"anything-but": {"suffix": ["a", ""]}},
            ".data[0].anything-but.suffix[1]",
            "an anything-but suffix must not be empty",
        ),
        (
            {"anything-but": {"prefix": []}},
            ".data[0].anything-but.prefix",
            "takes a string or a non-empty list of strings",
        ),
        (
            {"anything-but": {"equals-ignore-case": [1]}},
            ".data[0].anything-but.equals-ignore-case",
            "takes a string or a non-empty list of strings",
        ),
        (
            {"anything-but": {"wildcard": ["a**"]}},
            ".data[0].anything-but.wildcard[0]",
            "consecutive '*' are not allowed",
        ),
    ],
)
def test_what_event_ruler_refuses_is_refused(
    matcher: dict[str, Any], field: str, message: str
) -> None:
    problems = validate_filters(None, [{"eventPattern": {"data": [matcher]}}], path="")
    assert [(p.field.split("eventPattern", 1)[1], p.message) for p in problems] == [
        (field, message)
    ]
