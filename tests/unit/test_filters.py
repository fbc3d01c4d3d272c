"""Trigger filters: one table per Filter class, the factory's rules, and create-time validation."""

from __future__ import annotations

from typing import Any

import pytest

from chalicelib.core.cloudevents.event import CloudEvent
from chalicelib.core.errors import Problem, ValidationError
from chalicelib.core.filtering import cesql
from chalicelib.core.filtering.filters import (
    AllFilter,
    AnyFilter,
    AttributesFilter,
    CesqlFilter,
    ExactFilter,
    Filter,
    MatchAll,
    NotFilter,
    PrefixFilter,
    SuffixFilter,
    attribute_text,
    build_filter,
    index_hints,
    validate_filters,
)

EVENT = CloudEvent(
    {
        "specversion": "1.0",
        "id": "e-1",
        "source": "https://example.com/orders",
        "type": "com.example.order.created",
        "subject": "",
        "datacontenttype": "Application/JSON; charset=utf-8",
        "schemaurl": "https://example.com/schema",
        "count": 42,
        "flag": True,
        "off": False,
    }
)
EVENT_10 = CloudEvent(
    {"specversion": "1.0", "id": "e-2", "source": "s", "type": "t", "dataschema": "urn:x"}
)


def items(**kwargs: str) -> tuple[tuple[str, str], ...]:
    return tuple(kwargs.items())


ATTRIBUTES_FILTER: list[tuple[dict[str, str], bool]] = [
    ({"type": "com.example.order.created"}, True),
    ({"type": "com.example.order.created", "source": "https://example.com/orders"}, True),
    ({"type": "com.example.order.created", "source": "nope"}, False),  # AND
    ({"type": "Com.example.order.created"}, False),  # case-sensitive
    ({"type": "com.example.order"}, False),  # exact, not prefix
    ({"type": ""}, True),  # "" = present and non-empty
    ({"subject": ""}, False),  # present but empty
    ({"missing": ""}, False),
    ({"missing": "x"}, False),
    ({"count": "42"}, True),  # canonical string form, not Go's never-match quirk
    ({"count": "042"}, False),
    ({"flag": "true"}, True),
    ({"flag": "True"}, False),
    ({"off": "false"}, True),
    ({"dataschema": "https://example.com/schema"}, True),  # alias of the 0.3 schemaurl
    ({"schemaurl": "https://example.com/schema"}, True),
    ({"datamediatype": "application/json"}, True),
    ({"specversion": "1.0"}, True),
]


@pytest.mark.parametrize(("attributes", "expected"), ATTRIBUTES_FILTER)
def test_attributes_filter(attributes: dict[str, str], expected: bool) -> None:
    assert AttributesFilter(tuple(attributes.items())).matches(EVENT) is expected


def test_schemaurl_alias_works_both_ways() -> None:
    assert AttributesFilter(items(schemaurl="urn:x")).matches(EVENT_10)
    assert ExactFilter(items(dataschema="urn:x")).matches(EVENT_10)
    assert attribute_text(EVENT_10.attributes, "datamediatype") is None


EXACT: list[tuple[dict[str, str], bool]] = [
    ({"type": "com.example.order.created"}, True),
    ({"type": "com.example.order.created", "id": "e-1"}, True),
    ({"type": "com.example.order.created", "id": "e-2"}, False),
    ({"type": "COM.EXAMPLE.ORDER.CREATED"}, False),
    ({"missing": "x"}, False),
    ({"count": "42"}, True),
    ({"flag": "true"}, True),
    ({"subject": "x"}, False),
]


@pytest.mark.parametrize(("attributes", "expected"), EXACT)
def test_exact_filter(attributes: dict[str, str], expected: bool) -> None:
    assert ExactFilter(tuple(attributes.items())).matches(EVENT) is expected


PREFIX: list[tuple[dict[str, str], bool]] = [
    ({"type": "com.example."}, True),
    ({"type": "com.example.order.created"}, True),  # the whole value is a prefix
    ({"type": "com.example.", "source": "https://"}, True),
    ({"type": "com.example.", "source": "http://"}, False),
    ({"type": "COM."}, False),
    ({"type": "com.example.order.created.more"}, False),
    ({"missing": "x"}, False),
    ({"count": "4"}, True),
    ({"flag": "tr"}, True),
]


@pytest.mark.parametrize(("attributes", "expected"), PREFIX)
def test_prefix_filter(attributes: dict[str, str], expected: bool) -> None:
    assert PrefixFilter(tuple(attributes.items())).matches(EVENT) is expected


