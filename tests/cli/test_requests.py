"""Arguments → HTTP requests, and answers → output and exit codes, against a recording server."""

from __future__ import annotations

import base64
import json

import yaml

from tests.cli.conftest import RecordingApi, Runner

CP = "/apis/eventing.knative.dev/v1/namespaces"


def test_broker_create_maps_flags_to_annotations_and_delivery(api: RecordingApi, cli: Runner):
    r = cli(
        "broker", "create", "orders", "-n", "shop",
        "--ingress-auth", "token", "--max-event-bytes", "1048576", "--legacy-spec-versions",
        "--annotation", "team=payments", "--dedup-window", "PT5M",
        "--retry", "3", "--backoff-policy", "linear", "--backoff-delay", "PT1S",
        "--dead-letter-sink", "http://dls.example/x",
    )  # fmt: skip
    assert r.code == 0, r.err
    (seen,) = api.seen
    assert (seen.method, seen.path) == ("POST", f"{CP}/shop/brokers")
    assert seen.headers["content-type"] == "application/json"
    assert seen.json() == {
        "apiVersion": "eventing.knative.dev/v1",
        "kind": "Broker",
        "metadata": {
            "name": "orders",
            "annotations": {
                "team": "payments",
                "serverless-broker/ingress-auth": "token",
                "serverless-broker/max-event-bytes": "1048576",
                "serverless-broker/legacy-spec-versions": "true",
                "serverless-broker/dedup-window": "PT5M",
            },
        },
        "spec": {
            "delivery": {
                "retry": 3,
                "backoffPolicy": "linear",
                "backoffDelay": "PT1S",
                "deadLetterSink": {"uri": "http://dls.example/x"},
            }
        },
    }
    assert "Broker 'orders' created in namespace 'shop'." in r.out


def test_broker_create_without_options_sends_only_the_name(api: RecordingApi, cli: Runner):
    assert cli("broker", "create", "default").code == 0
    assert api.seen[0].json() == {
        "apiVersion": "eventing.knative.dev/v1",
        "kind": "Broker",
        "metadata": {"name": "default"},
    }
    assert api.seen[0].path == f"{CP}/default/brokers"


def test_trigger_create_maps_every_flag(api: RecordingApi, cli: Runner):
    r = cli(
        "trigger", "create", "audit", "--broker", "orders",
        "--filter", "type=com.example.order", "--filter", "source=", "--sink", "http://sub/x",
        "--retry", "0", "--backoff-policy", "exponential", "--backoff-delay", "PT0.5S",
        "--timeout", "PT10S", "--retry-after-max", "PT1M", "--dead-letter-sink", "http://dls/",
        "--format", "json",
    )  # fmt: skip
    assert r.code == 0, r.err
    (seen,) = api.seen
    assert (seen.method, seen.path) == ("POST", f"{CP}/default/triggers")
    assert seen.json() == {
        "apiVersion": "eventing.knative.dev/v1",
        "kind": "Trigger",
        "metadata": {"name": "audit"},
        "spec": {
            "broker": "orders",
            "subscriber": {"uri": "http://sub/x"},
            "filter": {"attributes": {"type": "com.example.order", "source": ""}},
            "delivery": {
                "retry": 0,
                "backoffPolicy": "exponential",
                "backoffDelay": "PT0.5S",
                "timeout": "PT10S",
                "retryAfterMax": "PT1M",
                "format": "json",
                "deadLetterSink": {"uri": "http://dls/"},
            },
        },
    }


def test_trigger_create_defaults_to_the_default_broker_and_no_filter(
    api: RecordingApi, cli: Runner
):
    assert cli("trigger", "create", "all", "--sink", "http://sub/").code == 0
    spec = api.seen[0].json()["spec"]
    assert spec == {"broker": "default", "subscriber": {"uri": "http://sub/"}}


