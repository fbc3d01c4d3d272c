"""``brokerctl trigger create`` filter flags (every dialect) and ``brokerctl trigger test``,
against the recording server: arguments → requests, answers → output."""

from __future__ import annotations

import json
from pathlib import Path

from tests.cli.conftest import RecordingApi, Runner

CP = "/apis/eventing.knative.dev/v1/namespaces"
EVENT = {"specversion": "1.0", "id": "1", "source": "s", "type": "t", "data": {"amount": 42}}


def test_trigger_create_has_a_flag_per_dialect(api: RecordingApi, cli: Runner, tmp_path: Path):
    pattern = tmp_path / "pattern.json"
    pattern.write_text(json.dumps({"data": {"amount": [{"numeric": [">", 100]}]}}))
    r = cli(
        "trigger", "create", "big", "--sink", "http://sub/",
        "--filters", '[{"not": {"exact": {"source": "test"}}}]',
        "--exact", "type=order", "--exact", "subject=a",
        "--prefix", "source=https://", "--suffix", "type=der",
        "--cesql", "subject LIKE 'a%'",
        "--event-pattern", f"@{pattern}", "--event-pattern", '{"type": ["order"]}',
    )  # fmt: skip
    assert r.code == 0, r.err
    assert api.seen[0].json()["spec"]["filters"] == [
        {"not": {"exact": {"source": "test"}}},
        {"exact": {"type": "order", "subject": "a"}},
        {"prefix": {"source": "https://"}},
        {"suffix": {"type": "der"}},
        {"cesql": "subject LIKE 'a%'"},
        {"eventPattern": {"data": {"amount": [{"numeric": [">", 100]}]}}},
        {"eventPattern": {"type": ["order"]}},
    ]
    assert "filter" not in api.seen[0].json()["spec"]


def test_bad_filter_flags_are_usage_errors(api: RecordingApi, cli: Runner):
    base = ("trigger", "create", "t", "--sink", "http://s/")
    assert cli(*base, "--event-pattern", "{nope").code == 2
    assert cli(*base, "--event-pattern", "@/nonexistent/p.json").code == 2
    r = cli(*base, "--filters", '{"exact": {}}')
    assert r.code != 0 and "--filters takes a JSON list" in r.err
    r = cli(*base, "--filter", "type=a", "--exact", "type=a")
    assert r.code != 0 and "--exact" in r.err
    assert api.seen == []


def test_trigger_test_with_filter_flags(api: RecordingApi, cli: Runner):
    path = f"{CP}/default/triggers-test"
    reason = 'filters[0].eventPattern.data.amount: [{"numeric": [">", 100]}] did not match 42'
    api.answer("POST", path, doc={"matched": False, "reasons": [reason]})
    r = cli(
        "trigger", "test", "--event", json.dumps(EVENT),
        "--event-pattern", '{"data": {"amount": [{"numeric": [">", 100]}]}}',
    )  # fmt: skip
    assert r.code == 0, r.err
    (seen,) = api.seen
    assert (seen.method, seen.path) == ("POST", path)
    assert seen.json() == {
        "event": EVENT,
        "filters": [{"eventPattern": {"data": {"amount": [{"numeric": [">", 100]}]}}}],
    }
    assert r.out.splitlines() == ["not matched", f"  {reason}"]


def test_trigger_test_by_name_and_as_json(api: RecordingApi, cli: Runner):
    answer = {"matched": True, "reasons": ['filter.attributes.type: matched "t"'], "trigger": "a"}
    api.answer("POST", f"{CP}/shop/triggers-test", doc=answer)
    r = cli("trigger", "test", "a", "-n", "shop", "--event", json.dumps(EVENT), "-o", "json")
    assert r.code == 0, r.err
    assert api.seen[0].json() == {"event": EVENT, "trigger": "a"}
    assert json.loads(r.out) == answer


def test_trigger_test_needs_exactly_one_filter_source(api: RecordingApi, cli: Runner):
    event = json.dumps(EVENT)
    assert cli("trigger", "test", "--event", event).code != 0
    assert cli("trigger", "test", "a", "--event", event, "--exact", "type=t").code != 0
    assert cli("trigger", "test", "--exact", "type=t").code == 2  # --event is required
    assert api.seen == []
    assert cli("trigger", "test", "--event", event, "--filter", "type=t").code == 0
    assert api.seen[0].json() == {"event": EVENT, "filter": {"attributes": {"type": "t"}}}
