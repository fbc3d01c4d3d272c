"""``brokerctl transform`` and ``trigger create --transform`` (docs/transforms.md): arguments →
HTTP requests, answers → output, against the recording server."""

from __future__ import annotations

from tests.cli.conftest import RecordingApi, Runner

ET = "/apis/eventing.knative.dev/v1alpha1/namespaces"
CP = "/apis/eventing.knative.dev/v1/namespaces"
REF = {"apiVersion": "eventing.knative.dev/v1alpha1", "kind": "EventTransform", "name": "tx"}


def test_transform_create_puts_the_expression_sink_and_reply(
    api: RecordingApi, cli: Runner, tmp_path
):
    file = tmp_path / "summary.jsonata"
    file.write_text('{"type": "summary", "data": data.total}', encoding="utf-8")
    r = cli(
        "transform", "create", "tx", "-n", "shop", "--expression", f"@{file}",
        "--sink", "http://sink.example/", "--reply-expression", '{"type": "r"}',
    )  # fmt: skip
    assert r.code == 0, r.err
    (seen,) = api.seen
    assert (seen.method, seen.path) == ("PUT", f"{ET}/shop/eventtransforms/tx")
    assert seen.json() == {
        "apiVersion": "eventing.knative.dev/v1alpha1",
        "kind": "EventTransform",
        "metadata": {"name": "tx"},
        "spec": {
            "jsonata": {"expression": '{"type": "summary", "data": data.total}'},
            "sink": {"uri": "http://sink.example/"},
            "reply": {"jsonata": {"expression": '{"type": "r"}'}},
        },
    }
    assert "EventTransform 'tx' saved in namespace 'shop'." in r.out


def test_transform_create_without_a_sink_and_a_missing_file(api: RecordingApi, cli: Runner):
    assert cli("transform", "create", "tx", "--expression", "$").code == 0
    assert api.seen[0].json()["spec"] == {"jsonata": {"expression": "$"}}
    r = cli("transform", "create", "tx", "--expression", "@/nonexistent/x.jsonata")
    assert r.code == 2 and "cannot read the expression" in r.err
    assert len(api.seen) == 1


def test_transform_list_describe_delete(api: RecordingApi, cli: Runner):
    doc = {
        "metadata": {"name": "tx", "namespace": "default"},
        "spec": {"jsonata": {"expression": '{"type": "x"}'}},
        "status": {
            "address": {"url": "http://api/x"},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }
    api.answer("GET", f"{ET}/default/eventtransforms", doc={"items": [doc]})
    api.answer("GET", f"{ET}/default/eventtransforms/tx", doc=doc)
    r = cli("transform", "list")
    assert r.code == 0 and "tx" in r.out and "(reply)" in r.out
    r = cli("transform", "describe", "tx")
    assert r.code == 0 and '{"type": "x"}' in r.out and "http://api/x" in r.out
    r = cli("transform", "delete", "tx")
    assert r.code == 0 and api.seen[-1].method == "DELETE"


def test_trigger_create_with_a_transform(api: RecordingApi, cli: Runner):
    r = cli("trigger", "create", "audit", "--transform", "tx", "--filter", "type=order")
    assert r.code == 0, r.err
    assert api.seen[0].path == f"{CP}/default/triggers"
    assert api.seen[0].json()["spec"]["subscriber"] == {"ref": REF}
    r = cli("trigger", "create", "audit", "--transform", "tx", "--sink", "http://x/")
    assert r.code == 2  # one subscriber