def test_trigger_update_merges_into_the_stored_trigger(api: RecordingApi, cli: Runner):
    path = f"{CP}/default/triggers/audit"
    current = {
        "apiVersion": "eventing.knative.dev/v1",
        "kind": "Trigger",
        "metadata": {"name": "audit", "uid": "u-1", "generation": 4, "labels": {"a": "b"}},
        "spec": {
            "broker": "orders",
            "filter": {"attributes": {"type": "t", "source": "/s"}},
            "subscriber": {"uri": "http://old/"},
            "delivery": {"retry": 5, "backoffDelay": "PT1S"},
        },
        "status": {"conditions": []},
    }
    api.answer("GET", path, doc=current)
    r = cli("trigger", "update", "audit", "--filter", "source-", "--filter", "subject=x",
            "--retry", "2", "--dead-letter-sink", "http://dls/")  # fmt: skip
    assert r.code == 0, r.err
    get, put = api.seen
    assert (get.method, put.method, put.path) == ("GET", "PUT", path)
    assert put.json() == {
        "apiVersion": "eventing.knative.dev/v1",
        "kind": "Trigger",
        "metadata": {"name": "audit", "labels": {"a": "b"}},
        "spec": {
            "broker": "orders",
            "filter": {"attributes": {"type": "t", "subject": "x"}},
            "subscriber": {"uri": "http://old/"},
            "delivery": {
                "retry": 2,
                "backoffDelay": "PT1S",
                "deadLetterSink": {"uri": "http://dls/"},
            },
        },
    }


def test_trigger_update_without_changes_is_a_usage_error(api: RecordingApi, cli: Runner):
    r = cli("trigger", "update", "audit")
    assert r.code == 2
    assert "nothing to update" in r.err
    assert api.seen == []


def test_trigger_delete_warns_with_the_discarded_count(api: RecordingApi, cli: Runner):
    path = f"{CP}/default/triggers/audit"
    status = {"kind": "Status", "status": "Success", "details": {"deadLettersDiscarded": 3}}
    api.answer("DELETE", path, doc=status)
    r = cli("trigger", "delete", "audit")
    assert r.code == 0
    assert "3 dead-lettered event(s)" in r.err and "discarded" in r.err
    assert "Trigger 'audit' deleted" in r.out
    status["details"]["deadLettersDiscarded"] = 0
    r = cli("trigger", "delete", "audit")
    assert r.code == 0 and r.err == ""


def test_send_binary_mode_headers(api: RecordingApi, cli: Runner):
    r = cli(
        "send", "-n", "shop", "--broker", "orders", "--type", "com.example.order",
        "--source", "/shop", "--id", "e-1", "--subject", "caf\u00e9 \"x\"",
        "--data", '{"total": 12.5}', "--extension", "myext=v1", "--extension", "partitionkey=p",
        "--token", "sbt_secret",
    )  # fmt: skip
    assert r.code == 0, r.err
    (seen,) = api.seen
    assert (seen.method, seen.path) == ("POST", "/shop/orders")
    assert json.loads(seen.body) == {"total": 12.5}
    h = seen.headers
    assert h["content-type"] == "application/json"
    assert (h["ce-specversion"], h["ce-id"], h["ce-source"]) == ("1.0", "e-1", "/shop")
    assert h["ce-type"] == "com.example.order"
    assert h["ce-subject"] == "caf%C3%A9%20%22x%22"
    assert (h["ce-myext"], h["ce-partitionkey"]) == ("v1", "p")
    assert h["authorization"] == "Bearer sbt_secret"
    assert "Event 'e-1' accepted by broker 'orders'" in r.out


def test_send_defaults_a_uuid_id_and_text_content_type(api: RecordingApi, cli: Runner):
    assert cli("send", "--type", "t", "--source", "/s", "--data", "hello").code == 0
    h = api.seen[0].headers
    assert api.seen[0].path == "/default/default"
    assert len(h["ce-id"]) == 36 and h["ce-id"].count("-") == 4
    assert h["content-type"] == "text/plain; charset=utf-8"
    assert "authorization" not in h
    assert api.seen[0].body == b"hello"


