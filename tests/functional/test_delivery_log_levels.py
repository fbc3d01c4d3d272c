"""What a delivery invocation logs, and at which level. CloudWatch Logs bills $0.50 a GB
ingested: a successful delivery writes its line at DEBUG only, what went wrong (a retry, a dead
letter) stays INFO, and every invocation writes one INFO summary line."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from chalicelib.ports import HttpResponse
from tests.functional.harness import Harness

REPLY = HttpResponse(
    200,
    {"ce-specversion": "1.0", "ce-id": "r-1", "ce-source": "/sub", "ce-type": "reply"},
    b"",
)


class Kept(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)

    def at(self, level: int) -> list[str]:
        return [r.getMessage() for r in self.records if r.levelno == level]


@pytest.fixture
def logged() -> Iterator[Kept]:
    # Its own handler on the delivery logger: independent of propagation and of the root level.
    logger = logging.getLogger("broker.delivery")
    kept, level = Kept(), logger.level
    logger.addHandler(kept)
    logger.setLevel(logging.DEBUG)
    yield kept
    logger.removeHandler(kept)
    logger.setLevel(level)


def deliver(*answers: HttpResponse, retry: int = 3, events: int = 1) -> dict[str, object]:
    h = Harness(*answers)
    h.broker()
    h.trigger("tr", delivery={"retry": retry})
    for n in range(events):
        assert h.send(id_=f"e-{n}").status == 202
    return h.deliver_once("tr")


@pytest.mark.parametrize(
    ("answer", "shown"),
    [(HttpResponse(202, {}, b""), "-> 202 delivered"), (REPLY, "-> 200 reply")],
)
def test_a_successful_delivery_logs_nothing_at_info_but_the_summary(
    logged: Kept, answer: HttpResponse, shown: str
) -> None:
    deliver(answer, answer, events=2)
    assert logged.at(logging.INFO) == ["batch of 2, 0 back to the queue"]
    lines = logged.at(logging.DEBUG)  # the line is still there for whoever asks for DEBUG
    assert len(lines) == 2 and all(shown in line for line in lines), lines
    [record] = [r for r in logged.records if r.levelno == logging.DEBUG and "e-0" in r.getMessage()]
    keys = record.__dict__
    assert (keys["event_id"], keys["trigger"], keys["attempt"]) == ("e-0", "tr", 1)


def test_a_retry_is_logged_at_info(logged: Kept) -> None:
    answer = deliver(HttpResponse(503, {}, b""))
    assert len(answer["batchItemFailures"]) == 1  # type: ignore[arg-type]
    info = logged.at(logging.INFO)
    assert len(info) == 2 and "id=e-0 attempt=1 -> 503 retry" in info[0]
    assert info[1] == "batch of 1, 1 back to the queue"
    assert logged.at(logging.DEBUG) == []


def test_a_dead_letter_is_logged_at_info(logged: Kept) -> None:
    deliver(HttpResponse(400, {}, b""), retry=0)
    info = logged.at(logging.INFO)
    assert len(info) == 2 and "id=e-0 attempt=1 -> 400 dead_lettered" in info[0]
    assert info[1] == "batch of 1, 0 back to the queue"
    assert logged.at(logging.DEBUG) == []