SUFFIX: list[tuple[dict[str, str], bool]] = [
    ({"type": ".created"}, True),
    ({"type": "com.example.order.created"}, True),
    ({"type": ".created", "source": "/orders"}, True),
    ({"type": ".created", "source": "/invoices"}, False),
    ({"type": ".CREATED"}, False),
    ({"missing": "x"}, False),
    ({"count": "2"}, True),
    ({"off": "lse"}, True),
]


@pytest.mark.parametrize(("attributes", "expected"), SUFFIX)
def test_suffix_filter(attributes: dict[str, str], expected: bool) -> None:
    assert SuffixFilter(tuple(attributes.items())).matches(EVENT) is expected


YES: Filter = ExactFilter(items(id="e-1"))
NO: Filter = ExactFilter(items(id="e-2"))

COMPOSITES: list[tuple[str, Filter, bool]] = [
    ("all yes", AllFilter((YES,)), True),
    ("all yes yes", AllFilter((YES, YES)), True),
    ("all yes no", AllFilter((YES, NO)), False),
    ("any no yes", AnyFilter((NO, YES)), True),
    ("any no no", AnyFilter((NO, NO)), False),
    ("not yes", NotFilter(YES), False),
    ("not no", NotFilter(NO), True),
    ("not not yes", NotFilter(NotFilter(YES)), True),
    ("not missing", NotFilter(ExactFilter(items(missing="x"))), True),
    ("all any not", AllFilter((AnyFilter((NO, YES)), NotFilter(NO))), True),
    ("match all", MatchAll(), True),
]


@pytest.mark.parametrize(("name", "f", "expected"), COMPOSITES, ids=[c[0] for c in COMPOSITES])
def test_composite_filters(name: str, f: Filter, expected: bool) -> None:
    assert f.matches(EVENT) is expected


CESQL: list[tuple[str, bool]] = [
    ("type LIKE 'com.example.%'", True),
    ("type = 'com.example.order.created' AND count > 40", True),
    ("count = 42 AND flag", True),
    ("source LIKE '%/orders' OR missing = 'x'", True),
    ("missing = 'x' OR source LIKE '%/orders'", False),  # an error never passes
    ("1", False),  # not a Boolean
    ("'true'", False),
    ("NOT 'maybe'", False),  # true with a CastError
    ("EXISTS missing", False),
    ("NOT EXISTS missing", True),
]


@pytest.mark.parametrize(("expression", "expected"), CESQL)
def test_cesql_filter(expression: str, expected: bool) -> None:
    assert CesqlFilter(cesql.parse(expression)).matches(EVENT) is expected


# -- the factory -----------------------------------------------------------------------------


def test_build_filter_without_any_filter_matches_all() -> None:
    for attributes, filters in [(None, None), ({}, None), ({}, []), (None, [])]:
        assert isinstance(build_filter(attributes, filters), MatchAll)


def test_non_empty_filters_override_the_attributes_filter() -> None:
    f = build_filter({"type": "other"}, [{"exact": {"id": "e-1"}}])
    assert f.matches(EVENT)


def test_empty_filters_list_does_not_override_the_attributes_filter() -> None:
    assert not build_filter({"type": "other"}, []).matches(EVENT)
    assert build_filter({"type": "com.example.order.created"}, []).matches(EVENT)


def test_filters_list_is_an_and() -> None:
    assert build_filter(None, [{"exact": {"id": "e-1"}}, {"prefix": {"type": "com."}}]).matches(
        EVENT
    )
    assert not build_filter(None, [{"exact": {"id": "e-1"}}, {"suffix": {"type": "x"}}]).matches(
        EVENT
    )


def test_build_filter_builds_every_dialect() -> None:
    f = build_filter(
        None,
        [
            {
                "all": [
                    {"exact": {"type": "com.example.order.created"}},
                    {"any": [{"prefix": {"source": "nope"}}, {"suffix": {"source": "/orders"}}]},
                    {"not": {"cesql": "count < 10"}},
                ]
            }
        ],
    )
    assert f.matches(EVENT)
    assert not f.matches(EVENT.replace_attributes({"count": 5}))


def test_build_filter_rejects_invalid_filters_with_every_problem() -> None:
    with pytest.raises(ValidationError) as caught:
        build_filter({"Type": "x"}, [{"exact": {"type": ""}}, {"cesql": "type ="}])
    assert [p.field for p in caught.value.problems] == [
        "spec.filter.attributes.Type",
        "spec.filters[0].exact",
        "spec.filters[1].cesql",
    ]


# -- validation ------------------------------------------------------------------------------


def _nest(depth: int) -> dict[str, Any]:
    element: dict[str, Any] = {"exact": {"a": "b"}}
    for _ in range(depth):
        element = {"not": element}
    return element


