"""EventPolicy end to end on the local runtime, each identity kind and each default mode
(docs/security.md). One namespace whose policies, written with ``brokerctl policy create``,
admit one type from one ingress token, every event of one trigger's replies and of one
IntegrationSource timer: the other token, the other type, an anonymous request, another
trigger's replies and another timer are refused, each counted in ``unauthorized_count``, the
refused reply dropped and logged, the refused firing counted in ``source_failure_count``.
``brokerctl policy test`` says what the runtime decides. Then a broker with ``ingress-auth:
token`` and no policy on three runtimes sharing one AWS endpoint, one per default mode."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import boto3
import httpx
import pytest

from brokerctl.event_display import EventDisplay, Received, Reply
from tests.e2e.conftest import ROOT, LocalBroker, start_local_broker, stop_local_broker, wait_until

pytestmark = pytest.mark.e2e

IS = "/apis/sources.knative.dev/v1alpha1/namespaces"
EP = "/apis/eventing.knative.dev/v1alpha1/namespaces"


def _ready(broker: LocalBroker, ns: str, name: str) -> bool:
    doc = httpx.get(f"{broker.url}{EP}/{ns}/eventpolicies/{name}", timeout=10).json()
    conditions = {c["type"]: c["status"] for c in doc.get("status", {}).get("conditions", [])}
    return conditions.get("Ready") == "True"


def _metric(broker: LocalBroker, name: str, ns: str) -> float:
    text = httpx.get(f"{broker.url}/metrics", timeout=10).text
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith(f"broker_{name}_total{{") and f'namespace="{ns}"' in line
    )


def _refused_types(broker: LocalBroker, ns: str) -> list[str | None]:
    """The event types of the namespace's ``rejected`` archive records with reason
    ``unauthorized`` (the objects Firehose wrote, in moto)."""
    s3 = boto3.client("s3", endpoint_url=broker.aws_url)
    bucket, types = "serverless-broker-local-archive", []
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix="archive/"):
        for obj in page.get("Contents", []):
            body = s3.get_object(Bucket=bucket, Key=obj["Key"])["Body"].read()
            if body[:2] == b"\x1f\x8b":
                body = gzip.decompress(body)
            for line in body.splitlines():
                r = json.loads(line)
                if r["kind"] == "rejected" and r["namespace"] == ns:
                    assert r["reason"] == "unauthorized", r
                    types.append(r["event_type"])
    return types


def _token(broker: LocalBroker, ns: str) -> tuple[str, str]:
    r = httpx.post(f"{broker.cp(ns)}/brokers/default/tokens", timeout=30)
    assert r.status_code == 201, r.text
    return f"token:{ns}:{r.json()['id']}", r.json()["token"]


def _post(broker: LocalBroker, ns: str, type_: str, secret: str | None) -> httpx.Response:
    headers = {
        "ce-specversion": "1.0",
        "ce-id": uuid.uuid4().hex,
        "ce-source": "/e2e",
        "ce-type": type_,
    }
    if secret is not None:
        headers["authorization"] = f"Bearer {secret}"
    return httpx.post(f"{broker.url}/{ns}/default", content=b"x", headers=headers, timeout=30)


def _brokerctl(broker: LocalBroker, ns: str, *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "brokerctl", "--url", broker.url, "-n", ns, *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr + done.stdout
    return done.stdout


def _replying(type_: str) -> Any:
    def reply(got: Received, n: int) -> Reply:
        headers = {"ce-specversion": "1.0", "ce-id": f"{type_}-{n}", "ce-source": "/r"}
        return Reply(200, {**headers, "ce-type": type_}, b"r")

    return reply


def _trigger(broker: LocalBroker, ns: str, name: str, uri: str, type_: str | None) -> None:
    spec: dict[str, Any] = {"broker": "default", "subscriber": {"uri": uri}}
    if type_ is not None:
        spec["filter"] = {"attributes": {"type": type_}}
    assert broker.put(ns, "triggers", name, {"metadata": {"name": name}, "spec": spec}).is_success
    broker.wait_ready(ns, "triggers", name)


def _timer(broker: LocalBroker, ns: str, name: str) -> None:
    body = {
        "apiVersion": "sources.knative.dev/v1alpha1",
        "kind": "IntegrationSource",
        "metadata": {"name": name},
        "spec": {
            "timer": {"period": 1000, "message": name},
            "sink": {"ref": {"apiVersion": "eventing.knative.dev/v1", "kind": "Broker",
                             "name": "default"}},
        },
    }  # fmt: skip
    r = httpx.put(f"{broker.url}{IS}/{ns}/integrationsources/{name}", json=body, timeout=30)
    assert r.status_code in (200, 201), r.text


def test_each_identity_kind_is_admitted_or_refused_as_the_policies_say(
    local_broker: LocalBroker,
) -> None:
    ns = f"epi-{uuid.uuid4().hex[:8]}"
    assert local_broker.put(ns, "brokers", "default", {"metadata": {"name": "default"}}).is_success
    admitted, secret = _token(local_broker, ns)
    _, other_secret = _token(local_broker, ns)
    # One type from one token; every reply of the trigger "echo"; every firing of "tick".
    _brokerctl(local_broker, ns, "policy", "create", "orders", "--from", admitted,
               "--exact", "type=order.created")  # fmt: skip
    _brokerctl(local_broker, ns, "policy", "create", "own", "--from-ref", "Trigger/echo",
               "--from-ref", "IntegrationSource/tick")  # fmt: skip
    with (
        EventDisplay() as seen,
        EventDisplay(responder=_replying("reply.echo")) as echo,
        EventDisplay(responder=_replying("reply.mute")) as mute,
    ):
        _trigger(local_broker, ns, "all", seen.url, None)
        _trigger(local_broker, ns, "echo", echo.url, "order.created")
        _trigger(local_broker, ns, "mute", mute.url, "order.created")
        for name in ("orders", "own"):  # Ready: every ingress applies it
            wait_until(lambda n=name: _ready(local_broker, ns, n), 30, f"policy {name} Ready")

        ok = _post(local_broker, ns, "order.created", secret)
        assert ok.status_code == 202, ok.text
        refusals = {
            "event-not-admitted": _post(local_broker, ns, "order.deleted", secret),
            "sender-not-admitted": _post(local_broker, ns, "order.created", other_secret),
            "anonymous-sender": _post(local_broker, ns, "order.created", None),
        }
        for decision, r in refusals.items():
            assert r.status_code == 403 and r.json()["decision"] == decision, r.text

        _timer(local_broker, ns, "tick")
        _timer(local_broker, ns, "silent")
        types = lambda: [g.headers.get("ce-type") for g in seen.received]  # noqa: E731
        # A timer's events carry Knative's timer source: its message (its name) tells them apart.
        bodies = lambda: {bytes(g.body) for g in seen.received}  # noqa: E731
        wait_until(lambda: "reply.echo" in types(), 30, "the admitted trigger's reply")
        wait_until(lambda: b"tick" in bodies(), 30, "the admitted timer's event")
        wait_until(lambda: mute.count >= 1, 30, "the refused trigger answered")
        wait_until(lambda: _metric(local_broker, "source_failure_count", ns) >= 1, 30,
                   "the refused timer's firing")  # fmt: skip
        for name in ("tick", "silent"):
            r = httpx.delete(f"{local_broker.url}{IS}/{ns}/integrationsources/{name}", timeout=30)
            assert r.is_success, r.text
        # A refused event is never stored: once refused, it cannot arrive later.
        logged = lambda: any("reply.mute-1 dropped" in line for line in local_broker.lines)  # noqa: E731
        wait_until(logged, 30, "the refused reply dropped and logged")
        assert "reply.mute" not in types()
        assert b"silent" not in bodies()
        assert types().count("order.created") == 1 and "order.deleted" not in types()
        # Each refusal counted once: three requests, the reply, each refused firing.
        failures = _metric(local_broker, "source_failure_count", ns)
        assert _metric(local_broker, "unauthorized_count", ns) == 4 + failures
        # ... and archived as rejected: the requests' events and the reply.
        wanted = ["order.created", "order.created", "order.deleted", "reply.mute"]
        archived = lambda: sorted(t for t in _refused_types(local_broker, ns) if t in wanted)  # noqa: E731
        wait_until(lambda: archived() == wanted, 30, "the refusals archived")

    test = ["policy", "test", "-o", "json", "--identity", admitted, "--event"]
    event = '{"specversion": "1.0", "id": "1", "source": "/c", "type": "%s"}'
    assert '"allowed": true' in _brokerctl(local_broker, ns, *test, event % "order.created")
    refused = _brokerctl(local_broker, ns, *test, event % "order.deleted")
    assert '"allowed": false' in refused and "event-not-admitted" in refused


@pytest.mark.parametrize(
    "mode, same_namespace",
    [("allow-same-namespace", 202), ("allow-all", 202), ("deny-all", 403)],
)
def test_the_default_mode_decides_for_a_token_broker_with_no_policy(
    mode: str, same_namespace: int, modes: dict[str, LocalBroker]
) -> None:
    runtime = modes[mode]
    ns, other = f"epm-{uuid.uuid4().hex[:8]}", f"epo-{uuid.uuid4().hex[:8]}"
    auth = {"name": "default", "annotations": {"serverless-broker/ingress-auth": "token"}}
    for n in (ns, other):
        assert runtime.put(n, "brokers", "default", {"metadata": auth}).is_success
    _, secret = _token(runtime, ns)
    _, foreign = _token(runtime, other)
    before = _metric(runtime, "unauthorized_count", ns)
    own = _post(runtime, ns, "t", secret)
    assert own.status_code == same_namespace, own.text
    if same_namespace == 403:
        assert own.json()["decision"] == "default-deny-all"
    # Another namespace's token is not one of this broker's: 401, as no token, in every mode.
    for r in (_post(runtime, ns, "t", foreign), _post(runtime, ns, "t", None)):
        assert r.status_code == 401, r.text
        assert r.headers["www-authenticate"] == 'Bearer realm="broker"'
    refused = 2 + (same_namespace == 403)
    assert _metric(runtime, "unauthorized_count", ns) - before == refused


@pytest.fixture(scope="module")
def modes(local_broker: LocalBroker) -> Any:
    """The module's runtime (the default mode) and one runtime per other mode on its AWS
    endpoint, started and stopped at once."""

    def start(mode: str) -> LocalBroker:
        env = {"BROKER_AUTHORIZATION_DEFAULT_MODE": mode}
        return start_local_broker(env, aws_endpoint=local_broker.aws_url)

    with ThreadPoolExecutor(2) as pool:
        names = ("allow-all", "deny-all")
        others = dict(zip(names, pool.map(start, names), strict=True))
    yield {"allow-same-namespace": local_broker, **others}
    with ThreadPoolExecutor(2) as pool:
        list(pool.map(stop_local_broker, others.values()))
