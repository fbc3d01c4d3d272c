"""``brokerctl apply|diff|delete -f`` and ``get -o yaml`` (docs/manifests.md): brokerctl in-process
against the app served over HTTP on in-memory fakes, so every verdict is the API's own."""

from __future__ import annotations

import io
import json
import shutil
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import yaml

from app import app
from brokerctl.__main__ import main
from brokerctl.embedded_aws import free_port
from brokerctl.http_server import AppServer
from chalicelib.container import use_container
from chalicelib.services.schedules import Scheduling
from tests.cli.conftest import Result
from tests.fakes.aws_targets import MemoryTargets
from tests.fakes.schedules import MemorySchedules
from tests.fakes.secrets import MemorySecrets
from tests.functional.harness import Harness

CORPUS = Path(__file__).parents[1] / "fixtures" / "manifests"
Ctl = Callable[..., Result]


SECRET = (
    "arn:aws:secretsmanager:us-east-1:123456789012:secret:"
    "serverless-broker/local/connections/billing-AbCdEf"
)


@pytest.fixture
def h() -> Iterator[Harness]:
    h = Harness()
    c = h.container
    c.secrets = MemorySecrets()  # type: ignore[misc]
    c.secrets.values[SECRET] = "key"
    c.aws_targets = MemoryTargets()  # type: ignore[misc]
    c.scheduling = Scheduling(MemorySchedules(), h.settings.queue_prefix)  # type: ignore[misc]
    use_container(c)
    yield h
    use_container(None)


@pytest.fixture
def ctl(
    h: Harness, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> Iterator[Ctl]:
    """``ctl("apply", "-f", path, stdin=b"...")``: brokerctl against the served app, namespace
    ``shop`` unless the arguments say otherwise."""
    for name in ("BROKERCTL_URL", "BROKERCTL_NAMESPACE", "BROKERCTL_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    server = AppServer(app, "127.0.0.1", free_port(), lambda line: None).start()

    def run(*argv: str, stdin: bytes | None = None) -> Result:
        capsys.readouterr()
        if stdin is not None:
            monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin)))
        namespace = () if "-n" in argv else ("-n", "shop")
        try:
            code = main([*argv, "--url", server.url, *namespace])
        except SystemExit as exc:
            code = int(exc.code or 0)
        captured = capsys.readouterr()
        return Result(code, captured.out, captured.err)

    yield run
    server.stop()


def lines(result: Result) -> list[str]:
    return result.out.splitlines()


CORPUS_REFS = [
    "trigger.eventing.knative.dev/my-service-trigger",
    "broker.eventing.knative.dev/default",
    "trigger.eventing.knative.dev/commerce-orders",
    "trigger.eventing.knative.dev/payments-not-test",
    "kafkasource.sources.knative.dev/kafka-source",
    "eventtransform.eventing.knative.dev/order-processor",
    "trigger.eventing.knative.dev/orders-to-transform",
    "replay.eventing.knative.dev/last-outage",
    "pingsource.sources.knative.dev/test-ping-source",
    "integrationsink.sinks.knative.dev/integration-log-sink",
    "integrationsink.sinks.knative.dev/integration-sink-aws-sqs",
    "trigger.eventing.knative.dev/orders-to-sqs",
    "connection.serverless-broker.dev/billing-api",
    "trigger.eventing.knative.dev/invoices-to-billing",
    "eventpolicy.eventing.knative.dev/my-event-policy",
    "integrationsource.sources.knative.dev/integration-source-timer",
]


KINDS = ("broker", "trigger", "replay", "kafkasource", "eventtransform", "pingsource")
KINDS += ("integrationsink", "connection", "eventpolicy", "integrationsource")


def stored(h: Harness, kind: str, ns: str = "shop") -> list[str]:
    return sorted(i.name for i in h.store.list(kind, ns))


# ---- apply ------------------------------------------------------------------------------------


