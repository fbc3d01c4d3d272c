"""``brokerctl trigger create --audience`` (docs/targets.md, "Authenticated HTTP delivery"): the
subscriber's audience, next to its uri; refused with a transform, which is not called over HTTP."""

from __future__ import annotations

from tests.cli.conftest import RecordingApi, Runner


def test_trigger_create_with_an_audience(api: RecordingApi, cli: Runner) -> None:
    r = cli("trigger", "create", "t", "--sink", "https://orders.example/", "--audience", "orders")
    assert r.code == 0, r.err
    (seen,) = api.seen
    assert seen.json()["spec"]["subscriber"] == {
        "uri": "https://orders.example/",
        "audience": "orders",
    }


def test_an_audience_with_a_transform_is_a_usage_error(api: RecordingApi, cli: Runner) -> None:
    r = cli("trigger", "create", "t", "--transform", "tx", "--audience", "orders")
    assert r.code != 0 and "--audience" in r.err
    assert api.seen == []
