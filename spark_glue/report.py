"""The HTML report: one self-contained file (inline CSS and SVG drawn here, no script, no network)
from ``summary.json``. Every chart is an ``<svg class="chart">`` whose data marks carry the class
``mark``, so a test can check in a browser that each one rendered."""

from __future__ import annotations

from collections.abc import Sequence
from html import escape
from typing import Any

COLORS = {
    "accepted": "#2b6cb0",
    "rejected": "#c53030",
    "delivered": "#2f855a",
    "replies": "#68d391",
    "retries": "#d69e2e",
    "dead_lettered": "#c53030",
    "p50": "#90cdf4",
    "p95": "#3182ce",
    "p99": "#1a365d",
    "types": "#6b46c1",
}
_CSS = """
body{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#1a202c;max-width:1100px}
h1{font-size:22px}h2{font-size:17px;margin-top:28px}
.cards{display:flex;flex-wrap:wrap;gap:10px}
.card{border:1px solid #e2e8f0;border-radius:6px;padding:8px 12px;min-width:120px}
.card b{display:block;font-size:20px}.card span{color:#4a5568;font-size:12px}
svg.chart{display:block;margin:6px 0}svg text{font-size:11px;fill:#2d3748}
.legend span{display:inline-block;margin-right:14px}
.legend i{display:inline-block;width:10px;height:10px;margin-right:4px}
table{border-collapse:collapse}
td,th{border-bottom:1px solid #e2e8f0;padding:4px 10px;text-align:right}
td:first-child,th:first-child{text-align:left}.muted{color:#718096}
"""


def render(summary: dict[str, Any]) -> str:
    d, i, g = summary["delivery"], summary["input"], summary["ingress"]
    window = summary.get("window") or {}
    cards = [
        ("records", i["records"]),
        ("accepted", g["accepted"]),
        ("rejected", g["rejected"]),
        ("no match", g["no_match"]),
        ("delivered", d["delivered"]),
        ("dead-lettered", d["dead_lettered"]),
        ("retries", d["retries"]),
        ("p99 latency ms", _num(d.get("latency_p99_ms"))),
        ("malformed lines", i["malformed"]),
        ("duplicates", i["duplicates"]),
    ]
    body = [
        "<h1>Serverless Broker — archive metrics</h1>",
        f'<p class="muted">{escape(str(window.get("first")))} — {escape(str(window.get("last")))}'
        f" · {summary['brokers']} brokers · {summary['triggers']} triggers"
        f" · {i['late']} late records</p>",
        '<div class="cards">'
        + "".join(
            f"<div class=card><b>{escape(str(v))}</b><span>{k}</span></div>" for k, v in cards
        )
        + "</div>",
        "<h2>Traffic per hour</h2>",
        _legend(["accepted", "rejected"]),
        _lines(summary["traffic"], ["accepted", "rejected"], "traffic"),
        "<h2>Outcomes per trigger</h2>",
        _legend(["delivered", "replies", "retries", "dead_lettered"]),
        _stacked(summary["per_trigger"]),
        "<h2>Delivery latency per trigger (ms, arrival to delivered)</h2>",
        _legend(["p50", "p95", "p99"]),
        _latency(summary["per_trigger"]),
        "<h2>Top event types</h2>",
        _bars(
            [(t["event_type"], t["events"]) for t in summary["top_event_types"]], "types", "types"
        ),
        "<h2>Worst triggers</h2>",
        _bars(
            [
                (_trigger(t), round(100 * t["dead_letter_rate"], 2))
                for t in summary["worst_triggers"]
            ],
            "dead_lettered",
            "worst",
            unit="% dead-lettered",
        ),
        _worst_table(summary["worst_triggers"]),
    ]
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        "<title>Broker metrics</title>"
        f"<style>{_CSS}</style></head><body>{''.join(body)}</body></html>\n"
    )


def _trigger(t: dict[str, Any]) -> str:
    return f"{t['namespace']}/{t['broker']}/{t['trigger']}"