def test_the_corpus_applies_then_applies_again_unchanged(h: Harness, ctl: Ctl):
    first = ctl("apply", "-f", str(CORPUS))
    assert first.code == 0, first.err
    assert lines(first) == [f"{ref} created" for ref in CORPUS_REFS]
    assert stored(h, "trigger") == sorted(
        ref.split("/")[1] for ref in CORPUS_REFS if ref.startswith("trigger.")
    )
    assert stored(h, "replay") == ["default/last-outage"]
    broker = json.loads(ctl("get", "broker", "default", "-o", "json").out)
    assert broker["spec"]["delivery"]["retry"] == 5
    trigger = json.loads(ctl("get", "triggers", "my-service-trigger", "-o", "json").out)
    assert trigger["spec"]["filter"]["attributes"]["myextension"] == "my-extension-value"

    again = ctl("apply", "-f", str(CORPUS))
    assert again.code == 0, again.err
    assert lines(again) == [f"{ref} unchanged" for ref in CORPUS_REFS]
    assert "Warning" not in again.err


def test_a_changed_document_is_configured_and_only_it(h: Harness, ctl: Ctl, tmp_path: Path):
    corpus = tmp_path / "corpus"
    shutil.copytree(CORPUS, corpus)
    assert ctl("apply", "-f", str(corpus)).code == 0
    generation = h.container.brokers.get("shop", "default")["metadata"]["generation"]
    broker = corpus / "02-broker.yaml"
    broker.write_text(broker.read_text().replace("retry: 5", "retry: 7"))
    labelled = corpus / "01-triggers-first.yaml"
    name = "  name: my-service-trigger\n"
    labelled.write_text(labelled.read_text().replace(name, name + "  labels: {team: a}\n"))

    r = ctl("apply", "-f", str(corpus))
    assert r.code == 0, r.err
    out = dict(line.rsplit(" ", 1) for line in lines(r))
    assert out.pop("broker.eventing.knative.dev/default") == "configured"
    assert out.pop("trigger.eventing.knative.dev/my-service-trigger") == "configured"
    assert set(out.values()) == {"unchanged"}
    doc = h.container.brokers.get("shop", "default")
    assert doc["spec"]["delivery"]["retry"] == 7
    assert doc["metadata"]["generation"] == generation + 1


def test_namespace_from_the_document_then_dash_n_then_default(h: Harness, ctl: Ctl):
    docs = b"""
apiVersion: eventing.knative.dev/v1
kind: Broker
metadata: {name: a, namespace: elsewhere}
---
apiVersion: eventing.knative.dev/v1
kind: Broker
metadata: {name: b}
"""
    assert ctl("apply", "-f", "-", "-n", "team", stdin=docs).code == 0
    assert stored(h, "broker", "elsewhere") == ["a"] and stored(h, "broker", "team") == ["b"]
    assert ctl("apply", "-f", "-", "-n", "", stdin=docs).code == 0  # no -n: "default"
    assert stored(h, "broker", "default") == ["b"]


def test_stdin_takes_yaml_and_json(h: Harness, ctl: Ctl):
    doc = {"apiVersion": "eventing.knative.dev/v1", "kind": "Broker", "metadata": {"name": "j"}}
    r = ctl("apply", "-f", "-", stdin=json.dumps(doc).encode())
    assert (r.code, lines(r)) == (0, ["broker.eventing.knative.dev/j created"])
    r = ctl("apply", "-f", "-", stdin=yaml.safe_dump(doc).encode())
    assert (r.code, lines(r)) == (0, ["broker.eventing.knative.dev/j unchanged"])


def test_kubernetes_only_fields_are_ignored_with_a_warning(h: Harness, ctl: Ctl):
    doc = b"""
apiVersion: eventing.knative.dev/v1
kind: Broker
metadata:
  name: default
  uid: 6a5f-0000
  resourceVersion: "999"
  generation: 4
  creationTimestamp: "2020-01-01T00:00:00Z"
  ownerReferences: [{apiVersion: v1, kind: Namespace, name: shop, uid: x}]
  managedFields: [{manager: kubectl, operation: Apply}]
  annotations:
    kubectl.kubernetes.io/last-applied-configuration: '{"kind": "Broker"}'
    team: payments
status:
  conditions: [{type: Ready, status: "True"}]
"""
    r = ctl("apply", "-f", "-", stdin=doc)
    assert r.code == 0, r.err
    assert lines(r) == ["broker.eventing.knative.dev/default created"]
    (warning,) = r.err.splitlines()
    assert warning.startswith("Warning: <stdin>, document 1 (broker.eventing.knative.dev/default)")
    for field in (
        "status", "metadata.uid", "metadata.resourceVersion", "metadata.generation",
        "metadata.creationTimestamp", "metadata.ownerReferences", "metadata.managedFields",
        'metadata.annotations["kubectl.kubernetes.io/last-applied-configuration"]',
    ):  # fmt: skip
        assert field in warning
    broker = h.container.brokers.get("shop", "default")
    assert broker["metadata"]["uid"] != "6a5f-0000" and broker["metadata"]["generation"] == 1
    assert broker["metadata"]["annotations"] == {
        "team": "payments",
        "eventing.knative.dev/broker.class": "ServerlessBroker",
    }


