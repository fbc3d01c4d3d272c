"""Shared by every benchmark: write ``benchmarks/results/<name>.json`` and print a short table."""

from __future__ import annotations

import json
import platform
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"


def write_result(name: str, figures: dict[str, float], notes: str, **extra: Any) -> Path:
    """Write the result in the design.md §11 shape and print the figures."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    doc: dict[str, Any] = {
        "benchmark": name,
        "figures": {k: round(float(v), 4) for k, v in figures.items()},
        "notes": notes,
        "machine": {"python": platform.python_version(), "cpu_count": _cpus()},
    }
    doc.update(extra)
    path = RESULTS / f"{name}.json"
    path.write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n")
    width = max(len(k) for k in figures) if figures else 10
    print(f"\n{name}: {notes}")
    for key, value in figures.items():
        print(f"  {key:<{width}}  {value:,.3f}")
    print(f"  -> {path}")
    return path


def print_table(rows: list[tuple[str, ...]], header: tuple[str, ...]) -> None:
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    for row in [header, *rows]:
        print("  ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=True)))


def _cpus() -> int:
    import os

    return os.cpu_count() or 1