def test_send_structured_mode(api: RecordingApi, cli: Runner, tmp_path):
    r = cli("send", "--structured", "--type", "t", "--source", "/s", "--id", "1",
            "--data", '{"a": [1, 2]}', "--extension", "myext=v")  # fmt: skip
    assert r.code == 0, r.err
    seen = api.seen[0]
    assert seen.headers["content-type"].startswith("application/cloudevents+json")
    assert seen.json() == {
        "specversion": "1.0",
        "id": "1",
        "source": "/s",
        "type": "t",
        "myext": "v",
        "datacontenttype": "application/json",
        "data": {"a": [1, 2]},
    }
    blob = tmp_path / "blob.bin"
    blob.write_bytes(bytes(range(256)))
    r = cli("send", "--structured", "--type", "t", "--source", "/s", "--data-file", str(blob))
    assert r.code == 0, r.err
    doc = api.seen[1].json()
    assert doc["datacontenttype"] == "application/octet-stream"
    assert base64.b64decode(doc["data_base64"]) == bytes(range(256))
    assert "data" not in doc


def test_send_binary_data_file_is_sent_byte_for_byte(api: RecordingApi, cli: Runner, tmp_path):
    blob = tmp_path / "blob.bin"
    blob.write_bytes(bytes(range(256)))
    r = cli("send", "--type", "t", "--source", "/s", "--data-file", str(blob),
            "--content-type", "application/x-thing")  # fmt: skip
    assert r.code == 0, r.err
    assert api.seen[0].body == bytes(range(256))
    assert api.seen[0].headers["content-type"] == "application/x-thing"


def test_send_refuses_json_typed_data_that_is_not_json(api: RecordingApi, cli: Runner):
    r = cli("send", "--structured", "--type", "t", "--source", "/s", "--data", "{nope",
            "--content-type", "application/json")  # fmt: skip
    assert r.code == 2 and "not valid JSON" in r.err
    assert api.seen == []


def test_dlq_operations(api: RecordingApi, cli: Runner):
    path = f"{CP}/default/triggers/audit/deadletters"
    api.answer("GET", path, doc={
        "items": [{"messageId": "m-1", "receiveCount": 2, "event": {
            "id": "e-9", "type": "t", "source": "/s", "knativeerrorcode": 400,
            "knativeerrordest": "http://sub/"}}],
        "count": 1, "depth": 4,
    })  # fmt: skip
    api.answer("POST", path + "/redrive", status=202, doc={"redriven": 4, "remaining": 0})
    api.answer("DELETE", path, doc={"purged": 2})
    r = cli("dlq", "list", "audit", "--limit", "5")
    assert r.code == 0, r.err
    assert api.seen[0].query == {"limit": ["5"]}
    assert "e-9" in r.out and "400" in r.out and "http://sub/" in r.out
    assert "1 shown, 4 in the dead-letter queue." in r.out
    r = cli("dlq", "redrive", "audit")
    assert (api.seen[1].method, api.seen[1].path) == ("POST", path + "/redrive")
    assert "Redrove 4 event(s)" in r.out
    r = cli("dlq", "purge", "audit", "-o", "json")
    assert (api.seen[2].method, api.seen[2].path) == ("DELETE", path)
    assert json.loads(r.out) == {"purged": 2}


def test_token_commands(api: RecordingApi, cli: Runner):
    base = f"{CP}/default/brokers/orders/tokens"
    api.answer("POST", base, status=201, doc={"id": "abc", "token": "sbt_x", "broker": "orders"})
    api.answer("GET", base, doc={"items": [{"id": "abc", "createdAt": "2024-01-01T00:00:00Z"}]})
    api.answer("DELETE", base + "/abc", doc={"revoked": "abc"})
    r = cli("broker", "token", "create", "orders")
    assert r.code == 0 and r.out == "sbt_x\n"
    assert "shown only once" in r.err
    r = cli("broker", "token", "list", "orders")
    assert "abc" in r.out
    r = cli("broker", "token", "revoke", "orders", "abc")
    assert r.code == 0 and "revoked" in r.out
    assert [(s.method, s.path) for s in api.seen] == [
        ("POST", base),
        ("GET", base),
        ("DELETE", base + "/abc"),
    ]