# ---- refusals -----------------------------------------------------------------------------------

BAD_TRIGGER = b"""apiVersion: eventing.knative.dev/v1
kind: Broker
metadata: {name: default}
---
apiVersion: eventing.knative.dev/v1
kind: Trigger
metadata: {name: bad}
spec:
  broker: default
  filters: [{exact: {}}]
  subscriber: {uri: "http://ok.example/"}
---
apiVersion: eventing.knative.dev/v1
kind: Trigger
metadata: {name: good}
spec: {subscriber: {uri: "http://ok.example/"}}
"""


def test_a_refused_document_names_file_index_and_field_and_nothing_is_applied(
    h: Harness, ctl: Ctl, tmp_path: Path
):
    path = tmp_path / "app.yaml"
    path.write_bytes(BAD_TRIGGER)
    r = ctl("apply", "-f", str(path))
    assert r.code == 1
    assert r.out == ""
    assert f"{path}, document 2 (trigger.eventing.knative.dev/bad): " in r.err
    assert "  - spec.filters[0].exact: " in r.err
    assert "1 of 3 documents refused; nothing was applied" in r.err
    assert stored(h, "broker") == [] and stored(h, "trigger") == []


def test_continue_applies_what_the_server_accepts(h: Harness, ctl: Ctl, tmp_path: Path):
    path = tmp_path / "app.yaml"
    path.write_bytes(BAD_TRIGGER)
    r = ctl("apply", "-f", str(path), "--continue")
    assert r.code == 1
    assert lines(r) == [
        "broker.eventing.knative.dev/default created",
        "trigger.eventing.knative.dev/good created",
    ]
    assert "document 2 (trigger.eventing.knative.dev/bad)" in r.err
    assert stored(h, "broker") == ["default"] and stored(h, "trigger") == ["good"]


def test_documents_that_cannot_be_addressed_are_named_too(h: Harness, ctl: Ctl, tmp_path: Path):
    (tmp_path / "a.yaml").write_bytes(
        b"apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: x}\n---\n"
        b"apiVersion: eventing.knative.dev/v1\nkind: Broker\nmetadata: {}\n---\n"
        b"apiVersion: eventing.knative.dev/v1\nkind: Broker\nmetadata: {name: ok}\n"
    )
    (tmp_path / "b.json").write_bytes(b'{"apiVersion": ')
    r = ctl("apply", "-f", str(tmp_path))
    assert r.code == 1 and r.out == ""
    assert f'{tmp_path / "a.yaml"}, document 1: apiVersion/kind: "apps/v1" "Deployment"' in r.err
    assert f"{tmp_path / 'a.yaml'}, document 2: metadata.name: is required" in r.err
    assert f"{tmp_path / 'b.json'}, document 1: json: " in r.err
    assert stored(h, "broker") == []


def test_the_same_resource_twice_is_refused(h: Harness, ctl: Ctl):
    doc = b"apiVersion: eventing.knative.dev/v1\nkind: Broker\nmetadata: {name: x}\n"
    r = ctl("apply", "-f", "-", stdin=doc + b"---\n" + doc)
    assert r.code == 1
    assert "<stdin>, document 2: broker.eventing.knative.dev/x is also in <stdin>, document 1" in (
        r.err
    )


def test_a_replay_before_its_broker_exists_is_checked_by_its_own_write(h: Harness, ctl: Ctl):
    replay = (CORPUS / "06-replay.yaml").read_bytes().replace(b"    - commerce-orders\n", b"")
    broker = b"apiVersion: eventing.knative.dev/v1\nkind: Broker\nmetadata: {name: default}\n"
    r = ctl("apply", "-f", "-", stdin=broker + b"---\n" + replay)
    assert r.code == 0, r.err
    assert lines(r) == [
        "broker.eventing.knative.dev/default created",
        "replay.eventing.knative.dev/last-outage created",
    ]
    assert "checked only when written, after the documents before it" in r.err
    # Alone, with no broker and nothing before it that creates one: refused by the dry run.
    r = ctl("apply", "-f", "-", "-n", "other", stdin=replay)
    assert r.code == 1 and "does not exist" in r.err and stored(h, "replay", "other") == []


