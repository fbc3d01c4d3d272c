"""The HTML report of the hand-built archive, opened in headless Chromium (Debian's ``chromium``):
a screenshot, and the rendered DOM checked chart by chart for data marks."""

from __future__ import annotations

import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from spark_glue import pipeline, report
from tests.spark import sample_archive as sample

pytestmark = [pytest.mark.spark, pytest.mark.browser]
CHARTS = {"traffic", "outcomes", "latency", "types", "worst"}


def _chromium() -> str:
    found = Path("/usr/bin/chromium")
    if found.exists():
        return str(found)
    other = shutil.which("chromium") or shutil.which("chromium-browser")
    if other is None:
        pytest.skip("needs Debian's chromium: apt-get install -y chromium")
    return other


def _browse(html: Path, profile: Path, *mode: str) -> str:
    proc = subprocess.run(
        [
            _chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
            "--no-first-run", "--disable-background-networking", "--disable-component-update",
            "--disable-sync", f"--user-data-dir={profile}", "--window-size=1200,2000",
            *mode, html.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=90,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


class _Marks(HTMLParser):
    """Data marks per chart in the DOM as the browser built it."""

    def __init__(self) -> None:
        super().__init__()
        self.charts: dict[str, int] = {}
        self._current: str | None = None
        self._depth = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "svg" and "chart" in (a.get("class") or "").split():
            self._current, self._depth = a.get("data-chart") or "?", 0
            self.charts[self._current] = 0
        elif self._current is not None:
            self._depth += 1
            if "mark" in (a.get("class") or "").split():
                self.charts[self._current] += 1

    def handle_endtag(self, tag: str) -> None:
        if self._current is None:
            return
        if tag == "svg" and self._depth == 0:
            self._current = None
        else:
            self._depth -= 1


@pytest.fixture(scope="module")
def report_file(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("report")
    result = pipeline.compute(pipeline.read_archive(spark, [str(sample.write(root / "a"))]))
    result.release()
    path = root / "report.html"
    path.write_text(report.render(result.summary), encoding="utf-8")
    return path


def test_every_chart_renders_with_data_marks(report_file: Path, tmp_path: Path) -> None:
    dom = _browse(report_file, tmp_path / "profile", "--dump-dom")
    parser = _Marks()
    parser.feed(dom)
    assert set(parser.charts) == CHARTS
    assert all(n >= 1 for n in parser.charts.values()), parser.charts
    assert parser.charts["traffic"] == 2 * 3  # accepted and rejected over hours 10, 11, 12
    assert parser.charts["latency"] == 3 * 2  # p50/p95/p99 for t1 and t2
    assert "no data" not in dom


def test_screenshot(report_file: Path, tmp_path: Path) -> None:
    png = tmp_path / "report.png"
    _browse(report_file, tmp_path / "profile", f"--screenshot={png}")
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000


def test_the_report_is_self_contained(report_file: Path) -> None:
    html = report_file.read_text()
    for reference in ("<script", "http://", "https://", "<link", "@import", "url("):
        if reference == "http://":
            html = html.replace("http://www.w3.org/2000/svg", "")
        assert reference not in html, reference
