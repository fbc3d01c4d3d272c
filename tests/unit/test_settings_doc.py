"""docs/settings.md lists every BROKER_* environment variable the code reads, once, and nothing
else: a setting added, renamed or deleted without its line fails here."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SETTINGS_DOC = ROOT / "docs" / "settings.md"
# A name as the code reads it: quoted (os.environ.get("BROKER_X"), env.get("BROKER_X")), so that
# constants such as BROKER_READY are not taken for settings.
_READ = re.compile(r"""["'`](BROKER_[A-Z0-9_]+)\b""")
# A name anywhere in a file that sets variables for the code to read.
_NAMED = re.compile(r"\bBROKER_[A-Z0-9_]+\b")
_ROW = re.compile(r"^\| `(BROKER_[A-Z0-9_]+)` \|(.*)$", re.MULTILINE)


def _read_by_the_code() -> set[str]:
    files = [ROOT / "app.py"]
    for folder in ("chalicelib", "brokerctl", "infra"):
        files += (ROOT / folder).rglob("*.py")
    return {name for f in files for name in _READ.findall(f.read_text(encoding="utf-8"))}


def _set_for_the_code() -> set[str]:
    """What the stage configurations, the shared stack and the benchmarks set."""
    files = [ROOT / ".chalice" / "config.json", ROOT / "infra" / "template.yaml", ROOT / "Makefile"]
    files += (ROOT / "benchmarks").glob("*.py")
    return {name for f in files for name in _NAMED.findall(f.read_text(encoding="utf-8"))}


def _rows() -> list[tuple[str, str]]:
    return _ROW.findall(SETTINGS_DOC.read_text(encoding="utf-8"))


def test_every_setting_is_documented_once_and_nothing_else() -> None:
    names = [name for name, _ in _rows()]
    assert len(names) == len(set(names)), "a setting listed twice"
    read = _read_by_the_code()
    assert read, "no BROKER_* name found in the code: the pattern is broken"
    assert set(names) == read, {
        "undocumented": sorted(read - set(names)),
        "not read": sorted(set(names) - read),
    }


def test_nothing_sets_a_variable_the_code_does_not_read() -> None:
    stale = _set_for_the_code() - _read_by_the_code()
    assert not stale, f"set in a stage, the template or a benchmark, read by nothing: {stale}"


def test_each_row_gives_the_default_the_reader_and_what_it_does() -> None:
    for name, rest in _rows():
        cells = [cell.strip() for cell in rest.rstrip().removesuffix("|").split(" | ")]
        assert len(cells) == 3 and all(cells), (name, cells)


def test_the_functions_have_fewer_settings_than_before_the_simplification() -> None:
    config = (ROOT / "chalicelib" / "config.py").read_text(encoding="utf-8")
    assert len(set(_READ.findall(config))) < 33
