"""``brokerctl integrationsource`` (docs/sources.md): arguments -> HTTP requests, answers ->
output, against the recording server."""

from __future__ import annotations

from tests.cli.conftest import RecordingApi, Runner

IS = "/apis/sources.knative.dev/v1alpha1/namespaces"
BROKER = {"ref": {"apiVersion": "eventing.knative.dev/v1", "kind": "Broker", "name": "default"}}


def test_create_a_timer(api: RecordingApi, cli: Runner) -> None:
    r = cli(
        "integrationsource", "create", "tick", "-n", "shop", "--timer-period", "2000",
        "--message", "hello", "--content-type", "text/plain", "--sink", "broker:default",
    )  # fmt: skip
    assert r.code == 0, r.err
    (seen,) = api.seen
    assert (seen.method, seen.path) == ("PUT", f"{IS}/shop/integrationsources/tick")
    assert seen.json() == {
        "apiVersion": "sources.knative.dev/v1alpha1",
        "kind": "IntegrationSource",
        "metadata": {"name": "tick"},
        "spec": {
            "timer": {"period": 2000, "message": "hello", "contentType": "text/plain"},
            "sink": BROKER,
        },
    }
    assert "IntegrationSource 'tick' saved in namespace 'shop'." in r.out


def test_create_each_aws_source(api: RecordingApi, cli: Runner) -> None:
    queue = "arn:aws:sqs:us-east-1:123456789012:orders"
    assert cli("integrationsource", "create", "q", "--sqs", queue, "--sink", "broker:default",
               "--region", "us-east-1").code == 0  # fmt: skip
    assert cli("integrationsource", "create", "b", "--s3", "arn:aws:s3:::pics",
               "--sink", "https://display.example/").code == 0  # fmt: skip
    assert cli("integrationsource", "create", "t", "--ddb-table", "orders",
               "--sink", "broker:default").code == 0  # fmt: skip
    specs = [seen.json()["spec"] for seen in api.seen]
    assert specs[0] == {"aws": {"sqs": {"arn": queue, "region": "us-east-1"}}, "sink": BROKER}
    assert specs[1] == {
        "aws": {"s3": {"arn": "arn:aws:s3:::pics"}},
        "sink": {"uri": "https://display.example/"},
    }
    assert specs[2] == {"aws": {"ddbStreams": {"table": "orders"}}, "sink": BROKER}


def test_usage_errors_send_nothing(api: RecordingApi, cli: Runner) -> None:
    r = cli("integrationsource", "create", "x", "--sink", "broker:default")
    assert r.code == 2  # one of the four is required
    r = cli("integrationsource", "create", "x", "--timer-period", "2000", "--sqs", "arn",
            "--sink", "broker:default")  # fmt: skip
    assert r.code == 2
    r = cli("integrationsource", "create", "x", "--sqs", "arn", "--message", "m",
            "--sink", "broker:default")  # fmt: skip
    assert r.code == 2 and "for a timer" in r.err
    r = cli("integrationsource", "create", "x", "--timer-period", "2000", "--sink", "svc:d")
    assert r.code == 2 and "broker:NAME or an http(s) URL" in r.err
    assert api.seen == []


def test_list_describe_delete(api: RecordingApi, cli: Runner) -> None:
    doc = {
        "metadata": {"name": "q", "namespace": "default"},
        "spec": {"aws": {"sqs": {"arn": "arn:aws:sqs:us-east-1:1:orders"}}, "sink": BROKER},
        "status": {
            "sinkUri": "http://b/default/default",
            "ceAttributes": [{"type": "dev.knative.connector.event.aws-sqs", "source": "s"}],
            "conditions": [{"type": "Ready", "status": "False", "reason": "QueueDoesNotExist"}],
        },
    }
    api.answer("GET", f"{IS}/default/integrationsources", doc={"items": [doc]})
    api.answer("GET", f"{IS}/default/integrationsources/q", doc=doc)
    api.answer("DELETE", f"{IS}/default/integrationsources/q", doc={"status": "Success"})
    r = cli("integrationsource", "list")
    assert r.code == 0 and "sqs arn:aws:sqs:us-east-1:1:orders" in r.out
    assert "QueueDoesNotExist" in r.out
    r = cli("integrationsource", "describe", "q")
    assert r.code == 0 and "dev.knative.connector.event.aws-sqs" in r.out
    assert "broker:default" in r.out
    r = cli("integrationsource", "delete", "q")
    assert r.code == 0 and "IntegrationSource 'q' deleted in namespace 'default'." in r.out
