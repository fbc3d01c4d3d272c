"""Process memory under 1,000 hostile requests stays within a stated bound (issue 16): distinct
200 KB sources to a broker that does not exist (the cache that grew ~350 MiB from 60 such
requests), deep JSON, long headers and CESQL-filtered events with huge numbers."""

from __future__ import annotations

import gc
import json
import resource

from chalice.test import Client

from tests.functional.harness import Harness
from tests.fuzz.test_ingress_fuzz import deep

CE = "application/cloudevents+json"
BOUND_MIB = 16


def _rss_mib() -> float:
    with open("/proc/self/statm") as f:
        pages = int(f.read().split()[1])
    return pages * resource.getpagesize() / 2**20


def _hostile(i: int) -> tuple[str, dict[str, str], bytes]:
    kind = i % 4
    if kind == 0:  # unauthenticated, unknown broker, a new 200 KB source each time
        source = f"/{i}/" + "s" * 200_000
        event = {"specversion": "1.0", "id": str(i), "source": source, "type": "t"}
        return "/ns/nope", {"content-type": CE}, json.dumps(event).encode()
    if kind == 1:
        return "/ns/default", {"content-type": CE}, deep(50_000).encode()
    if kind == 2:
        headers = {
            "ce-specversion": "1.0",
            "ce-id": str(i),
            "ce-source": f"/{i}" + "h" * 8000,
            "ce-type": "com.x",
            "ce-seq": "9" * 5000,
            "content-type": "text/plain",
        }
        return "/ns/default", headers, b"x"
    body = {"specversion": "1.0", "id": str(i), "source": "/s", "type": f"t{i}" + "y" * 5000}
    return f"/ns/n{i}", {"content-type": CE}, json.dumps(body).encode()


def test_memory_stays_bounded_under_hostile_requests(client: Client, harness: Harness) -> None:
    for i in range(100):  # warm: imports, caches of valid inputs, allocator pools
        path, headers, body = _hostile(i)
        client.http.post(path, headers=headers, body=body)
    gc.collect()
    before = _rss_mib()
    for i in range(100, 1100):
        path, headers, body = _hostile(i)
        assert client.http.post(path, headers=headers, body=body).status_code < 500
        harness.archive.records.clear()  # the in-memory fake's own store is not the broker's
    gc.collect()
    grown = _rss_mib() - before
    print(f"RSS grew {grown:.1f} MiB over 1,000 hostile requests (bound {BOUND_MIB} MiB)")
    assert grown < BOUND_MIB, f"RSS grew {grown:.1f} MiB over 1,000 hostile requests"
