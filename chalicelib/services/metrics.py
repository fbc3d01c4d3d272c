"""Broker metrics (DESIGN.md §4): CloudWatch EMF records built with aws-lambda-powertools, one
per measurement, written to a sink (stdout on Lambda). The same records feed an in-process
aggregate that the local runtime serves as Prometheus text at ``GET /metrics``."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Mapping
from typing import Any

NAMESPACE = "ServerlessBroker"
COUNTERS = ("event_count", "delivery_count", "dead_letter_count", "reply_count")
LATENCIES = ("event_dispatch_latency_ms",)


def status_class(status: int) -> str:
    return f"{status // 100}xx"


class Metrics:
    def __init__(
        self, enabled: bool, sink: Callable[[str], None] | None = None, aggregate: bool = True
    ) -> None:
        self._enabled = enabled
        self._sink = sink if sink is not None else _print
        self._aggregate = aggregate
        self._lock = threading.Lock()
        self._counters: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
        self._latency: dict[tuple[str, tuple[tuple[str, str], ...]], list[float]] = {}

    def count(self, name: str, dimensions: Mapping[str, str], value: float = 1.0) -> None:
        self._record(name, "Count", dimensions, value)

    def latency(self, name: str, dimensions: Mapping[str, str], ms: float) -> None:
        self._record(name, "Milliseconds", dimensions, ms)

    def _record(self, name: str, unit: str, dimensions: Mapping[str, str], value: float) -> None:
        if not self._enabled:
            return
        self._sink(json.dumps(emf_record(name, unit, dimensions, value), separators=(",", ":")))
        if self._aggregate:
            key = (name, tuple(sorted(dimensions.items())))
            with self._lock:
                if unit == "Count":
                    self._counters[key] = self._counters.get(key, 0.0) + value
                else:
                    sums = self._latency.setdefault(key, [0.0, 0.0])
                    sums[0] += 1
                    sums[1] += value

    def prometheus_text(self) -> str:
        lines: list[str] = []
        with self._lock:
            counters = dict(self._counters)
            latency = {k: list(v) for k, v in self._latency.items()}
        for name in COUNTERS:
            lines.append(f"# TYPE broker_{name} counter")
            for (metric, dims), value in sorted(counters.items()):
                if metric == name:
                    lines.append(f"broker_{name}_total{_labels(dims)} {value:g}")
        for name in LATENCIES:
            lines.append(f"# TYPE broker_{name} summary")
            for (metric, dims), (count, total) in sorted(latency.items()):
                if metric == name:
                    lines.append(f"broker_{name}_count{_labels(dims)} {count:g}")
                    lines.append(f"broker_{name}_sum{_labels(dims)} {total:g}")
        return "\n".join(lines) + "\n"


def emf_record(name: str, unit: str, dimensions: Mapping[str, str], value: float) -> dict[str, Any]:
    """One EMF document through powertools' own serializer (validates names, units, dimensions)."""
    from aws_lambda_powertools.metrics.provider.cloudwatch_emf.cloudwatch import (
        AmazonCloudWatchEMFProvider,
    )

    provider = AmazonCloudWatchEMFProvider(namespace=NAMESPACE, service="serverless-broker")
    for key, dim_value in dimensions.items():
        provider.add_dimension(key, dim_value)
    provider.add_metric(name=name, unit=unit, value=value)
    return dict(provider.serialize_metric_set())


def _labels(dims: tuple[tuple[str, str], ...]) -> str:
    if not dims:
        return ""
    inner = ",".join(f'{k}="{_escape(v)}"' for k, v in dims)
    return "{" + inner + "}"


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _print(line: str) -> None:
    print(line, flush=True)