def _num(value: Any) -> str:
    return "—" if value is None else f"{value:,.1f}"


def _legend(names: Sequence[str]) -> str:
    items = "".join(
        f'<span><i style="background:{COLORS[n]}"></i>{n.replace("_", "-")}</span>' for n in names
    )
    return f'<div class="legend">{items}</div>'


def _empty(name: str, width: int = 1000) -> str:
    return (
        f'<svg class="chart" data-chart="{name}" width="{width}" height="40">'
        '<text x="0" y="24">no data</text></svg>'
    )


def _lines(rows: list[dict[str, Any]], series: list[str], name: str) -> str:
    """One polyline per series over the hours, each point a marked circle."""
    if not rows:
        return _empty(name)
    width, height, left, bottom = 1000, 260, 60, 40
    plot_w, plot_h = width - left - 20, height - bottom - 10
    top = max(max(r[s] or 0 for s in series) for r in rows) or 1
    step = plot_w / max(len(rows) - 1, 1)

    def xy(k: int, value: float) -> tuple[float, float]:
        return left + k * step, 10 + plot_h - plot_h * value / top

    parts = _axes(left, 10, plot_w, plot_h, top)
    for s in series:
        points = [xy(k, r[s] or 0) for k, r in enumerate(rows)]
        path = " ".join(f"{x:.1f},{y:.1f}" for x, y in points)
        parts.append(
            f'<polyline fill="none" stroke="{COLORS[s]}" stroke-width="1.5" points="{path}"/>'
        )
        r = 2.5 if len(rows) <= 200 else 1.2
        parts += [
            f'<circle class="mark" data-series="{s}" cx="{x:.1f}" cy="{y:.1f}" r="{r}" '
            f'fill="{COLORS[s]}"><title>{escape(str(row["hour"]))} {s}: {row[s]}</title></circle>'
            for (x, y), row in zip(points, rows, strict=True)
        ]
    labels = {0, len(rows) - 1, len(rows) // 2}
    for k in sorted(labels):
        x, _ = xy(k, 0)
        anchor = "start" if k == 0 else "end" if k == len(rows) - 1 else "middle"
        parts.append(
            f'<text x="{x:.1f}" y="{height - 18}" text-anchor="{anchor}">'
            f"{escape(str(rows[k]['hour'])[:13])}h</text>"
        )
    return _svg(name, width, height, parts)


def _axes(left: float, top: float, w: float, h: float, maximum: float) -> list[str]:
    return [
        f'<line x1="{left}" y1="{top + h}" x2="{left + w}" y2="{top + h}" stroke="#a0aec0"/>',
        f'<line x1="{left}" y1="{top}" x2="{left}" y2="{top + h}" stroke="#a0aec0"/>',
        f'<text x="{left - 6}" y="{top + 10}" text-anchor="end">{maximum:,.0f}</text>',
        f'<text x="{left - 6}" y="{top + h}" text-anchor="end">0</text>',
    ]


def _stacked(triggers: list[dict[str, Any]]) -> str:
    """Per trigger, one horizontal bar of its attempts split by outcome."""
    if not triggers:
        return _empty("outcomes")
    label_w, bar_w, row_h = 300, 640, 22
    parts: list[str] = []
    top = max(t["attempts"] for t in triggers) or 1
    for k, t in enumerate(triggers):
        y = k * row_h + 4
        parts.append(
            f'<text x="{label_w - 8}" y="{y + 13}" text-anchor="end">{escape(_trigger(t))}</text>'
        )
        x = float(label_w)
        segments = {
            "delivered": t["delivered"] - t["replies"],
            "replies": t["replies"],
            "retries": t["retries"],
            "dead_lettered": t["dead_lettered"],
        }
        for name, value in segments.items():
            if value <= 0:
                continue
            w = bar_w * value / top
            parts.append(
                f'<rect class="mark" data-series="{name}" x="{x:.1f}" y="{y}"'
                f' width="{max(w, 0.5):.1f}" height="{row_h - 6}" fill="{COLORS[name]}">'
                f"<title>{name}: {value}</title></rect>"
            )
            x += w
        parts.append(f'<text x="{x + 6:.1f}" y="{y + 13}">{t["attempts"]:,} attempts</text>')
    return _svg("outcomes", label_w + bar_w + 120, len(triggers) * row_h + 8, parts)


def _latency(triggers: list[dict[str, Any]]) -> str:
    rows = [t for t in triggers if t.get("latency_p50_ms") is not None]
    if not rows:
        return _empty("latency")
    label_w, bar_w, bar_h = 300, 600, 7
    keys = [("p50", "latency_p50_ms"), ("p95", "latency_p95_ms"), ("p99", "latency_p99_ms")]
    top = max(max(t[k] or 0 for _, k in keys) for t in rows) or 1
    parts: list[str] = []
    group_h = bar_h * 3 + 10
    for n, t in enumerate(rows):
        y0 = n * group_h + 4
        parts.append(
            f'<text x="{label_w - 8}" y="{y0 + 14}" text-anchor="end">{escape(_trigger(t))}</text>'
        )
        for j, (label, key) in enumerate(keys):
            value = max(t[key] or 0.0, 0.0)
            w = max(bar_w * value / top, 0.5)
            y = y0 + j * bar_h
            parts.append(
                f'<rect class="mark" data-series="{label}" x="{label_w}" y="{y}" width="{w:.1f}"'
                f' height="{bar_h - 1}" fill="{COLORS[label]}">'
                f"<title>{label}: {value:,.1f} ms</title></rect>"
            )
        parts.append(
            f'<text x="{label_w + bar_w * (t["latency_p99_ms"] or 0) / top + 6:.1f}" y="{y0 + 14}">'
            f"p99 {_num(t['latency_p99_ms'])} ms</text>"
        )
    return _svg("latency", label_w + bar_w + 140, len(rows) * group_h + 8, parts)


def _bars(items: list[tuple[str, float]], color: str, name: str, unit: str = "") -> str:
    if not items:
        return _empty(name)
    label_w, bar_w, row_h = 300, 600, 22
    top = max(v for _, v in items) or 1
    parts: list[str] = []
    for k, (label, value) in enumerate(items):
        y = k * row_h + 4
        w = max(bar_w * value / top, 0.5)
        parts += [
            f'<text x="{label_w - 8}" y="{y + 13}" text-anchor="end">{escape(str(label))}</text>',
            f'<rect class="mark" x="{label_w}" y="{y}" width="{w:.1f}" height="{row_h - 6}"'
            f' fill="{COLORS[color]}"><title>{escape(str(label))}: {value:,}</title></rect>',
            f'<text x="{label_w + w + 6:.1f}" y="{y + 13}">{value:,} {escape(unit)}</text>',
        ]
    return _svg(name, label_w + bar_w + 160, len(items) * row_h + 8, parts)


def _worst_table(triggers: list[dict[str, Any]]) -> str:
    head = "<tr><th>trigger</th><th>attempts</th><th>delivered</th><th>retries</th>"
    head += "<th>dead-lettered</th><th>transport errors</th><th>p99 ms</th></tr>"
    rows = "".join(
        f"<tr><td>{escape(_trigger(t))}</td><td>{t['attempts']:,}</td><td>{t['delivered']:,}</td>"
        f"<td>{t['retries']:,}</td><td>{t['dead_lettered']:,}</td>"
        f"<td>{t['transport_errors']:,}</td><td>{_num(t['latency_p99_ms'])}</td></tr>"
        for t in triggers
    )
    return f"<table>{head}{rows}</table>"


def _svg(name: str, width: float, height: float, parts: list[str]) -> str:
    return (
        f'<svg class="chart" data-chart="{name}" xmlns="http://www.w3.org/2000/svg"'
        f' width="{width:.0f}" height="{height:.0f}" viewBox="0 0 {width:.0f} {height:.0f}">'
        + "".join(parts)
        + "</svg>"
    )
