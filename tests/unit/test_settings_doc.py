"""docs/settings.md lists every BROKER_* environment variable the code reads, once, and nothing
else: a setting added, renamed or deleted without its line fails here."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# A name as the code reads it: quoted (os.environ.get("BROKER_X"), env.get("BROKER_X")).
_READ = re.compile(r"""["'`](BROKER_[A-Z0-9_]+)\b""")
_DOCUMENTED = re.compile(r"^\| `(BROKER_[A-Z0-9_]+)` \|", re.MULTILINE)


def _read_by_the_code() -> set[str]:
    files = [ROOT / "app.py"]
    for folder in ("chalicelib", "brokerctl", "infra"):
        files += (ROOT / folder).rglob("*.py")
    return {name for f in files for name in _READ.findall(f.read_text(encoding="utf-8"))}


def test_every_setting_is_documented_once_and_nothing_else() -> None:
    rows = _DOCUMENTED.findall((ROOT / "docs" / "settings.md").read_text(encoding="utf-8"))
    assert len(rows) == len(set(rows)), "a setting listed twice"
    read = _read_by_the_code()
    assert set(rows) == read, {
        "undocumented": sorted(read - set(rows)),
        "not read": sorted(set(rows) - read),
    }


def test_the_functions_have_fewer_settings_than_before_the_simplification() -> None:
    config = (ROOT / "chalicelib" / "config.py").read_text(encoding="utf-8")
    assert len(set(_READ.findall(config))) < 33
