"""Deep JSON data at ingress with an eventPattern trigger on data (issue 31, item 4): structured
data nested deeper than 64 levels is a 400 naming the limit, never a 500; binary JSON data that
deep is accepted (its bytes are opaque) and simply does not match a data pattern."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from chalicelib.core.limits import MAX_PATTERN_WORK
from chalicelib.ports import HttpResponse
from tests.functional.harness import Harness


@pytest.fixture
def h() -> Iterator[Harness]:
    h = Harness(HttpResponse(500, {}, b""))
    h.broker()
    h.trigger("on-data", filters=[{"eventPattern": {"data": {"k": ["x"]}}}])
    h.trigger("all")
    yield h


def nested(levels: int) -> str:
    """JSON text: an object in ``levels - 1`` arrays (``levels`` levels in all)."""
    return "[" * (levels - 1) + '{"k": "x"}' + "]" * (levels - 1)


STRUCTURED = {"content-type": "application/cloudevents+json"}


def structured(data: str, id_: str) -> bytes:
    head = {"specversion": "1.0", "id": id_, "source": "/s", "type": "t"}
    return (json.dumps(head)[:-1] + ', "data": ' + data + "}").encode()


def ids(h: Harness, trigger: str) -> list[str]:
    return sorted(m["event"]["id"] for m in h.messages(h.queue_of(trigger)))


@pytest.mark.parametrize("levels", [65, 900, 5000])
def test_structured_data_too_deep_is_a_400_naming_the_limit(h: Harness, levels: int) -> None:
    answer = h.post(STRUCTURED, structured(nested(levels), "deep"))
    assert answer.status == 400
    (error,) = json.loads(answer.body)["errors"]
    if levels < 1000:  # the parsers read it: the data's depth is checked
        assert error == {"field": "data", "message": "nests deeper than 64 levels of JSON"}
    else:  # deeper than any parser here reads
        assert error["field"] == "body" and "at most 64 levels" in error["message"]
    assert ids(h, "all") == []


def test_a_batch_names_the_deep_event(h: Harness) -> None:
    body = b"[" + structured(nested(10), "ok") + b"," + structured(nested(900), "deep") + b"]"
    answer = h.post({"content-type": "application/cloudevents-batch+json"}, body)
    assert answer.status == 400
    assert json.loads(answer.body)["errors"][0]["field"] == "[1].data"


def test_data_at_the_limit_is_matched(h: Harness) -> None:
    assert h.post(STRUCTURED, structured(nested(64), "at-limit")).status == 202
    assert ids(h, "on-data") == ["at-limit"]


def test_binary_json_data_too_deep_is_accepted_and_matches_no_data_pattern(h: Harness) -> None:
    headers = {
        "ce-specversion": "1.0",
        "ce-id": "bin-deep",
        "ce-source": "/s",
        "ce-type": "t",
        "content-type": "application/json",
    }
    assert h.post(headers, nested(900).encode()).status == 202
    assert ids(h, "all") == ["bin-deep"]
    assert ids(h, "on-data") == []


def test_an_event_past_the_pattern_work_budget_is_delivered_elsewhere_and_counted(
    h: Harness,
) -> None:
    """The budget's overrun is a metric, not only a log line: an operator can alarm on it."""
    h.trigger("on-array", filters=[{"eventPattern": {"data": [-1]}}])
    data = "[" + ",".join(["0"] * (MAX_PATTERN_WORK + 1)) + "]"
    assert h.post(STRUCTURED, structured(data, "huge")).status == 202
    assert len(h.messages(h.queue_of("all"))) == 1  # its claim check: it is over 256 KB
    assert ids(h, "on-array") == []
    assert budget_overruns(h) == "1"
    assert h.post(STRUCTURED, structured("[0, -1]", "small")).status == 202
    assert ids(h, "on-array") == ["small"]
    assert budget_overruns(h) == "1"


def budget_overruns(h: Harness) -> str:
    prefix = 'broker_pattern_budget_exceeded_count_total{broker="default",namespace="ns"} '
    lines = h.container.metrics.prometheus_text().splitlines()
    return next((line.removeprefix(prefix) for line in lines if line.startswith(prefix)), "0")
