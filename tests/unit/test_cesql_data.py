"""The CESQL ``data.`` extension: typing, errors, events without JSON data, parse limits, and
exact ``data.a.b = 'text'`` terms feeding the trigger index."""

from __future__ import annotations

from typing import Any

import pytest

from chalicelib.core.cloudevents.event import CloudEvent
from chalicelib.core.filtering import cesql
from chalicelib.core.filtering.filter_index import TriggerIndex
from chalicelib.core.filtering.filters import build_filter, index_hints

ATTRS = {"specversion": "1.0", "id": "1", "source": "s", "type": "t"}
DATA = {
    "customer": {"Tier": "gold", "n": 5, "whole": 7.0, "f": 1.5, "ok": True, "nil": None},
    "items": [{"sku": "A1"}, {"sku": "B2"}],
    "big": 2**40,
}
STRUCTURED = CloudEvent(ATTRS, None, DATA)
JSON_BYTES = CloudEvent({**ATTRS, "datacontenttype": "application/vnd.x+json"}, b'{"a": "b"}')
TEXT_BYTES = CloudEvent({**ATTRS, "datacontenttype": "text/plain"}, b'{"a": "b"}')
UNTYPED_BYTES = CloudEvent(ATTRS, b'{"a": "b"}')
BROKEN_JSON = CloudEvent({**ATTRS, "datacontenttype": "application/json"}, b'{"a": ')
NO_DATA = CloudEvent(ATTRS)

# (expression, event, value, error kinds)
CASES: list[tuple[str, CloudEvent, Any, list[str]]] = [
    ("data.customer.Tier = 'gold'", STRUCTURED, True, []),
    ("data.customer.tier = 'gold'", STRUCTURED, False, ["missingAttribute"]),  # case-sensitive
    ("DATA.customer.Tier", STRUCTURED, "gold", []),  # the keyword is not
    ("data.customer.n", STRUCTURED, 5, []),
    ("data.customer.n + 1", STRUCTURED, 6, []),
    ("data.customer.n > 3 AND data.customer.ok", STRUCTURED, True, []),
    ("data.customer.whole", STRUCTURED, 7, []),  # a whole number is an Integer
    ("data.customer.f", STRUCTURED, False, ["cast"]),
    ("data.customer.nil", STRUCTURED, False, ["cast"]),
    ("data.customer", STRUCTURED, False, ["cast"]),  # an object is no CESQL value
    ("data.big", STRUCTURED, False, ["cast"]),  # beyond 32 bits
    ("data.items.1.sku", STRUCTURED, "B2", []),
    ("data.items.2.sku", STRUCTURED, False, ["missingAttribute"]),
    ("data.customer.n = '5'", STRUCTURED, True, []),
    ("data.customer.Tier IN ('silver', 'gold')", STRUCTURED, True, []),
    ("data.customer.Tier LIKE 'g%'", STRUCTURED, True, []),
    ("UPPER(data.customer.Tier) = 'GOLD'", STRUCTURED, True, []),
    ("EXISTS data.customer.nil", STRUCTURED, True, []),
    ("EXISTS data.customer.zip", STRUCTURED, False, []),
    ("data.a = 'b'", JSON_BYTES, True, []),
    ("data.a = 'b'", TEXT_BYTES, False, ["missingAttribute"]),
    ("data.a = 'b'", UNTYPED_BYTES, False, ["missingAttribute"]),
    ("data.a = 'b'", BROKEN_JSON, False, ["missingAttribute"]),
    ("data.a = 'b'", NO_DATA, False, ["missingAttribute"]),
    ("EXISTS data.a", NO_DATA, False, []),
    ("type = 't' OR data.a = 'b'", NO_DATA, True, []),  # short-circuit as everywhere
]


@pytest.mark.parametrize(("source", "event", "value", "kinds"), CASES)
def test_data_paths(source: str, event: CloudEvent, value: Any, kinds: list[str]) -> None:
    got, errors = cesql.parse(source).evaluate(event)
    assert (got, [e.kind for e in errors]) == (value, kinds)
    assert cesql.parse(source).matches(event) is (value is True and not kinds)


@pytest.mark.parametrize(
    ("source", "fragment"),
    [
        ("data.", "member name"),
        ("data..a", "member name"),
        ("data.a. b = 1", "member name"),
        ("data" + ".a" * 33, "at most 32"),
        ("EXISTS data.", "member name"),
    ],
)
def test_bad_data_paths_are_parse_errors(source: str, fragment: str) -> None:
    with pytest.raises(cesql.CesqlParseError, match=fragment):
        cesql.parse(source)


def test_expressions_without_data_keep_the_plain_path() -> None:
    assert not cesql.parse("type = 'a' AND EXISTS source").reads_data
    assert cesql.parse("type = 'a' AND (1 + data.x) > 2").reads_data
    assert cesql.parse("NOT EXISTS data.x").reads_data


HINTS: list[tuple[str, dict[str, frozenset[str]]]] = [
    ("data.customer.Tier = 'gold'", {"data.customer.Tier": frozenset({"gold"})}),
    ("type = 't' AND data.a = 'b'", {"type": frozenset({"t"}), "data.a": frozenset({"b"})}),
    ("data.a IN ('1', 'x')", {"data.a": frozenset({"1", "x"})}),
    ("data.a = 1", {}),  # only text literals, as for attributes
    ("data.a LIKE 'b%'", {}),
]


@pytest.mark.parametrize(("source", "expected"), HINTS)
def test_exact_data_terms_are_hints(source: str, expected: dict[str, frozenset[str]]) -> None:
    assert dict(index_hints(build_filter(None, [{"cesql": source}]))) == expected


def test_the_index_routes_data_terms_exactly_as_a_scan() -> None:
    tiers = ["gold", "silver", "bronze", "5", "true"]
    entries = [
        (f"t{i}", build_filter(None, [{"cesql": f"data.tier = '{tiers[i % len(tiers)]}'"}]))
        for i in range(40)
    ] + [("num", build_filter(None, [{"cesql": "'05' = data.tier"}]))]
    index = TriggerIndex(entries)
    assert index.indexed_attributes == ["data.tier"] and index.residual_count == 0
    values: list[Any] = [*tiers, 5, 5.0, True, None, {"x": 1}, [1], "platinum"]
    events = [CloudEvent(ATTRS, None, {"tier": v}) for v in values]
    events += [NO_DATA, TEXT_BYTES, CloudEvent(ATTRS, None, [1, 2])]
    for event in events:
        assert index.match(event) == [k for k, f in entries if f.matches(event)]
    assert "num" in index.match(CloudEvent(ATTRS, None, {"tier": 5}))
