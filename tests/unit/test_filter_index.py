"""TriggerIndex: same answer as evaluating every filter, while evaluating only the candidates."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chalicelib.core.cloudevents.event import CloudEvent
from chalicelib.core.filtering.filter_index import TriggerIndex
from chalicelib.core.filtering.filters import Filter, Hints, build_filter, index_hints


def event(**attributes: Any) -> CloudEvent:
    return CloudEvent({"specversion": "1.0", "id": "1", "source": "s", "type": "t", **attributes})


@dataclass
class Counting:
    """Wraps a filter (keeping its index hints) and counts how often it is evaluated."""

    inner: Filter
    calls: list[int] = field(default_factory=lambda: [0])

    def matches(self, e: CloudEvent) -> bool:
        self.calls[0] += 1
        return self.inner.matches(e)

    def index_hints(self) -> Hints:
        return index_hints(self.inner)


def test_only_candidates_and_residual_filters_are_evaluated() -> None:
    exact = [Counting(build_filter({"type": f"type.{i}"}, None)) for i in range(1000)]
    prefix = Counting(build_filter(None, [{"prefix": {"type": "type.1"}}]))
    index = TriggerIndex([*((f"x{i}", f) for i, f in enumerate(exact)), ("p", prefix)])
    assert index.indexed_attributes == ["type"]
    assert index.residual_count == 1
    assert index.match(event(type="type.17")) == ["x17", "p"]
    assert sum(f.calls[0] for f in exact) == 1
    assert prefix.calls[0] == 1
    assert index.match(event(type="other")) == []
    assert sum(f.calls[0] for f in exact) == 1


def test_keys_come_back_in_insertion_order_across_tables_and_residual() -> None:
    entries: list[tuple[str, Filter]] = [
        ("suffix", build_filter(None, [{"suffix": {"type": "t"}}])),
        ("by-type", build_filter({"type": "t"}, None)),
        ("by-source-1", build_filter(None, [{"exact": {"source": "s"}}])),
        ("by-type-2", build_filter(None, [{"cesql": "type = 't' AND EXISTS id"}])),
        ("by-source-2", build_filter(None, [{"exact": {"source": "s", "id": "1"}}])),
        ("all", build_filter(None, None)),
        ("never", build_filter(None, [{"all": [{"exact": {"id": "1"}}, {"exact": {"id": "2"}}]}])),
    ]
    index = TriggerIndex(entries)
    assert set(index.indexed_attributes) == {"type", "source"}
    e = event()
    expected = ["suffix", "by-type", "by-source-1", "by-type-2", "by-source-2", "all"]
    assert index.match(e) == expected == [k for k, f in entries if f.matches(e)]


def test_the_most_covering_then_most_selective_attribute_is_chosen() -> None:
    entries: list[tuple[int, Filter]] = [
        (i, build_filter({"source": "same", "type": f"t{i}"}, None)) for i in range(10)
    ]
    assert TriggerIndex(entries).indexed_attributes == ["type"]


def test_empty_index_and_non_string_attribute_values() -> None:
    assert TriggerIndex[str]([]).match(event()) == []
    index = TriggerIndex(
        [
            ("int", build_filter({"num": "5"}, None)),
            ("bool", build_filter(None, [{"exact": {"flag": "true"}}])),
            ("cesql-int", build_filter(None, [{"cesql": "num IN ('05')"}])),
            ("cesql-bool", build_filter(None, [{"cesql": "'TRUE' = flag"}])),
        ]
    )
    # A CESQL literal is cast to the attribute's type, so '05' finds 5 and 'TRUE' finds true.
    assert index.match(event(num=5, flag=True)) == ["int", "bool", "cesql-int", "cesql-bool"]
    assert index.match(event(num="5", flag="true")) == ["int", "bool"]
    assert len(index) == 4


def test_many_distinct_attributes_stay_correct_beyond_the_table_limit() -> None:
    entries = [
        (i, build_filter({f"ext{i}": "v", "type": "t"} if i % 2 else {f"ext{i}": "v"}, None))
        for i in range(60)
    ]
    index = TriggerIndex(entries)
    for e in [
        event(ext3="v"),
        event(ext4="v", ext5="v"),
        event(**{f"ext{i}": "v" for i in range(60)}),
    ]:
        assert index.match(e) == [k for k, f in entries if f.matches(e)]


# -- the equivalence property ----------------------------------------------------------------

# Few names and values, so that filters and events collide often, on purpose: non-canonical
# literals ('05', 'TRUE') against integer and boolean values, and the schemaurl/dataschema alias.
NAMES = ["type", "ext", "num", "dataschema", "schemaurl"]
TEXTS = ["a", "ab", "5", "05", "true", "TRUE"]

names = st.sampled_from(NAMES)
texts = st.sampled_from(TEXTS)


def _cesql_leaf() -> st.SearchStrategy[str]:
    return st.one_of(
        st.builds(lambda k, v: f"{k} = '{v}'", names, texts),
        st.builds(lambda k, v: f"'{v}' = {k}", names, texts),
        st.builds(
            lambda k, vs: f"{k} IN ({', '.join(repr(v) for v in vs)})",
            names,
            st.lists(texts, min_size=1, max_size=3),
        ),
        st.builds(lambda k, v: f"{k} NOT IN ('{v}')", names, texts),
        st.builds(lambda k, v: f"{k} LIKE '{v}%'", names, texts),
        st.builds(lambda k: f"EXISTS {k}", names),
        st.builds(lambda k: f"{k} = 5", names),
        st.builds(lambda k: f"{k}", names),
    )


cesql_expressions = st.recursive(
    _cesql_leaf(),
    lambda inner: st.one_of(
        st.builds(
            lambda a, op, b: f"({a}) {op} ({b})",
            inner,
            st.sampled_from(["AND", "OR", "XOR"]),
            inner,
        ),
        st.builds(lambda a: f"NOT ({a})", inner),
    ),
    max_leaves=4,
)

attribute_maps = st.dictionaries(names, texts, min_size=1, max_size=2)

leaf_filters = st.one_of(
    st.builds(lambda m: {"exact": m}, attribute_maps),
    st.builds(lambda m: {"prefix": m}, attribute_maps),
    st.builds(lambda m: {"suffix": m}, attribute_maps),
    st.builds(lambda x: {"cesql": x}, cesql_expressions),
)

filter_elements = st.recursive(
    leaf_filters,
    lambda inner: st.one_of(
        st.builds(lambda fs: {"all": fs}, st.lists(inner, min_size=1, max_size=3)),
        st.builds(lambda fs: {"any": fs}, st.lists(inner, min_size=1, max_size=3)),
        st.builds(lambda f: {"not": f}, inner),
    ),
    max_leaves=5,
)

triggers = st.tuples(
    st.one_of(st.none(), st.dictionaries(names, st.sampled_from([*TEXTS, ""]), max_size=2)),
    st.one_of(st.none(), st.lists(filter_elements, max_size=2)),
)

values = st.one_of(texts, st.sampled_from([5, 0, True, False]))
events = st.builds(
    lambda t, extra: event(type=t, **extra),
    texts,
    st.dictionaries(st.sampled_from(NAMES[1:]), values, max_size=4),
)


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(triggers, max_size=25), st.lists(events, min_size=1, max_size=5))
def test_index_matches_exactly_what_a_scan_matches(
    specs: list[tuple[Any, Any]], sample: list[CloudEvent]
) -> None:
    entries = [(i, build_filter(attrs, filters)) for i, (attrs, filters) in enumerate(specs)]
    index = TriggerIndex(entries)
    for e in sample:
        assert index.match(e) == [k for k, f in entries if f.matches(e)]