def test_machine_output_is_the_api_document(api: RecordingApi, cli: Runner):
    doc = {"apiVersion": "eventing.knative.dev/v1", "kind": "BrokerList", "items": [
        {"metadata": {"name": "b1", "creationTimestamp": "2024-01-01T00:00:00Z"},
         "status": {"address": {"url": "http://x/ns/b1"},
                    "conditions": [{"type": "Ready", "status": "True"}]}}]}  # fmt: skip
    api.answer("GET", f"{CP}/default/brokers", doc=doc)
    assert json.loads(cli("broker", "list", "-o", "json").out) == doc
    assert yaml.safe_load(cli("broker", "list", "-o", "yaml").out) == doc
    table = cli("broker", "list").out
    assert "NAME" in table and "b1" in table and "http://x/ns/b1" in table and "True" in table


def test_describe_shows_conditions_with_reasons_and_messages(api: RecordingApi, cli: Runner):
    doc = {
        "metadata": {"name": "audit", "namespace": "default"},
        "spec": {"broker": "orders", "subscriber": {"uri": "http://sub/"},
                 "filter": {"attributes": {"type": "t"}}},
        "status": {"conditions": [
            {"type": "BrokerReady", "status": "False", "reason": "BrokerDoesNotExist",
             "message": 'Broker "default/orders" does not exist.'},
            {"type": "Ready", "status": "False", "reason": "BrokerDoesNotExist"}]},
    }  # fmt: skip
    api.answer("GET", f"{CP}/default/triggers/audit", doc=doc)
    out = cli("trigger", "describe", "audit").out
    assert "Broker:" in out and "orders" in out and "type: t" in out
    line = next(x for x in out.splitlines() if "BrokerReady" in x)
    assert "!!" in line and "BrokerDoesNotExist" in line and "does not exist" in line


def test_problem_details_print_every_field_and_exit_1(api: RecordingApi, cli: Runner):
    problem = {
        "type": "https://serverless-broker.dev/problems/validation",
        "title": "Invalid input",
        "status": 400,
        "detail": "two problems",
        "errors": [
            {"field": "spec.subscriber.uri", "message": "must be http or https"},
            {"field": "spec.filter.attributes.Type", "message": "must match ^[a-z][a-z0-9]*$"},
        ],
    }
    api.answer(
        "POST", f"{CP}/default/triggers", 400, problem, content_type="application/problem+json"
    )
    r = cli("trigger", "create", "bad", "--sink", "ftp://x", "--filter", "Type=x")
    assert r.code == 1
    assert "Invalid input (HTTP 400)" in r.err
    assert "spec.subscriber.uri: must be http or https" in r.err
    assert "spec.filter.attributes.Type: must match" in r.err
    assert r.out == ""


def test_not_found_and_non_problem_errors_exit_1(api: RecordingApi, cli: Runner):
    path = f"{CP}/default/brokers/nope"
    api.answer("GET", path, 404, {"title": "Not found", "status": 404, "detail": "no broker"},
               content_type="application/problem+json")  # fmt: skip
    r = cli("broker", "describe", "nope")
    assert r.code == 1 and "Not found (HTTP 404)" in r.err and "no broker" in r.err
    # API Gateway's own refusal (IAM) has a {"message"} body.
    api.answer("GET", path, 403, {"message": "Missing Authentication Token"})
    r = cli("broker", "describe", "nope")
    assert r.code == 1 and "HTTP 403" in r.err and "Missing Authentication Token" in r.err


def test_unreachable_message(capsys):
    from brokerctl.__main__ import main
    from brokerctl.embedded_aws import free_port

    url = f"http://127.0.0.1:{free_port()}"
    assert main(["--url", url, "trigger", "list"]) == 1
    err = capsys.readouterr().err
    assert f"cannot reach the broker at {url}; is `make run` running?" in err


