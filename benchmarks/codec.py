"""Codec throughput: ours vs the cloudevents SDK (2.2.0: v2 core and v1 API) vs bare json.loads.

For binary and structured mode, 1 KiB and 64 KiB events with JSON data, it measures decode
(+ validate) of the same (headers, body) and encode of the decoded event, for:
  ours   chalicelib.core.cloudevents.codec.decode_http / encode_binary / encode_structured
  sdk2   cloudevents.core.bindings.http.from_http / to_binary / to_structured (JSONFormat)
  sdk1   cloudevents.v1.http.from_http / to_binary / to_structured
  floor  json.loads of the structured body
A figure `<mode>_<size>_vs_sdk` is ours ÷ SDK throughput for the weaker of our two operations
(decode, encode), each against the faster of the two SDK APIs: the conservative reading.
`structured_1k_time_vs_json_loads` is our structured decode time ÷ json.loads time.

Run: .venv/bin/python benchmarks/codec.py
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from cloudevents.core.bindings import http as sdk2
from cloudevents.core.formats.json import JSONFormat
from cloudevents.v1 import http as sdk1

from benchmarks._result import print_table, write_result
from chalicelib.core.cloudevents import codec
from chalicelib.core.cloudevents import json_format as codec_json
from chalicelib.core.cloudevents.json_format import JSON_ACCELERATOR

BUDGET_S = 0.04  # seconds per timed run


def make_data(size: int) -> dict[str, Any]:
    """A JSON object of roughly ``size`` bytes shaped like an application payload."""
    items = []
    while len(json.dumps(items)) < size - 60:
        n = len(items)
        items.append({"sku": f"SKU-{n:06d}", "qty": n % 7 + 1, "price": 9.99 + n, "ok": True})
    return {"order": "A-1234", "customer": {"id": 42, "name": "Zoë"}, "items": items}


def inputs(size: int) -> dict[str, Any]:
    data = make_data(size)
    attrs = {
        "specversion": "1.0",
        "id": "b0b0a8f4-3a4c-4d4e-9f0a-1c2d3e4f5a6b",
        "source": "https://shop.example.com/orders",
        "type": "com.example.order.created",
        "time": "2024-05-06T07:08:09.123Z",
        "subject": "orders/A-1234",
        "traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
        "tenant": "acme",
    }
    binary_headers = {"Ce-" + k.capitalize(): v for k, v in attrs.items()}
    binary_headers["Content-Type"] = "application/json"
    binary_headers["User-Agent"] = "bench/1.0"
    structured = dict(attrs, datacontenttype="application/json", data=data)
    return {
        "binary": (binary_headers, json.dumps(data).encode()),
        "structured": (
            {"Content-Type": "application/cloudevents+json; charset=utf-8"},
            json.dumps(structured).encode(),
        ),
    }


def rates(fns: dict[str, Callable[[], object]], rounds: int = 5) -> dict[str, float]:
    """Calls per second of each function: best of ``rounds`` calibrated runs, interleaved so that
    load from other processes on a shared machine hits ours and the SDK's alike."""
    loops = {}
    for name, fn in fns.items():
        n = 1
        while True:
            t0 = time.perf_counter()
            for _ in range(n):
                fn()
            elapsed = time.perf_counter() - t0
            if elapsed > BUDGET_S / 5:
                break
            n *= 4
        loops[name] = max(1, int(n * BUDGET_S / elapsed))
    best = dict.fromkeys(fns, float("inf"))
    for _ in range(rounds):
        for name, fn in fns.items():
            t0 = time.perf_counter()
            for _ in range(loops[name]):
                fn()
            best[name] = min(best[name], (time.perf_counter() - t0) / loops[name])
    return {name: 1.0 / seconds for name, seconds in best.items()}


def stdlib_only(fn: Callable[[], object]) -> Callable[[], object]:
    def run() -> object:
        saved = codec_json._msgspec_decode, codec_json._msgspec_encode
        codec_json._msgspec_decode = codec_json._msgspec_encode = None
        try:
            return fn()
        finally:
            codec_json._msgspec_decode, codec_json._msgspec_encode = saved

    return run


