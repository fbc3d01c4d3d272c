"""``brokerctl replay``: arguments → requests, answers → output and exit codes."""

from __future__ import annotations

import argparse
from datetime import UTC, datetime

import pytest

from brokerctl.client import CliError
from brokerctl.commands_replay import moment, wait_succeeded
from tests.cli.conftest import RecordingApi, Runner

CP = "/apis/eventing.knative.dev/v1/namespaces"
PATH = f"{CP}/shop/brokers/orders/replays/again"


def _doc(status: str, reason: str = "", read: int = 0) -> dict[str, object]:
    return {
        "metadata": {"name": "again", "broker": "orders"},
        "spec": {"from": "2026-01-31T10:00:00.000Z", "to": "2026-01-31T11:00:00.000Z"},
        "status": {
            "conditions": [{"type": "Succeeded", "status": status, "reason": reason}],
            "progress": {"eventsRead": read, "eventsEnqueued": read},
        },
    }


def test_create_puts_the_spec_under_the_broker(api: RecordingApi, cli: Runner) -> None:
    api.answer("PUT", PATH, 201, _doc("Unknown", "Pending"))
    r = cli(
        "replay", "create", "again", "-n", "shop", "--broker", "orders",
        "--from", "2026-01-31T10:00:00Z", "--to", "2026-01-31T11:00:00Z",
        "--trigger", "a", "--trigger", "b", "--filter", '{"prefix": {"type": "com."}}',
    )  # fmt: skip
    assert r.code == 0, r.err
    (seen,) = api.seen
    assert (seen.method, seen.path) == ("PUT", PATH)
    assert seen.json() == {
        "apiVersion": "eventing.knative.dev/v1",
        "kind": "Replay",
        "metadata": {"name": "again"},
        "spec": {
            "from": "2026-01-31T10:00:00Z",
            "to": "2026-01-31T11:00:00Z",
            "triggers": ["a", "b"],
            "filters": [{"prefix": {"type": "com."}}],
        },
    }
    assert "Replay 'again' of broker 'orders' created" in r.out


def test_create_with_packing_asks_for_packs(api: RecordingApi, cli: Runner) -> None:
    api.answer("PUT", PATH, 201, _doc("Unknown", "Pending"))
    r = cli("replay", "create", "again", "-n", "shop", "--broker", "orders", "--from", "1h")
    assert r.code == 0, r.err
    r = cli(
        "replay", "create", "again", "-n", "shop", "--broker", "orders", "--from", "1h",
        "--packing",
    )  # fmt: skip
    assert r.code == 0, r.err
    plain, packed = (seen.json()["spec"] for seen in api.seen)
    assert "packing" not in plain and packed["packing"] is True


def test_a_filter_that_is_not_json_is_a_usage_error(api: RecordingApi, cli: Runner) -> None:
    r = cli("replay", "create", "x", "--from", "1h", "--filter", "{nope")
    assert r.code == 2 and "not JSON" in r.err
    assert api.seen == []


def test_list_describe_and_cancel(api: RecordingApi, cli: Runner) -> None:
    api.answer(
        "GET", f"{CP}/shop/brokers/orders/replays", doc={"items": [_doc("True", "Completed", 7)]}
    )
    r = cli("replay", "list", "-n", "shop", "--broker", "orders")
    assert r.code == 0 and "again" in r.out and "Completed" in r.out
    api.answer("GET", PATH, doc=_doc("True", "Completed", 7))
    r = cli("replay", "describe", "again", "-n", "shop", "--broker", "orders")
    assert r.code == 0 and "Read:         7" in r.out
    r = cli("replay", "cancel", "again", "-n", "shop", "--broker", "orders")
    assert r.code == 0 and api.seen[-1].method == "DELETE" and api.seen[-1].path == PATH


def test_wait_polls_until_succeeded_and_fails_on_false_or_timeout() -> None:
    answers = iter([_doc("Unknown", "Pending"), _doc("Unknown", "Running", 3), _doc("True", "", 5)])
    doc = wait_succeeded(lambda: next(answers), "again", 10, sleep=lambda s: None)
    assert doc["status"]["progress"]["eventsRead"] == 5  # type: ignore[index]
    with pytest.raises(CliError, match="failed: BrokerDoesNotExist"):
        wait_succeeded(
            lambda: _doc("False", "BrokerDoesNotExist"), "again", 10, sleep=lambda s: None
        )
    ticks = iter([0.0, 5.0, 11.0])
    with pytest.raises(CliError, match="not Succeeded after 10s"):
        wait_succeeded(
            lambda: _doc("Unknown", "Running"),
            "again",
            10,
            clock=lambda: next(ticks),
            sleep=lambda s: None,
        )


def test_times_are_rfc3339_now_or_an_age() -> None:
    now = datetime(2026, 1, 31, 12, 0, tzinfo=UTC)
    assert moment("now", now) == "2026-01-31T12:00:00.000Z"
    assert moment("90m", now) == "2026-01-31T10:30:00.000Z"
    assert moment("1d", now) == "2026-01-30T12:00:00.000Z"
    assert moment("2026-01-31T10:00:00+01:00", now) == "2026-01-31T10:00:00+01:00"
    with pytest.raises(argparse.ArgumentTypeError):
        moment("yesterday", now)
