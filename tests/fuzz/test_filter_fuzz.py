"""Random event patterns and CESQL data paths against random events: validation answers problems
or a filter, and a valid filter's ``matches``, ``explain`` and index hints never raise, and the
index always agrees with a scan."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from chalicelib.core.cloudevents.event import CloudEvent
from chalicelib.core.errors import ValidationError
from chalicelib.core.filtering.explain import explain
from chalicelib.core.filtering.filter_index import TriggerIndex
from chalicelib.core.filtering.filters import build_filter, validate_filters
from tests.fuzz.conftest import FUZZ

names = st.sampled_from(["type", "source", "data", "a", "b", "$or", "n", "x-y"])
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**12), 10**12),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=8),
)
operators = st.one_of(
    st.fixed_dictionaries({"prefix": st.one_of(st.text(max_size=4), scalars)}),
    st.fixed_dictionaries({"suffix": st.text(max_size=4)}),
    st.fixed_dictionaries(
        {"equals-ignore-case": st.one_of(st.text(max_size=4), st.lists(scalars))}
    ),
    st.fixed_dictionaries({"anything-but": st.one_of(scalars, st.lists(scalars, max_size=3))}),
    st.fixed_dictionaries({"anything-but": st.fixed_dictionaries({"prefix": st.text(max_size=3)})}),
    st.fixed_dictionaries(
        {"numeric": st.lists(st.one_of(st.sampled_from(["<", ">=", "="]), scalars), max_size=4)}
    ),
    st.fixed_dictionaries({"exists": st.one_of(st.booleans(), scalars)}),
    st.fixed_dictionaries({"wildcard": st.text(alphabet="ab*\\", max_size=8)}),
    st.fixed_dictionaries({"cidr": st.sampled_from(["10.0.0.0/8", "::/0", "1.2.3.4", "x/1"])}),
    st.dictionaries(st.text(max_size=3), scalars, max_size=2),
)
leaves = st.lists(st.one_of(scalars, operators), max_size=3)
patterns = st.recursive(
    st.dictionaries(names, leaves, max_size=3),
    lambda children: st.one_of(
        st.dictionaries(names, st.one_of(leaves, children), max_size=3),
        st.fixed_dictionaries({"$or": st.lists(children, max_size=3)}),
    ),
    max_leaves=12,
)
json_values = st.recursive(
    scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=3), st.dictionaries(names, children, max_size=3)
    ),
    max_leaves=10,
)
events = st.builds(
    lambda attrs, data: CloudEvent(
        {"specversion": "1.0", "id": "1", "source": "s", "type": "t", **attrs}, None, data
    ),
    st.dictionaries(st.sampled_from(["a", "b", "n", "subject"]), st.text(max_size=5), max_size=3),
    json_values,
)
cesql_sources = st.builds(
    lambda path, op, literal: f"data.{path} {op} {literal}",
    st.lists(st.sampled_from(["a", "b", "type", "0", "1", "n"]), min_size=1, max_size=3).map(
        ".".join
    ),
    st.sampled_from(["=", "<", "!=", "LIKE"]),
    st.sampled_from(["'a'", "1", "TRUE", "'%'", "-5"]),
)


def _check(filters: list[Any], event: CloudEvent) -> None:
    if validate_filters(None, filters):
        try:
            build_filter(None, filters)
        except ValidationError:
            return
        raise AssertionError("build_filter accepted what validate_filters refused")
    built = build_filter(None, filters)
    matched, reasons = explain(None, filters, event)
    assert matched == built.matches(event) and reasons
    index = TriggerIndex([("k", built)])
    assert index.match(event) == (["k"] if matched else [])


@FUZZ
@given(patterns, events)
def test_random_patterns_never_raise(pattern: Any, event: CloudEvent) -> None:
    _check([{"eventPattern": pattern}], event)


@FUZZ
@given(cesql_sources, events)
def test_random_data_paths_never_raise(source: str, event: CloudEvent) -> None:
    _check([{"cesql": source}], event)


def _deep(levels: int, inner: Any) -> Any:
    for _ in range(levels):
        inner = [inner]
    return inner


deep_events = st.builds(
    lambda levels, inner, wide: CloudEvent(
        {"specversion": "1.0", "id": "deep", "source": "s", "type": "t"},
        None,
        [_deep(levels, inner)] * wide,
    ),
    st.integers(50, 3000),
    json_values,
    st.sampled_from([1, 2, 600_000]),
)


@FUZZ
@given(pattern=patterns, event=deep_events)
def test_deep_and_wide_data_never_breaks_a_pattern(pattern: Any, event: CloudEvent) -> None:
    """Data nested thousands of levels deep (as an archived or replayed event may hold) or
    repeated past the work budget: matching, explaining and indexing answer, never raise."""
    _check([{"eventPattern": {"data": pattern}}], event)
    _check([{"eventPattern": pattern}, {"not": {"eventPattern": {"data": pattern}}}], event)