def measure(mode: str, headers: dict[str, str], body: bytes) -> dict[str, float]:
    fmt = JSONFormat()
    ours = codec.decode_http(headers, body)[0]
    msg = sdk2.HTTPMessage(headers=headers, body=body)
    ev2 = sdk2.from_http(msg, fmt)
    ev1 = sdk1.from_http(headers, body)
    if mode == "binary":
        enc_ours: Callable[[], object] = lambda: codec.encode_binary(ours)  # noqa: E731
        enc2: Callable[[], object] = lambda: sdk2.to_binary(ev2, fmt)  # noqa: E731
        enc1: Callable[[], object] = lambda: sdk1.to_binary(ev1)  # noqa: E731
    else:
        enc_ours = lambda: codec.encode_structured(ours)  # noqa: E731
        enc2 = lambda: sdk2.to_structured(ev2, fmt)  # noqa: E731
        enc1 = lambda: sdk1.to_structured(ev1)  # noqa: E731
    result = rates(
        {
            "decode_ours": lambda: codec.decode_http(headers, body),
            "decode_sdk2": lambda: sdk2.from_http(sdk2.HTTPMessage(headers, body), fmt),
            "decode_sdk1": lambda: sdk1.from_http(headers, body),
            "encode_ours": enc_ours,
            "encode_sdk2": enc2,
            "encode_sdk1": enc1,
            "json_loads": lambda: json.loads(body),
            # ours with the stdlib JSON path only (as where no accelerator is installed)
            "decode_ours_stdlib": stdlib_only(lambda: codec.decode_http(headers, body)),
            "encode_ours_stdlib": stdlib_only(enc_ours),
        }
    )
    return result


def main() -> None:
    figures: dict[str, float] = {}
    detail: dict[str, dict[str, float]] = {}
    rows = []
    for size_name, size in (("1k", 1024), ("64k", 64 * 1024)):
        cases = inputs(size)
        for mode in ("binary", "structured"):
            headers, body = cases[mode]
            r = measure(mode, headers, body)
            detail[f"{mode}_{size_name}"] = {k: round(v, 1) for k, v in r.items()}
            dec = r["decode_ours"] / max(r["decode_sdk2"], r["decode_sdk1"])
            enc = r["encode_ours"] / max(r["encode_sdk2"], r["encode_sdk1"])
            figures[f"{mode}_{size_name}_vs_sdk"] = min(dec, enc)
            if mode == "structured" and size_name == "1k":
                figures["structured_1k_time_vs_json_loads"] = r["json_loads"] / r["decode_ours"]
            stdlib_sdk = min(
                r["decode_ours_stdlib"] / max(r["decode_sdk2"], r["decode_sdk1"]),
                r["encode_ours_stdlib"] / max(r["encode_sdk2"], r["encode_sdk1"]),
            )
            detail[f"{mode}_{size_name}"]["vs_sdk_stdlib_json"] = round(stdlib_sdk, 3)
            for op in ("decode", "encode"):
                rows.append(
                    (
                        f"{mode} {size_name} ({len(body)} B)",
                        op,
                        f"{r[f'{op}_ours']:,.0f}",
                        f"{r[f'{op}_sdk2']:,.0f}",
                        f"{r[f'{op}_sdk1']:,.0f}",
                        f"{r['json_loads']:,.0f}" if op == "decode" else "",
                        f"{dec if op == 'decode' else enc:.2f}x",
                        f"{r[f'{op}_ours_stdlib'] / max(r[f'{op}_sdk2'], r[f'{op}_sdk1']):.2f}x",
                    )
                )
    print_table(
        rows,
        ("event", "op", "ours/s", "sdk v2/s", "sdk v1/s", "json.loads/s", "ours/sdk", "stdlib/sdk"),
    )
    notes = (
        "ours vs cloudevents 2.2.0 (best of v2 core and v1 API per operation); figure = weaker of "
        "decode+validate and encode; JSON data; structured_1k_time_vs_json_loads = our decode "
        f"time / json.loads time of the same bytes; JSON parser/writer: {JSON_ACCELERATOR} "
        "(detail.*.vs_sdk_stdlib_json: the same figure with the stdlib json path only)"
    )
    write_result("codec", figures, notes, detail=detail, json_accelerator=JSON_ACCELERATOR)


if __name__ == "__main__":
    main()
