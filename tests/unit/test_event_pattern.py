"""The eventPattern dialect: EventBridge's documented examples as a table, the CloudEvent mapping
(attributes as canonical text, JSON data under ``data``), validation, index hints, reasons."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from chalicelib.core.cloudevents.event import CloudEvent
from chalicelib.core.errors import ValidationError
from chalicelib.core.filtering import event_pattern
from chalicelib.core.filtering.filters import build_filter, index_hints, validate_filters

TABLE: list[dict[str, Any]] = json.loads(
    (Path(__file__).parent / "data" / "eventbridge_patterns.json").read_text()
)


def test_table_is_large_and_balanced() -> None:
    assert len(TABLE) >= 60
    assert {case["match"] for case in TABLE} == {True, False}
    assert len({case["name"] for case in TABLE}) == len(TABLE)


@pytest.mark.parametrize("case", TABLE, ids=[case["name"] for case in TABLE])
def test_eventbridge_documented_examples(case: dict[str, Any]) -> None:
    assert validate_filters(None, [{"eventPattern": case["pattern"]}]) == []
    compiled = event_pattern.compile_pattern(case["pattern"])
    assert compiled.matches_document(case["event"]) is case["match"]


@pytest.mark.parametrize("case", TABLE, ids=[case["name"] for case in TABLE])
def test_examples_hold_under_data_of_a_cloudevent(case: dict[str, Any]) -> None:
    event = CloudEvent(
        {"specversion": "1.0", "id": "1", "source": "s", "type": "t"}, None, case["event"]
    )
    assert (
        build_filter(None, [{"eventPattern": {"data": case["pattern"]}}]).matches(event)
        is (case["match"])
    )
    matched, reasons = event_pattern.compile_pattern({"data": case["pattern"]}).explain(event, "p")
    assert matched is case["match"] and reasons


ATTRS = {
    "specversion": "1.0",
    "id": "e-1",
    "source": "https://example.com/orders",
    "type": "com.example.order.created",
    "sequence": 5,
    "flag": True,
}

CLOUDEVENT_CASES: list[tuple[dict[str, Any], CloudEvent, bool]] = [
    ({"type": ["com.example.order.created"]}, CloudEvent(ATTRS), True),
    (
        {"type": [{"prefix": "com.example."}], "source": [{"suffix": "/orders"}]},
        CloudEvent(ATTRS),
        True,
    ),
    ({"sequence": ["5"]}, CloudEvent(ATTRS), True),  # canonical text, as in binary mode
    ({"sequence": [5]}, CloudEvent(ATTRS), False),
    ({"flag": ["true"]}, CloudEvent(ATTRS), True),
    ({"subject": [{"exists": False}]}, CloudEvent(ATTRS), True),
    (
        {"data": {"amount": [{"numeric": [">", 100]}]}},
        CloudEvent(ATTRS, None, {"amount": 150}),
        True,
    ),
    (
        {"data": {"amount": [{"numeric": [">", 100]}]}},
        CloudEvent(ATTRS, None, {"amount": 42}),
        False,
    ),
    # JSON bytes with a JSON content type are read; other bytes have no JSON data.
    (
        {"data": {"amount": [150]}},
        CloudEvent({**ATTRS, "datacontenttype": "application/json"}, b'{"amount": 150}'),
        True,
    ),
    (
        {"data": {"amount": [150]}},
        CloudEvent({**ATTRS, "datacontenttype": "text/plain"}, b'{"amount": 150}'),
        False,
    ),
    ({"data": {"amount": [150]}}, CloudEvent(ATTRS, b'{"amount": 150}'), False),
    (
        {"data": {"amount": [150]}},
        CloudEvent({**ATTRS, "datacontenttype": "application/json"}, b"{nope"),
        False,
    ),
    (
        {"data": [{"exists": False}]},
        CloudEvent({**ATTRS, "datacontenttype": "text/plain"}, b"x"),
        True,
    ),
    ({"data": {"amount": [150]}}, CloudEvent(ATTRS), False),
]


@pytest.mark.parametrize(("pattern", "event", "expected"), CLOUDEVENT_CASES)
def test_cloudevent_json_form(pattern: dict[str, Any], event: CloudEvent, expected: bool) -> None:
    assert build_filter(None, [{"eventPattern": pattern}]).matches(event) is expected


INVALID: list[tuple[Any, str, str]] = [
    ([], "", "JSON object"),
    ({}, "", "at least one field"),
    ({"type": "x"}, ".type", "array of values"),
    ({"type": []}, ".type", "at least one value"),
    ({"type": [["x"]]}, ".type[0]", "do not nest"),
    ({"type": [{"prefix": 1}]}, ".type[0].prefix", "string"),
    ({"type": [{"bogus": 1}]}, ".type[0].bogus", "unknown matcher"),
    ({"type": [{"prefix": "a", "suffix": "b"}]}, ".type[0]", "exactly one"),
    ({"n": [{"numeric": [">", "1"]}]}, ".n[0].numeric", "numbers"),
    ({"n": [{"numeric": ["<", 5, ">", 1]}]}, ".n[0].numeric", "lower bound"),
    ({"n": [{"numeric": [">", 5, "<", 1]}]}, ".n[0].numeric", "below"),
    ({"n": [{"numeric": ["!", 5]}]}, ".n[0].numeric", "op one of"),
    ({"n": [6e9]}, ".n[0]", "between"),
    ({"n": [{"exists": "yes"}]}, ".n[0].exists", "true or false"),
    ({"ip": [{"cidr": "10.0.0.0"}]}, ".ip[0].cidr", "CIDR"),
    ({"ip": [{"cidr": "10.0.0.300/8"}]}, ".ip[0].cidr", "invalid CIDR"),
    ({"w": [{"wildcard": "a**b"}]}, ".w[0].wildcard", "consecutive"),
    ({"w": [{"wildcard": "*a*b*c*d*e*f*g*h*"}]}, ".w[0].wildcard", "at most 8"),
    ({"s": [{"anything-but": ["a", 1]}]}, ".s[0].anything-but", "only strings or"),
    ({"s": [{"anything-but": {"numeric": [">", 1]}}]}, ".s[0].anything-but", "one of"),
    ({"$or": [{"a": ["x"]}]}, ".$or", "at least two"),
    ({"$or": [{"a": ["x"]}, {}]}, ".$or[1]", "non-empty"),
    ({"a": {}}, ".a", "at least one field"),
    ({"a": ["x" * 2100]}, "", "at most 2048"),
    ({"a": list(range(300))}, "", "at most 256"),
]


@pytest.mark.parametrize(("pattern", "field", "fragment"), INVALID)
def test_invalid_patterns_are_named(pattern: Any, field: str, fragment: str) -> None:
    problems = validate_filters(None, [{"eventPattern": pattern}])
    field = f"spec.filters[0].eventPattern{field}"
    assert any(p.field == field and fragment in p.message for p in problems), problems
    with pytest.raises(ValidationError):
        build_filter(None, [{"eventPattern": pattern}])


def test_every_problem_is_reported_at_once() -> None:
    problems = validate_filters(
        None, [{"eventPattern": {"a": [], "b": [{"exists": 1}], "c": {"d": "x"}}}]
    )
    assert [p.field for p in problems] == [
        "spec.filters[0].eventPattern.a",
        "spec.filters[0].eventPattern.b[0].exists",
        "spec.filters[0].eventPattern.c.d",
    ]


def test_or_combinations_are_bounded() -> None:
    alternatives = [{f"f{j}": [str(j)]} for j in range(11)]
    pattern = {f"k{i}": {"$or": alternatives} for i in range(3)}  # 11**3 = 1331
    problems = validate_filters(None, [{"eventPattern": pattern}])
    assert any("1331 combinations" in p.message for p in problems), problems


def test_depth_is_bounded() -> None:
    pattern: dict[str, Any] = {"leaf": ["x"]}
    for _ in range(20):
        pattern = {"n": pattern}
    problems = validate_filters(None, [{"eventPattern": pattern}])
    assert any("deeper than 16" in p.message for p in problems), problems


HINTS: list[tuple[dict[str, Any], dict[str, frozenset[str]]]] = [
    ({"type": ["a", "b"]}, {"type": frozenset({"a", "b"})}),
    ({"type": ["a"], "source": ["s"]}, {"type": frozenset({"a"}), "source": frozenset({"s"})}),
    ({"type": ["a", {"prefix": "b"}]}, {}),  # not every value is exact
    ({"type": [5]}, {}),  # attributes are text: a number never matches one
    ({"data": {"type": ["a"]}}, {}),  # data is not indexed
    ({"$or": [{"type": ["a"]}, {"type": ["b"], "source": ["s"]}]}, {"type": frozenset({"a", "b"})}),
    ({"type": ["a", "b"], "$or": [{"type": ["a"]}, {"type": ["c"]}]}, {"type": frozenset({"a"})}),
    ({"$or": [{"type": ["a"]}, {"source": ["s"]}]}, {}),
]


@pytest.mark.parametrize(("pattern", "expected"), HINTS)
def test_exact_attribute_terms_feed_the_index(
    pattern: dict[str, Any], expected: dict[str, frozenset[str]]
) -> None:
    assert dict(index_hints(build_filter(None, [{"eventPattern": pattern}]))) == expected


def test_reasons_name_the_deciding_term() -> None:
    compiled = event_pattern.compile_pattern({"data": {"amount": [{"numeric": [">", 100]}]}})
    matched, reasons = compiled.explain(
        CloudEvent(ATTRS, None, {"amount": 42}), "filters[0].eventPattern"
    )
    assert not matched
    assert reasons == [
        'filters[0].eventPattern.data.amount: [{"numeric": [">", 100]}] did not match 42'
    ]
    matched, reasons = compiled.explain(CloudEvent(ATTRS, None, {"amount": 420}), "p")
    assert matched and reasons == ["p: every field matched (data)"]


def test_wildcard_is_linear_on_hostile_input() -> None:
    compiled = event_pattern.compile_pattern({"s": [{"wildcard": "*a*a*a*a*a*a*b"}]})
    assert not compiled.matches_document({"s": "a" * 200_000})


@pytest.mark.parametrize("matcher", ["prefix", "suffix", "equals-ignore-case"])
@pytest.mark.parametrize(("value", "expected"), [("ß", True), ("s", False), ("sS", True)])
def test_ignoring_case_prefix_suffix_and_equals_agree_on_a_whole_value(
    matcher: str, value: str, expected: bool
) -> None:
    # "ß" casefolds to "ss": a value equal to the text ignoring case is also its prefix and its
    # suffix, even where it is shorter than the text (a suffix used to refuse those).
    term = "SS" if matcher == "equals-ignore-case" else {"equals-ignore-case": "SS"}
    compiled = event_pattern.compile_pattern({"s": [{matcher: term}]})
    assert compiled.matches_document({"s": value}) is expected


@pytest.mark.parametrize(
    ("term", "value", "shown"),
    [
        ({"prefix": "ab"}, "zab", '{"prefix": "ab"}'),
        ({"suffix": "ab"}, "abz", '{"suffix": "ab"}'),
        (
            {"prefix": {"equals-ignore-case": "AB"}},
            "zab",
            '{"prefix": {"equals-ignore-case": "AB"}}',
        ),
        (
            {"suffix": {"equals-ignore-case": "AB"}},
            "abz",
            '{"suffix": {"equals-ignore-case": "AB"}}',
        ),
        ({"anything-but": {"suffix": "ab"}}, "zab", '{"anything-but": {"suffix": "ab"}}'),
    ],
)
def test_prefix_and_suffix_terms_are_shown_as_written(
    term: dict[str, Any], value: str, shown: str
) -> None:
    compiled = event_pattern.compile_pattern({"data": {"s": [term]}})
    matched, reasons = compiled.explain(CloudEvent(ATTRS, None, {"s": value}), "p")
    assert not matched
    assert reasons == [f'p.data.s: [{shown}] did not match "{value}"']
