"""Runs every case of the CESQL TCK (../shared/specs/cesql/tck/*.yaml) against our engine."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from chalicelib.core.cloudevents.event import CloudEvent
from chalicelib.core.filtering.cesql import CesqlParseError, evaluate, parse
from tests.shared_specs import require

# CI checks out ../shared beside the repo.
TCK_DIR = Path(__file__).absolute().parents[2].parent / "shared/specs/cesql/tck"
require(TCK_DIR)

BASE_EVENT = {"specversion": "1.0", "id": "tck-id", "source": "tck-source", "type": "tck-type"}


class _Loader(yaml.SafeLoader):
    """SafeLoader that keeps timestamps as text: the TCK compares ``time`` as a String."""


_Loader.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def _cases() -> list[Any]:
    files = sorted(TCK_DIR.glob("*.yaml"))
    assert files, f"no TCK files in {TCK_DIR}"
    params = []
    for path in files:
        suite = yaml.load(path.read_text(encoding="utf-8"), Loader=_Loader)
        for case in suite["tests"]:
            params.append(pytest.param(case, id=f"{path.stem}: {case['name']}"))
    return params


CASES = _cases()


def test_tck_is_complete() -> None:
    assert len(CASES) >= 200


@pytest.mark.parametrize("case", CASES)
def test_tck(case: dict[str, Any]) -> None:
    expression = str(case["expression"])
    if case.get("error") == "parse":
        with pytest.raises(CesqlParseError):
            parse(expression)
        return
    attributes = dict(case["event"]) if "event" in case else dict(BASE_EVENT)
    attributes.update(case.get("eventOverrides") or {})
    value, errors = evaluate(parse(expression), CloudEvent(attributes))
    if "result" in case:
        expected = case["result"]
        assert (type(value), value) == (type(expected), expected)
    kinds = {error.kind for error in errors}
    assert kinds == ({case["error"]} if "error" in case else set())
