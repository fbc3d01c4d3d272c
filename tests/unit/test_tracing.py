"""W3C trace context across a hop: same trace, new span; a new trace when none (or junk) came in."""

from __future__ import annotations

import re

import pytest

from chalicelib.services.tracing import next_hop, trace_id

FORMAT = re.compile(r"^00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$")
INCOMING = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


def test_continues_the_trace_with_a_new_span_and_keeps_flags_and_state() -> None:
    out = next_hop({"traceparent": INCOMING, "tracestate": "congo=t61rcWkgMzE"})
    assert FORMAT.match(out["traceparent"])
    _, trace, span, flags = out["traceparent"].split("-")
    assert trace == "0af7651916cd43dd8448eb211c80319c" and flags == "01"
    assert span != "b7ad6b7169203331" and span != "0" * 16
    assert out["tracestate"] == "congo=t61rcWkgMzE"


@pytest.mark.parametrize(
    "incoming",
    [None, "", "garbage", "00-" + "0" * 32 + "-b7ad6b7169203331-01", INCOMING.upper() + "-x"],
)
def test_starts_a_new_trace_otherwise(incoming: str | None) -> None:
    headers = {} if incoming is None else {"traceparent": incoming, "tracestate": "a=b"}
    out = next_hop(headers)
    assert FORMAT.match(out["traceparent"]) and out["traceparent"].endswith("-01")
    assert "tracestate" not in out  # state belongs to the trace it came with
    assert trace_id(out["traceparent"]) not in {None, "0" * 32}


def test_ids_do_not_repeat() -> None:
    spans = {next_hop({"traceparent": INCOMING})["traceparent"] for _ in range(10_000)}
    traces = {trace_id(next_hop({})["traceparent"]) for _ in range(10_000)}
    assert len(spans) == 10_000 and len(traces) == 10_000