KEY_MESSAGE = "must start with a lower-case letter"

INVALID: list[tuple[str, Any, Any, list[tuple[str, str]]]] = [
    ("upper-case key", {"SOURCE": "x"}, None, [("spec.filter.attributes.SOURCE", KEY_MESSAGE)]),
    ("mixed-case key", {"Source": "x"}, None, [("spec.filter.attributes.Source", KEY_MESSAGE)]),
    ("underscore key", {"s_pace_s": "x"}, None, [("spec.filter.attributes.s_pace_s", KEY_MESSAGE)]),
    ("digit-first key", {"123": "x"}, None, [("spec.filter.attributes.123", KEY_MESSAGE)]),
    ("emoji key", {"😊": "x"}, None, [("spec.filter.attributes.😊", KEY_MESSAGE)]),
    ("empty key", {"": "x"}, None, [("spec.filter.attributes.", KEY_MESSAGE)]),
    (
        "trailing newline key",
        {"type\n": "x"},
        None,
        [("spec.filter.attributes.type\n", KEY_MESSAGE)],
    ),
    ("non-string value", {"type": 5}, None, [("spec.filter.attributes.type", "must be a string")]),
    ("attributes not an object", ["type"], None, [("spec.filter.attributes", "must be an object")]),
    ("filters not a list", None, {"exact": {}}, [("spec.filters", "must be a list")]),
    ("filters a string", None, "exact", [("spec.filters", "must be a list")]),
    ("element not an object", None, ["exact"], [("spec.filters[0]", "must be a filter object")]),
    ("no dialect", None, [{}], [("spec.filters[0]", "exactly one dialect")]),
    (
        "two dialects",
        None,
        [{"exact": {"type": "a"}, "suffix": {"type": "b"}}],
        [("spec.filters[0]", "multiple dialects found (exact, suffix)")],
    ),
    (
        "unknown dialect",
        None,
        [{"sql": "true"}],
        [("spec.filters[0].sql", "unknown filter dialect")],
    ),
    (
        "exact empty value",
        None,
        [{"exact": {"type": ""}}],
        [("spec.filters[0].exact", "not be empty")],
    ),
    ("prefix empty value", None, [{"prefix": {"type": ""}}], [("spec.filters[0].prefix", "empty")]),
    ("suffix empty value", None, [{"suffix": {"type": ""}}], [("spec.filters[0].suffix", "empty")]),
    ("exact empty key", None, [{"exact": {"": "x"}}], [("spec.filters[0].exact", KEY_MESSAGE)]),
    ("exact bad key", None, [{"exact": {"Type": "x"}}], [("spec.filters[0].exact", "'Type'")]),
    ("exact no keys", None, [{"exact": {}}], [("spec.filters[0].exact", "at least one attribute")]),
    ("exact not an object", None, [{"exact": "type"}], [("spec.filters[0].exact", "an object")]),
    ("exact non-string value", None, [{"exact": {"n": 1}}], [("spec.filters[0].exact", "string")]),
    ("all empty", None, [{"all": []}], [("spec.filters[0].all", "at least one filter")]),
    ("any empty", None, [{"any": []}], [("spec.filters[0].any", "at least one filter")]),
    ("any not a list", None, [{"any": {"exact": {}}}], [("spec.filters[0].any", "must be a list")]),
    ("not empty", None, [{"not": {}}], [("spec.filters[0].not", "exactly one dialect")]),
    ("not a list", None, [{"not": []}], [("spec.filters[0].not", "must be a filter object")]),
    (
        "nested problem",
        None,
        [{"exact": {"a": "b"}}, {"any": [{"exact": {"a": "b"}}, {"not": {"prefix": {"a": ""}}}]}],
        [("spec.filters[1].any[1].not.prefix", "empty")],
    ),
    ("cesql parse error", None, [{"cesql": "type = "}], [("spec.filters[0].cesql", "position 8")]),
    ("cesql empty", None, [{"cesql": ""}], [("spec.filters[0].cesql", "empty expression")]),
    ("cesql not a string", None, [{"cesql": True}], [("spec.filters[0].cesql", "must be a CESQL")]),
    ("cesql bad like", None, [{"cesql": "a LIKE b"}], [("spec.filters[0].cesql", "LIKE pattern")]),
    ("too deep", None, [_nest(40)], [("spec.filters[0]" + ".not" * 33, "deeper than 32")]),
]


