"""Metrics: buffered counters, one EMF document per dimension set per flush, Prometheus text."""

from __future__ import annotations

import json

from chalicelib.services.metrics import Metrics

DIMS = {"namespace": "ns", "broker": "b", "trigger": "t", "response_code_class": "2xx"}


def emitted() -> tuple[Metrics, list[dict[str, object]]]:
    lines: list[str] = []
    return Metrics(True, sink=lines.append), lines  # type: ignore[return-value]


def test_sorted_counting_is_the_same_as_counting() -> None:
    a, a_lines = emitted()
    b, b_lines = emitted()
    for _ in range(3):
        a.count("delivery_count", DIMS)
        b.count_sorted("delivery_count", tuple(sorted(DIMS.items())))
    a.flush()
    b.flush()
    docs_a = [json.loads(line) for line in a_lines]  # type: ignore[arg-type]
    docs_b = [json.loads(line) for line in b_lines]  # type: ignore[arg-type]
    for doc in docs_a + docs_b:
        doc["_aws"].pop("Timestamp")
    assert docs_a == docs_b and docs_a[0]["delivery_count"] in (3.0, [3.0])
    assert a.prometheus_text() == b.prometheus_text()


def test_a_reused_serializer_does_not_carry_dimensions_or_values_over() -> None:
    m, lines = emitted()
    m.count("delivery_count", DIMS)
    m.flush()
    m.count("event_count", {"namespace": "other", "broker": "x"}, 2)
    m.flush()
    first, second = (json.loads(line) for line in lines)  # type: ignore[arg-type]
    assert first["delivery_count"] in (1.0, [1.0]) and "event_count" not in first
    assert second["event_count"] in (2.0, [2.0]) and "delivery_count" not in second
    assert second["namespace"] == "other" and "trigger" not in second
    dimensions = second["_aws"]["CloudWatchMetrics"][0]["Dimensions"][0]
    assert sorted(dimensions) == ["broker", "namespace", "service"]


def test_nothing_measured_nothing_written_and_disabled_is_silent() -> None:
    m, lines = emitted()
    m.flush()
    off = Metrics(False, sink=lines.append)
    off.count("delivery_count", DIMS)
    off.count_sorted("delivery_count", tuple(sorted(DIMS.items())))
    off.flush()
    assert lines == []
