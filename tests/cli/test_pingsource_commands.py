"""``brokerctl pingsource`` (docs/sources.md): arguments -> HTTP requests, answers -> output,
against the recording server."""

from __future__ import annotations

from tests.cli.conftest import RecordingApi, Runner

PS = "/apis/sources.knative.dev/v1/namespaces"


def test_create_puts_the_schedule_data_sink_and_overrides(api: RecordingApi, cli: Runner) -> None:
    r = cli(
        "pingsource", "create", "hello", "-n", "shop", "--schedule", "*/2 * * * *",
        "--timezone", "Europe/Paris", "--data", '{"m": 1}', "--content-type", "application/json",
        "--sink", "broker:default", "--ce-override", "team=blue",
    )  # fmt: skip
    assert r.code == 0, r.err
    (seen,) = api.seen
    assert (seen.method, seen.path) == ("PUT", f"{PS}/shop/pingsources/hello")
    assert seen.json() == {
        "apiVersion": "sources.knative.dev/v1",
        "kind": "PingSource",
        "metadata": {"name": "hello"},
        "spec": {
            "schedule": "*/2 * * * *",
            "timezone": "Europe/Paris",
            "data": '{"m": 1}',
            "contentType": "application/json",
            "ceOverrides": {"extensions": {"team": "blue"}},
            "sink": {
                "ref": {
                    "apiVersion": "eventing.knative.dev/v1",
                    "kind": "Broker",
                    "name": "default",
                }
            },
        },
    }
    assert "PingSource 'hello' saved in namespace 'shop'." in r.out


def test_a_uri_sink_and_usage_errors(api: RecordingApi, cli: Runner) -> None:
    assert cli("pingsource", "create", "p", "--sink", "https://display.example/").code == 0
    assert api.seen[0].json()["spec"] == {
        "schedule": "* * * * *",
        "sink": {"uri": "https://display.example/"},
    }
    r = cli("pingsource", "create", "p", "--sink", "svc:display")
    assert r.code == 2 and "broker:NAME or an http(s) URL" in r.err
    r = cli(
        "pingsource", "create", "p", "--sink", "broker:x", "--data", "a", "--data-base64", "YQ=="
    )
    assert r.code == 2
    assert len(api.seen) == 1


def test_list_describe_delete(api: RecordingApi, cli: Runner) -> None:
    doc = {
        "metadata": {"name": "hello", "namespace": "default"},
        "spec": {"schedule": "0 9 * * 1-5", "data": "hi", "sink": {"uri": "http://d/"}},
        "status": {"sinkUri": "http://d/", "conditions": [{"type": "Ready", "status": "True"}]},
    }
    api.answer("GET", f"{PS}/default/pingsources", doc={"items": [doc]})
    api.answer("GET", f"{PS}/default/pingsources/hello", doc=doc)
    api.answer("DELETE", f"{PS}/default/pingsources/hello", doc={"status": "Success"})
    r = cli("pingsource", "list")
    assert r.code == 0 and "hello" in r.out and "0 9 * * 1-5" in r.out
    r = cli("pingsource", "describe", "hello")
    assert r.code == 0 and "Schedule:" in r.out and "http://d/" in r.out and "Ready" in r.out
    r = cli("pingsource", "delete", "hello")
    assert r.code == 0 and "PingSource 'hello' deleted in namespace 'default'." in r.out