@pytest.mark.parametrize(
    ("name", "attributes", "filters", "expected"), INVALID, ids=[row[0] for row in INVALID]
)
def test_invalid_filters_are_rejected(
    name: str, attributes: Any, filters: Any, expected: list[tuple[str, str]]
) -> None:
    problems = validate_filters(attributes, filters)
    assert [p.field for p in problems] == [field for field, _ in expected]
    for problem, (_, message) in zip(problems, expected, strict=True):
        assert message in problem.message


VALID: list[tuple[str, Any, Any]] = [
    ("nothing", None, None),
    ("empty", {}, []),
    ("legacy any-value", {"type": ""}, None),
    ("legacy digits in key", {"type": "x", "ext1": "y"}, None),
    (
        "every dialect",
        {"type": "x"},
        [
            {"exact": {"type": "a"}},
            {"prefix": {"type": "a"}},
            {"suffix": {"type": "a"}},
            {"all": [{"exact": {"type": "a"}}]},
            {"any": [{"exact": {"type": "a"}}, {"cesql": "true"}]},
            {"not": {"exact": {"type": "a"}}},
            {"cesql": "source LIKE '%cloudevents%'"},
        ],
    ),
    ("unknown CESQL function parses", None, [{"cesql": "MYFUNC(type)"}]),
    ("deep but allowed", None, [_nest(31)]),
]


@pytest.mark.parametrize(("name", "attributes", "filters"), VALID, ids=[row[0] for row in VALID])
def test_valid_filters_pass(name: str, attributes: Any, filters: Any) -> None:
    assert validate_filters(attributes, filters) == []
    build_filter(attributes, filters)


def test_every_problem_is_reported_at_once_under_the_given_path() -> None:
    problems = validate_filters(
        {"A": "x", "b": 1}, [{"exact": {"": ""}}, {"all": []}, {"cesql": "("}], path="x.spec"
    )
    assert [p.field for p in problems] == [
        "x.spec.filter.attributes.A",
        "x.spec.filter.attributes.b",
        "x.spec.filters[0].exact",
        "x.spec.filters[0].exact",
        "x.spec.filters[1].all",
        "x.spec.filters[2].cesql",
    ]
    assert all(isinstance(p, Problem) for p in problems)


# -- index hints (what TriggerIndex files a trigger under) ------------------------------------


HINTS: list[tuple[str, Any, Any, dict[str, set[str]]]] = [
    ("legacy", {"type": "t", "source": ""}, None, {"type": {"t"}}),
    ("exact", None, [{"exact": {"type": "t", "id": "i"}}], {"type": {"t"}, "id": {"i"}}),
    ("prefix", None, [{"prefix": {"type": "t"}}], {}),
    ("and of exacts", None, [{"exact": {"type": "t"}}, {"prefix": {"id": "i"}}], {"type": {"t"}}),
    (
        "all conflicting",
        None,
        [{"all": [{"exact": {"type": "a"}}, {"exact": {"type": "b"}}]}],
        {"type": set()},
    ),
    (
        "any",
        None,
        [{"any": [{"exact": {"type": "a"}}, {"exact": {"type": "b", "id": "i"}}]}],
        {"type": {"a", "b"}},
    ),
    (
        "any with a prefix",
        None,
        [{"any": [{"exact": {"type": "a"}}, {"prefix": {"type": "b"}}]}],
        {},
    ),
    ("not", None, [{"not": {"exact": {"type": "a"}}}], {}),
    ("cesql equality", None, [{"cesql": "type = 'a' AND id LIKE 'x%'"}], {"type": {"a"}}),
    ("cesql reversed", None, [{"cesql": "'+05' = seq"}], {"seq": {"+05", "5"}}),
    ("cesql IN", None, [{"cesql": "flag IN ('TRUE', 'x')"}], {"flag": {"TRUE", "true", "x"}}),
    ("cesql NOT IN", None, [{"cesql": "type NOT IN ('a')"}], {}),
    (
        "cesql OR",
        None,
        [{"cesql": "type = 'a' OR (type = 'b' AND id = 'i')"}],
        {"type": {"a", "b"}},
    ),
    ("cesql integer literal", None, [{"cesql": "seq = 5"}], {}),
    ("cesql XOR", None, [{"cesql": "type = 'a' XOR false"}], {}),
]


@pytest.mark.parametrize(
    ("name", "attributes", "filters", "expected"), HINTS, ids=[row[0] for row in HINTS]
)
def test_index_hints(
    name: str, attributes: Any, filters: Any, expected: dict[str, set[str]]
) -> None:
    hints = index_hints(build_filter(attributes, filters))
    assert {k: set(v) for k, v in hints.items()} == expected


def test_foreign_filters_have_no_hints() -> None:
    class Always:
        def matches(self, event: CloudEvent) -> bool:
            return True

    assert index_hints(Always()) == {}
