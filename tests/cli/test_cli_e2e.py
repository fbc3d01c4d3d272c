"""``python -m brokerctl`` as a user runs it, against the local runtime (``brokerctl dev``) and a
real HTTP subscriber. One runtime per module; one namespace per test."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from brokerctl.embedded_aws import free_port
from brokerctl.event_display import EventDisplay, Received, Reply
from tests.cli.conftest import Result, run_brokerctl
from tests.e2e.conftest import start_local_broker, stop_local_broker, wait_until

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    broker = start_local_broker()
    yield broker.url
    stop_local_broker(broker)


@pytest.fixture
def ns() -> str:
    return f"cli-{uuid.uuid4().hex[:8]}"


def ctl(url: str, ns: str, *argv: str, env: dict[str, str] | None = None) -> Result:
    return run_brokerctl(
        *argv, env={"BROKERCTL_URL": url, "BROKERCTL_NAMESPACE": ns, **(env or {})}
    )


def ok(result: Result) -> Result:
    assert result.code == 0, f"exit {result.code}\nstdout:\n{result.out}\nstderr:\n{result.err}"
    return result


def as_json(result: Result) -> Any:
    return json.loads(ok(result).out)


def test_broker_trigger_send_update_delete(url: str, ns: str) -> None:
    with EventDisplay() as sub:
        r = ok(ctl(url, ns, "broker", "create", "default", "--wait"))
        assert f"Ingress: {url}/{ns}/default" in r.out
        ok(ctl(url, ns, "trigger", "create", "orders", "--filter", "type=com.example.order",
               "--sink", sub.url + "/orders", "--wait"))  # fmt: skip

        listing = ok(ctl(url, ns, "trigger", "list")).out
        row = next(line for line in listing.splitlines() if line.startswith("orders"))
        assert "default" in row and sub.url + "/orders" in row and "True" in row
        described = ok(ctl(url, ns, "trigger", "describe", "orders")).out
        for kind in ("BrokerReady", "SubscriberResolved", "DependencyReady", "Ready"):
            assert any(kind in line and "++" in line for line in described.splitlines()), kind
        assert "type: com.example.order" in described

        ok(ctl(url, ns, "send", "--type", "com.example.order", "--source", "/shop",
               "--id", "bin-1", "--subject", "a b", "--extension", "myext=v1",
               "--data", '{"total": 12.5}'))  # fmt: skip
        ok(ctl(url, ns, "send", "--structured", "--type", "com.example.order",
               "--source", "/shop", "--id", "json-1", "--data", '{"items": ["a"]}'))  # fmt: skip
        ok(ctl(url, ns, "send", "--type", "com.example.refund", "--source", "/shop",
               "--id", "nope-1"))  # fmt: skip
        assert sub.wait_for(lambda got: len(got) >= 2, timeout=20)
        by_id = {g.headers["ce-id"]: g for g in sub.received}
        binary = by_id["bin-1"]
        assert binary.path == "/orders"
        assert json.loads(binary.body) == {"total": 12.5}
        assert binary.headers["content-type"] == "application/json"
        assert binary.headers["ce-subject"] == "a%20b"
        assert binary.headers["ce-myext"] == "v1"
        assert json.loads(by_id["json-1"].body) == {"items": ["a"]}

        doc = as_json(ctl(url, ns, "trigger", "update", "orders", "--sink", sub.url + "/v2",
                          "--wait", "-o", "json"))  # fmt: skip
        assert doc["spec"]["subscriber"]["uri"] == sub.url + "/v2"
        assert doc["spec"]["filter"] == {"attributes": {"type": "com.example.order"}}
        ok(ctl(url, ns, "send", "--type", "com.example.order", "--source", "/shop", "--id", "b2"))
        assert sub.wait_for(lambda got: any(g.path == "/v2" for g in got), timeout=20)
        assert "nope-1" not in {g.headers.get("ce-id") for g in sub.received}

        r = ok(ctl(url, ns, "trigger", "delete", "orders"))
        assert "Trigger 'orders' deleted" in r.out and r.err == ""
        ok(ctl(url, ns, "broker", "delete", "default"))
        assert as_json(ctl(url, ns, "broker", "list", "-o", "json"))["items"] == []
        assert as_json(ctl(url, ns, "trigger", "list", "-o", "json"))["items"] == []


def test_trigger_before_broker_shows_the_reason_then_turns_ready(url: str, ns: str) -> None:
    ok(
        ctl(
            url,
            ns,
            "trigger",
            "create",
            "early",
            "--broker",
            "late",
            "--sink",
            "http://127.0.0.1:9/",
        )
    )
    described = ok(ctl(url, ns, "trigger", "describe", "early")).out
    line = next(x for x in described.splitlines() if "BrokerReady" in x)
    assert "!!" in line and "BrokerDoesNotExist" in line
    ok(ctl(url, ns, "broker", "create", "late"))
    wait_until(
        lambda: (
            ok(ctl(url, ns, "trigger", "describe", "early", "-o", "yaml")).out.count(
                "status: 'True'"
            )
            >= 5
        ),
        20,
        "trigger early Ready",
    )


def test_dead_letters_list_redrive_purge_and_delete_warning(url: str, ns: str) -> None:
    failing = {"dead-1", "dead-2", "dead-3", "dead-4"}

    def responder(got: Received, n: int) -> Reply:
        # 400 is not retried: the event goes to the trigger's DLQ at once (design.md §2.3).
        return Reply(400 if got.headers.get("ce-id") in failing else 202)

    def dlq(*extra: str) -> Any:
        return as_json(ctl(url, ns, "dlq", "list", "dl", "-o", "json", *extra))

    def send(event_id: str) -> None:
        ok(ctl(url, ns, "send", "--type", "t", "--source", "/s", "--id", event_id))

    with EventDisplay(responder=responder) as sub:
        ok(ctl(url, ns, "broker", "create", "default", "--wait"))
        ok(ctl(url, ns, "trigger", "create", "dl", "--sink", sub.url, "--retry", "0", "--wait"))
        send("dead-1")
        doc = wait_until(lambda: (d := dlq())["count"] == 1 and d, 20, "dead letter")
        event = doc["items"][0]["event"]
        assert event["id"] == "dead-1"
        assert event["knativeerrorcode"] == 400 and event["knativeerrordest"] == sub.url
        table = ok(ctl(url, ns, "dlq", "list", "dl")).out
        assert "dead-1" in table and "1 shown" in table
        assert dlq()["count"] == 1  # listing did not consume

        failing.discard("dead-1")
        r = ok(ctl(url, ns, "dlq", "redrive", "dl"))
        assert "Redrove 1 event(s)" in r.out
        assert sub.wait_for(lambda got: [g.headers["ce-id"] for g in got].count("dead-1") == 2, 20)

        send("dead-2")
        send("dead-3")
        wait_until(lambda: dlq()["count"] == 2, 20, "two dead letters")
        assert as_json(ctl(url, ns, "dlq", "purge", "dl", "-o", "json")) == {"purged": 2}
        assert dlq()["depth"] == 0

        send("dead-4")
        wait_until(lambda: dlq()["count"] == 1, 20, "one dead letter")
        r = ok(ctl(url, ns, "trigger", "delete", "dl"))
        assert "1 dead-lettered event(s)" in r.err and "discarded" in r.err


def test_token_protected_ingress(url: str, ns: str) -> None:
    ok(ctl(url, ns, "broker", "create", "secure", "--ingress-auth", "token", "--wait"))
    send = ("send", "--broker", "secure", "--type", "t", "--source", "/s")
    r = ctl(url, ns, *send)
    assert r.code == 1 and "HTTP 401" in r.err
    token = ok(ctl(url, ns, "broker", "token", "create", "secure")).out.strip()
    assert token and "shown only once" not in token
    ok(ctl(url, ns, *send, "--token", token))
    ok(ctl(url, ns, *send, env={"BROKERCTL_TOKEN": token}))
    (listed,) = as_json(ctl(url, ns, "broker", "token", "list", "secure", "-o", "json"))["items"]
    assert token not in json.dumps(listed)
    ok(ctl(url, ns, "broker", "token", "revoke", "secure", listed["id"]))
    wait_until(lambda: ctl(url, ns, *send, "--token", token).code == 1, 10, "token refused")


def test_errors_from_the_runtime(url: str, ns: str) -> None:
    r = ctl(url, ns, "send", "--broker", "nowhere", "--type", "t", "--source", "/s")
    assert r.code == 1 and "HTTP 404" in r.err
    ok(ctl(url, ns, "broker", "create", "default"))
    r = ctl(url, ns, "send", "--type", "", "--source", "/s", "--extension", "Bad=x")
    assert r.code == 1 and "HTTP 400" in r.err
    assert "ce-type" in r.err or "type:" in r.err
    r = ctl(f"http://127.0.0.1:{free_port()}", ns, "broker", "list")
    assert r.code == 1 and "is `make run` running?" in r.err
    assert ctl(url, ns, "trigger", "create", "x").code == 2


def test_control_plane_problems_name_every_field(url: str, ns: str) -> None:
    r = ctl(url, ns, "broker", "describe", "nope")
    assert r.code == 1 and "HTTP 404" in r.err and "nope" in r.err
    r = ctl(url, ns, "trigger", "create", "bad", "--sink", "ftp://x", "--filter", "Type=x",
            "--backoff-delay", "soon")  # fmt: skip
    assert r.code == 1 and "HTTP 400" in r.err
    fields = [line for line in r.err.splitlines() if line.startswith("  - ")]
    assert len(fields) >= 3, r.err
    assert any("subscriber" in f for f in fields)
    assert any("backoffDelay" in f for f in fields)
    assert any("Type" in f for f in fields)
