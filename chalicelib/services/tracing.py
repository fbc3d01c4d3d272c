"""W3C trace context across hops: the same trace id, a new parent span id per hop."""

from __future__ import annotations

import random
import re
from collections.abc import Mapping

# Trace and span ids must be unique, not secret (W3C trace context §3.2.2.3, §3.2.2.4): a fast
# pseudo-random source is enough, and a per-hop syscall for os.urandom is not.
_bits = random.Random().getrandbits


def _span_id() -> str:
    return f"{_bits(64) or 1:016x}"  # all-zero ids are invalid


def _trace_id() -> str:
    return f"{_bits(128) or 1:032x}"


_TRACEPARENT = re.compile(r"^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$")


def next_hop(headers: Mapping[str, str]) -> dict[str, str]:
    """``traceparent`` (and ``tracestate``) for the next hop: the incoming trace continued with a
    fresh span id, or a new trace when none (or a malformed one) came in."""
    incoming = headers.get("traceparent", "").strip().lower()
    match = _TRACEPARENT.fullmatch(incoming)
    if match and match.group(2) != "0" * 32:
        trace_id, flags = match.group(2), match.group(4)
        out = {"traceparent": f"00-{trace_id}-{_span_id()}-{flags}"}
        if headers.get("tracestate"):
            out["tracestate"] = headers["tracestate"]
        return out
    return {"traceparent": f"00-{_trace_id()}-{_span_id()}-01"}


def trace_id(traceparent: str) -> str | None:
    match = _TRACEPARENT.fullmatch(traceparent.strip().lower())
    return match.group(2) if match else None
