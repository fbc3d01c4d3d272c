"""``brokerctl trigger create --dead-letter-audience`` and ``--integration-sink`` (docs/targets.md):
the dead-letter sink's audience next to its uri (a usage error without one), and a subscriber
that is a ref to an IntegrationSink."""

from __future__ import annotations

from tests.cli.conftest import RecordingApi, Runner

SINK_REF = {"apiVersion": "sinks.knative.dev/v1alpha1", "kind": "IntegrationSink", "name": "s3"}


def test_trigger_create_dead_letter_audience_and_integration_sink(
    api: RecordingApi, cli: Runner
) -> None:
    r = cli(
        "trigger", "create", "t", "--integration-sink", "s3",
        "--dead-letter-sink", "https://dlq.example/", "--dead-letter-audience", "dlq",
    )  # fmt: skip
    assert r.code == 0, r.err
    (seen,) = api.seen
    spec = seen.json()["spec"]
    assert spec["subscriber"] == {"ref": SINK_REF}
    assert spec["delivery"]["deadLetterSink"] == {"uri": "https://dlq.example/", "audience": "dlq"}


def test_a_dead_letter_audience_without_a_dead_letter_sink_is_a_usage_error(
    api: RecordingApi, cli: Runner
) -> None:
    r = cli("trigger", "create", "t", "--sink", "https://s.example/", "--dead-letter-audience", "a")
    assert r.code != 0 and "--dead-letter-audience" in r.err
    assert api.seen == []


def test_an_audience_with_an_integration_sink_is_a_usage_error(
    api: RecordingApi, cli: Runner
) -> None:
    r = cli("trigger", "create", "t", "--integration-sink", "s3", "--audience", "a")
    assert r.code != 0 and "--audience" in r.err
    assert api.seen == []


def test_trigger_list_names_the_kind_a_subscriber_ref_points_at(
    api: RecordingApi, cli: Runner
) -> None:
    transform = {**SINK_REF, "kind": "EventTransform", "name": "tx"}
    items = [
        {"metadata": {"name": n}, "spec": {"broker": "default", "subscriber": {"ref": ref}}}
        for n, ref in (("to-sink", SINK_REF), ("to-tx", transform))
    ]
    path = "/apis/eventing.knative.dev/v1/namespaces/default/triggers"
    api.answer("GET", path, doc={"items": items})
    r = cli("trigger", "list")
    assert r.code == 0, r.err
    assert "integrationsink/s3" in r.out and "eventtransform/tx" in r.out