# ---- dry run ------------------------------------------------------------------------------------


def test_dry_run_checks_every_document_and_changes_nothing(h: Harness, ctl: Ctl, tmp_path: Path):
    r = ctl("apply", "-f", str(CORPUS), "--dry-run")
    assert r.code == 0, r.err
    assert lines(r) == [f"{ref} created (server dry run)" for ref in CORPUS_REFS]
    assert h.store.list("broker", None) == [] and h.store.list("trigger", None) == []

    path = tmp_path / "bad.yaml"
    path.write_bytes(BAD_TRIGGER)
    r = ctl("apply", "-f", str(path), "--dry-run")
    assert r.code == 1
    assert "document 2 (trigger.eventing.knative.dev/bad)" in r.err
    assert "spec.filters[0].exact" in r.err
    assert h.store.list("broker", None) == []

    assert ctl("apply", "-f", str(CORPUS)).code == 0
    r = ctl("apply", "-f", str(CORPUS), "--dry-run")
    assert lines(r) == [f"{ref} unchanged (server dry run)" for ref in CORPUS_REFS]


# ---- get -o yaml round trip, diff, delete -------------------------------------------------------


@pytest.mark.parametrize("fmt", ["yaml", "json"])
def test_get_output_applies_back_unchanged(h: Harness, ctl: Ctl, fmt: str):
    assert ctl("apply", "-f", str(CORPUS)).code == 0
    kinds = ("brokers", "triggers", "kafkasources", "eventtransforms", "replays", "pingsources")
    kinds += ("integrationsinks", "connections", "eventpolicies", "integrationsources")
    for kind in kinds:
        listing = ctl("get", kind, "-o", fmt)
        assert listing.code == 0, listing.err
        r = ctl("apply", "-f", "-", stdin=listing.out.encode())
        assert r.code == 0, r.err
        assert lines(r) and all(line.endswith(" unchanged") for line in lines(r)), r.out
        assert "ignored Kubernetes-only fields: " in r.err  # uid, generation, status ...
    one = ctl("get", "trigger", "payments-not-test", "-o", fmt)
    r = ctl("apply", "-f", "-", stdin=one.out.encode())
    assert lines(r) == ["trigger.eventing.knative.dev/payments-not-test unchanged"]


def test_get_without_output_is_a_table_and_unknown_kinds_are_usage_errors(h: Harness, ctl: Ctl):
    assert ctl("apply", "-f", str(CORPUS / "01-triggers-first.yaml")).code == 0
    r = ctl("get", "triggers.eventing.knative.dev")
    assert r.code == 0
    assert lines(r)[0].split() == ["NAME", "READY", "REASON", "AGE"]
    assert "my-service-trigger" in r.out and "BrokerDoesNotExist" in r.out
    r = ctl("get", "deployments")
    assert r.code == 2 and 'the kind "deployments" is not known' in r.err


def test_diff_shows_what_apply_would_change(h: Harness, ctl: Ctl, tmp_path: Path):
    r = ctl("diff", "-f", str(CORPUS / "02-broker.yaml"))
    assert r.code == 1
    assert "--- /dev/null\n+++ applied/broker.eventing.knative.dev/shop/default\n" in r.out
    assert "+    retry: 5\n" in r.out
    assert ctl("apply", "-f", str(CORPUS)).code == 0
    r = ctl("diff", "-f", str(CORPUS))
    assert (r.code, r.out) == (0, "")

    changed = tmp_path / "broker.yaml"
    changed.write_text((CORPUS / "02-broker.yaml").read_text().replace("retry: 5", "retry: 6"))
    r = ctl("diff", "-f", str(changed))
    assert r.code == 1
    assert "--- live/broker.eventing.knative.dev/shop/default" in r.out
    assert "-    retry: 5\n+    retry: 6\n" in r.out
    assert h.container.brokers.get("shop", "default")["spec"]["delivery"]["retry"] == 5

    bad = tmp_path / "bad.yaml"
    bad.write_bytes(BAD_TRIGGER)
    r = ctl("diff", "-f", str(bad))
    assert r.code == 2 and "spec.filters[0].exact" in r.err


