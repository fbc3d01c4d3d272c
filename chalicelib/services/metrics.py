"""Broker metrics (design.md §4): CloudWatch EMF through aws-lambda-powertools, flushed once per
request or batch; the local runtime serves the same documents' aggregate as Prometheus text."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Mapping
from typing import Any

# Imported with the module, never lazily: powertools' packages import each other in a cycle, and a
# first import racing in two threads (ingress and delivery in the local runtime) fails with
# "partially initialized module".
from aws_lambda_powertools.metrics.provider.cloudwatch_emf.cloudwatch import (
    AmazonCloudWatchEMFProvider,
)

NAMESPACE = "ServerlessBroker"
SERVICE = "serverless-broker"
COUNTERS = (
    "event_count",
    "delivery_count",
    "dead_letter_count",
    "reply_count",
    "archive_failure_count",
    "archive_late_count",
    "duplicate_count",
    "dedup_release_failure_count",
    "dedup_confirm_failure_count",
    "delayed_delivery_count",
    "unauthorized_count",  # senders refused (401, 403: docs/security.md)
    "source_failure_count",  # a scheduled source's event not sent (services/schedules.py)
    "pattern_budget_exceeded_count",  # eventPattern matching out of budget (docs/filters.md)
)
LATENCIES = ("event_dispatch_latency_ms",)
_UNITS = {"Count", "Milliseconds"}

Dims = tuple[tuple[str, str], ...]


_CLASSES = {n: f"{n}xx" for n in range(1, 6)}


def status_class(status: int) -> str:
    return _CLASSES.get(status // 100) or f"{status // 100}xx"


class Metrics:
    def __init__(
        self, enabled: bool, sink: Callable[[str], None] | None = None, aggregate: bool = True
    ) -> None:
        self._enabled = enabled
        self._sink = sink if sink is not None else _print
        self._aggregate = aggregate
        self._lock = threading.Lock()
        self._providers = threading.local()  # one reusable EMF serializer per flushing thread
        # pending: dims -> metric name -> (unit, values)
        self._pending: dict[Dims, dict[str, tuple[str, list[float]]]] = {}
        self._counters: dict[tuple[str, Dims], float] = {}
        self._latency: dict[tuple[str, Dims], list[float]] = {}

    def count(self, name: str, dimensions: Mapping[str, str], value: float = 1.0) -> None:
        self.count_sorted(name, tuple(sorted(dimensions.items())), value)

    def count_sorted(self, name: str, dims: Dims, value: float = 1.0) -> None:
        """``count`` for dimensions already given as (name, value) pairs sorted by name."""
        if not self._enabled:
            return
        with self._lock:
            metrics = self._pending.get(dims)
            if metrics is None:
                metrics = self._pending[dims] = {}
            entry = metrics.get(name)
            if entry is None:
                metrics[name] = ("Count", [value])
            else:  # counters are summed: one EMF value per flush, not one per call
                entry[1][0] += value

    def latency(self, name: str, dimensions: Mapping[str, str], ms: float) -> None:
        if not self._enabled:
            return
        dims = tuple(sorted(dimensions.items()))
        with self._lock:
            metrics = self._pending.setdefault(dims, {})
            metrics.setdefault(name, ("Milliseconds", []))[1].append(ms)

    def flush(self) -> None:
        """Emit what was measured since the last flush: one EMF document per dimension set."""
        if not self._enabled:
            return
        with self._lock:
            pending, self._pending = self._pending, {}
        if not pending:
            return
        provider = getattr(self._providers, "emf", None)
        if provider is None:
            provider = self._providers.emf = emf_provider()
        for dims, metrics in pending.items():
            record = emf_record(dict(dims), metrics, provider)
            self._sink(json.dumps(record, separators=(",", ":")))
            if self._aggregate:
                self._absorb(record)

    def _absorb(self, record: Mapping[str, Any]) -> None:
        """Fold one EMF document into the local aggregate (what CloudWatch would do with it)."""
        directive = record["_aws"]["CloudWatchMetrics"][0]
        dim_names = [d for d in directive["Dimensions"][0] if d != "service"]
        dims = tuple(sorted((d, str(record[d])) for d in dim_names))
        with self._lock:
            for metric in directive["Metrics"]:
                name, values = metric["Name"], record[metric["Name"]]
                values = values if isinstance(values, list) else [values]
                key = (name, dims)
                if metric["Unit"] == "Count":
                    self._counters[key] = self._counters.get(key, 0.0) + sum(values)
                else:
                    sums = self._latency.setdefault(key, [0.0, 0.0])
                    sums[0] += len(values)
                    sums[1] += sum(values)

    def prometheus_text(self) -> str:
        # Written by hand, not with prometheus_client: these are a few counters and summaries
        # that the local runtime alone serves, and the library would be a runtime dependency in
        # every Lambda package (requirements.txt) for twenty lines of text.
        self.flush()
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


def emf_record(
    dimensions: Mapping[str, str],
    metrics: Mapping[str, tuple[str, list[float]]],
    provider: Any = None,
) -> dict[str, Any]:
    """One EMF document through powertools' own serializer (validates names, units, dimensions).
    ``provider``: one from ``emf_provider()`` to reuse (building one costs more than using it);
    it is cleared first, so it must not be shared between threads."""
    if provider is None:
        provider = emf_provider()
    else:
        provider.clear_metrics()
    for key, dim_value in dimensions.items():
        provider.add_dimension(key, dim_value)
    for name, (unit, values) in metrics.items():
        for value in values:
            provider.add_metric(name=name, unit=unit, value=value)
    return dict(provider.serialize_metric_set())


def emf_provider() -> Any:
    return AmazonCloudWatchEMFProvider(namespace=NAMESPACE, service=SERVICE)


def _labels(dims: Dims) -> str:
    if not dims:
        return ""
    inner = ",".join(f'{k}="{_escape(v)}"' for k, v in dims)
    return "{" + inner + "}"


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _print(line: str) -> None:
    print(line, flush=True)