def test_usage_errors_exit_2(api: RecordingApi, cli: Runner):
    assert cli("trigger", "create", "t").code == 2  # --sink is required
    assert cli("trigger", "create", "t", "--sink", "http://s/", "--filter", "nokey").code == 2
    assert cli("trigger", "create", "t", "--sink", "http://s/", "--retry", "-1").code == 2
    assert cli("send", "--type", "t", "--source", "/s", "--data", "a", "--data-file", "f").code == 2
    assert cli("send", "--type", "t", "--source", "/s", "--extension", "id=x").code == 2
    assert cli("dlq", "list", "t", "--limit", "0").code == 2
    assert cli("broker").code == 2
    assert cli("broker", "create", "b", "-o", "xml").code == 2
    assert api.seen == []


def test_options_before_or_after_the_command(api: RecordingApi, cli: Runner, monkeypatch):
    from brokerctl.__main__ import main

    assert main(["-n", "before", "--url", api.url, "broker", "list"]) == 0
    assert cli("broker", "list", "-n", "after").code == 0
    monkeypatch.setenv("BROKERCTL_NAMESPACE", "fromenv")
    monkeypatch.setenv("BROKERCTL_URL", api.url)
    assert main(["broker", "list"]) == 0
    assert [s.path for s in api.seen] == [
        f"{CP}/before/brokers",
        f"{CP}/after/brokers",
        f"{CP}/fromenv/brokers",
    ]


def test_trigger_create_ordered_sets_the_annotation(api: RecordingApi, cli: Runner):
    r = cli("trigger", "create", "ledger", "--sink", "http://sub/", "--ordered")
    assert r.code == 0, r.err
    assert api.seen[0].json()["metadata"] == {
        "name": "ledger",
        "annotations": {"serverless-broker/delivery-order": "ordered"},
    }


def test_describe_shows_an_ordered_trigger(api: RecordingApi, cli: Runner):
    doc = {
        "metadata": {"name": "ledger", "namespace": "default",
                     "annotations": {"serverless-broker/delivery-order": "ordered"}},
        "spec": {"broker": "default", "subscriber": {"uri": "http://sub/"}},
        "status": {"conditions": []},
    }  # fmt: skip
    api.answer("GET", f"{CP}/default/triggers/ledger", doc=doc)
    out = cli("trigger", "describe", "ledger").out
    assert "Order:" in out and "ordered (per partitionkey" in out
    api.answer("GET", f"{CP}/default/triggers/ledger", doc={**doc, "metadata": {"name": "ledger"}})
    assert "Order:" not in cli("trigger", "describe", "ledger").out


def test_trigger_max_rate_is_an_annotation_on_create_and_update_and_described(
    api: RecordingApi, cli: Runner
):
    """--max-rate (docs/flow-control.md): the serverless-broker/max-rate annotation as given
    (the API validates it), kept with the other annotations on update, and shown by describe."""
    assert cli("trigger", "create", "slow", "--sink", "http://sub/", "--max-rate", "2.5").code == 0
    annotations = api.seen[0].json()["metadata"]["annotations"]
    assert annotations == {"serverless-broker/max-rate": "2.5"}
    path = f"{CP}/default/triggers/slow"
    current = {
        "metadata": {"name": "slow", "annotations": {"serverless-broker/max-rate": "2.5",
                                                     "other": "kept"}},
        "spec": {"broker": "default", "subscriber": {"uri": "http://sub/"}},
    }  # fmt: skip
    api.answer("GET", path, doc=current)
    assert cli("trigger", "update", "slow", "--max-rate", "40").code == 0
    put = api.seen[-1]
    assert put.json()["metadata"]["annotations"] == {
        "serverless-broker/max-rate": "40",
        "other": "kept",
    }
    out = cli("trigger", "describe", "slow").out
    line = next(x for x in out.splitlines() if "Max rate" in x)
    assert "2.5 events/s" in line