def test_delete_removes_what_the_files_name(h: Harness, ctl: Ctl):
    assert ctl("apply", "-f", str(CORPUS)).code == 0
    r = ctl("delete", "-f", str(CORPUS / "03-subscriptions-api.yaml"))
    assert r.code == 0, r.err
    assert lines(r) == [
        'trigger.eventing.knative.dev "commerce-orders" deleted',
        'trigger.eventing.knative.dev "payments-not-test" deleted',
    ]
    gone = {"commerce-orders", "payments-not-test"}
    assert stored(h, "trigger") == sorted(
        ref.split("/")[1]
        for ref in CORPUS_REFS
        if ref.startswith("trigger.") and ref.split("/")[1] not in gone
    )
    r = ctl("delete", "-f", str(CORPUS / "03-subscriptions-api.yaml"))
    assert r.code == 1 and 'trigger.eventing.knative.dev "commerce-orders" not found' in r.err
    r = ctl("delete", "-f", str(CORPUS / "03-subscriptions-api.yaml"), "--ignore-not-found")
    assert (r.code, r.out, r.err) == (0, "", "")
    r = ctl("delete", "-f", str(CORPUS))
    assert r.code == 1  # the two triggers deleted above are not found; the rest is deleted
    assert [k for k in KINDS if h.store.list(k, "shop")] == []


def test_paths_that_do_not_exist_are_usage_errors(ctl: Ctl, tmp_path: Path):
    r = ctl("apply", "-f", str(tmp_path / "nope.yaml"))
    assert r.code == 2 and "does not exist" in r.err
    r = ctl("apply", "-f", str(tmp_path))
    assert r.code == 2 and "no .yaml, .yml or .json files" in r.err


def test_a_write_that_fails_stops_the_documents_after_it_unless_continue(h: Harness, ctl: Ctl):
    """The Replay's dry run cannot judge it (its broker comes first in the same apply); its write
    is refused (it names a trigger the broker lacks), and the Trigger after it is not written."""
    broker = b"apiVersion: eventing.knative.dev/v1\nkind: Broker\nmetadata: {name: default}\n"
    replay = (CORPUS / "06-replay.yaml").read_bytes()  # names trigger commerce-orders
    trigger = b"apiVersion: eventing.knative.dev/v1\nkind: Trigger\nmetadata: {name: after}\n"
    trigger += b"spec: {subscriber: {uri: 'http://ok.example/'}}\n"
    docs = b"---\n".join([broker, replay, trigger])
    r = ctl("apply", "-f", "-", stdin=docs)
    assert r.code == 1
    assert lines(r) == ["broker.eventing.knative.dev/default created"]
    assert "<stdin>, document 2 (replay.eventing.knative.dev/last-outage): " in r.err
    assert "spec.triggers[0]" in r.err
    assert "stopped: 1 document after it not applied (--continue applies them)" in r.err
    assert stored(h, "trigger") == [] and stored(h, "replay") == []

    h.container.brokers.delete("shop", "default")
    r = ctl("apply", "-f", "-", "--continue", stdin=docs)
    assert r.code == 1
    assert lines(r) == [
        "broker.eventing.knative.dev/default created",
        "trigger.eventing.knative.dev/after created",
    ]
    assert stored(h, "trigger") == ["after"] and stored(h, "replay") == []


def test_output_prints_the_objects_as_the_api_answered(h: Harness, ctl: Ctl):
    r = ctl("apply", "-f", str(CORPUS / "03-subscriptions-api.yaml"), "-o", "json")
    assert r.code == 0, r.err
    listing = json.loads(r.out)
    assert listing["kind"] == "List"
    assert [i["metadata"]["name"] for i in listing["items"]] == [
        "commerce-orders",
        "payments-not-test",
    ]
    assert all(i["metadata"]["uid"] and i["status"]["conditions"] for i in listing["items"])
    r = ctl("apply", "-f", str(CORPUS / "02-broker.yaml"), "-o", "yaml", "--dry-run")
    doc = yaml.safe_load(r.out)
    assert (doc["kind"], doc["spec"]["delivery"]["retry"]) == ("Broker", 5)
    assert stored(h, "broker") == []
