"""``brokerctl policy`` (docs/security.md): arguments → HTTP requests, answers → output, against
the recording server; and ``broker describe`` naming the policies that apply."""

from __future__ import annotations

from tests.cli.conftest import RecordingApi, Runner

EP = "/apis/eventing.knative.dev/v1alpha1/namespaces"
CP = "/apis/eventing.knative.dev/v1/namespaces"


def test_policy_create_puts_targets_senders_and_filters(api: RecordingApi, cli: Runner) -> None:
    r = cli(
        "policy", "create", "orders", "-n", "shop", "--to", "default", "--selector", "team=a",
        "--from", "token:shop:abc", "--from", "arn:aws:iam::123456789012:role/p*",
        "--from-ref", "PingSource/tick", "--from-ref", "Trigger/confirm",
        "--prefix", "type=order.",
    )  # fmt: skip
    assert r.code == 0, r.err
    (seen,) = api.seen
    assert (seen.method, seen.path) == ("PUT", f"{EP}/shop/eventpolicies/orders")
    assert seen.json() == {
        "apiVersion": "eventing.knative.dev/v1alpha1",
        "kind": "EventPolicy",
        "metadata": {"name": "orders"},
        "spec": {
            "to": [
                {
                    "ref": {
                        "apiVersion": "eventing.knative.dev/v1",
                        "kind": "Broker",
                        "name": "default",
                    }
                },
                {"selector": {"matchLabels": {"team": "a"}}},
            ],
            "from": [
                {"sub": "token:shop:abc"},
                {"sub": "arn:aws:iam::123456789012:role/p*"},
                {
                    "ref": {
                        "apiVersion": "sources.knative.dev/v1",
                        "kind": "PingSource",
                        "name": "tick",
                    }
                },
                {
                    "ref": {
                        "apiVersion": "eventing.knative.dev/v1",
                        "kind": "Trigger",
                        "name": "confirm",
                    }
                },
            ],
            "filters": [{"prefix": {"type": "order."}}],
        },
    }
    assert "EventPolicy 'orders' saved in namespace 'shop'." in r.out


def test_policy_create_refuses_an_unknown_reference_kind(api: RecordingApi, cli: Runner) -> None:
    r = cli("policy", "create", "p", "--from-ref", "Pod/x")
    assert r.code == 2 and "KIND/NAME" in r.err
    assert api.seen == []


def test_policy_list_describe_test_delete(api: RecordingApi, cli: Runner) -> None:
    doc = {
        "metadata": {"name": "orders", "namespace": "default"},
        "spec": {"from": [{"sub": "token:default:*"}], "filters": [{"exact": {"type": "x"}}]},
        "status": {
            "from": ["token:default:*"],
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }
    api.answer("GET", f"{EP}/default/eventpolicies", doc={"items": [doc]})
    api.answer("GET", f"{EP}/default/eventpolicies/orders", doc=doc)
    r = cli("policy", "list")
    assert r.code == 0 and "orders" in r.out and "(every broker)" in r.out
    r = cli("policy", "describe", "orders")
    assert r.code == 0 and "token:default:*" in r.out and "exact" in r.out
    verdict = {
        "allowed": False,
        "policy": None,
        "decision": "sender-not-admitted",
        "reason": "sender token:default:x is not admitted by the policies of broker ...",
        "policies": ["orders"],
    }
    api.answer("POST", f"{EP}/default/eventpolicies-test", doc=verdict)
    event = '{"specversion": "1.0", "id": "1", "source": "/s", "type": "x"}'
    r = cli("policy", "test", "--identity", "token:default:x", "--event", event)
    assert r.code == 0 and "refused (sender-not-admitted)" in r.out
    assert api.seen[-1].json()["identity"] == "token:default:x"
    assert api.seen[-1].json()["broker"] == "default"
    r = cli("policy", "delete", "orders")
    assert r.code == 0 and api.seen[-1].method == "DELETE"


def test_broker_describe_names_the_policies_that_apply(api: RecordingApi, cli: Runner) -> None:
    doc = {
        "metadata": {"name": "default", "namespace": "default"},
        "status": {
            "policies": [
                {"apiVersion": "eventing.knative.dev/v1alpha1", "name": "orders"},
                {"apiVersion": "eventing.knative.dev/v1alpha1", "name": "billing"},
            ],
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }
    api.answer("GET", f"{CP}/default/brokers/default", doc=doc)
    r = cli("broker", "describe", "default")
    assert r.code == 0 and "orders, billing" in r.out
