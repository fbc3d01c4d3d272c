"""The console (docs/console.md) in Debian's headless Chromium and Firefox ESR through Playwright,
on the local runtime: a trigger created with the form, an event seen delivered in the live tail, a
failing one seen dead-lettered, inspected in the DLQ view with its knativeerror* extensions,
redriven with the subscriber healthy again and seen delivered; then the trigger edited with the
form. A Connection is listed with its auth, secret ARN and Ready, a trigger names the one it uses,
and its planted key is on no page and in no answer the console fetched."""

from __future__ import annotations

import os
import shutil
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import boto3
import httpx
import pytest

from brokerctl.event_display import EventDisplay, Received, Reply
from tests.e2e import firefox_bidi
from tests.e2e.conftest import LocalBroker, start_local_broker, stop_local_broker

pytestmark = pytest.mark.e2e

CHROMIUM = "/usr/bin/chromium"
FIREFOX = "/usr/bin/firefox-esr"  # over WebDriver BiDi: tests/e2e/firefox_bidi.py
sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")

DOCS_IMAGE = Path(__file__).resolve().parents[2] / "docs" / "img" / "console.png"
TIMEOUT_MS = 15_000


@pytest.fixture(scope="module")
def broker() -> Iterator[LocalBroker]:
    b = start_local_broker()
    yield b
    stop_local_broker(b)
    print("\n--- local runtime output (last 200 lines) ---\n" + "\n".join(b.lines[-200:]))


class Switch:
    """The subscriber's answer: 200, or 500 while failing."""

    def __init__(self) -> None:
        self.failing = threading.Event()

    def __call__(self, received: Received, n: int) -> Reply:
        return Reply(status=500, body=b"down for the test") if self.failing.is_set() else Reply()


def send(b: LocalBroker, ns: str, event_id: str) -> None:
    headers = {
        "ce-specversion": "1.0",
        "ce-id": event_id,
        "ce-source": "/console-e2e",
        "ce-type": "console.test",
        "content-type": "application/json",
    }
    r = httpx.post(f"{b.url}/{ns}/default", content=b'{"n":1}', headers=headers, timeout=10)
    assert r.status_code == 202, r.text


def launch(pw: sync_api.Playwright, name: str, tmp_path: Path) -> sync_api.Browser:
    """Debian's browser ``name`` (``make test`` installs both), headless; skipped without it."""
    path = CHROMIUM if name == "chromium" else FIREFOX
    if shutil.which(path) is None:
        pytest.skip(f"no {path} (apt-get install {Path(path).name})")
    if name == "chromium":
        return pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
    pytest.importorskip("websockets", reason="websockets is not installed")
    return pw.firefox.launch(
        channel="moz-firefox", executable_path=firefox_bidi.launcher(FIREFOX, tmp_path)
    )


def make_target_triggers(b: LocalBroker, ns: str) -> None:
    """A trigger to an IntegrationSink (a log sink) and one whose subscriber has an audience."""
    sinks = f"{b.url}/apis/sinks.knative.dev/v1alpha1/namespaces/{ns}/integrationsinks"
    body = {"metadata": {"name": "quiet"}, "spec": {"log": {"loggerName": "console"}}}
    assert httpx.put(f"{sinks}/quiet", json=body, timeout=10).status_code == 201
    ref = {"apiVersion": "sinks.knative.dev/v1alpha1", "kind": "IntegrationSink", "name": "quiet"}
    for name, subscriber in [
        ("to-log", {"ref": ref}),
        ("with-audience", {"uri": "https://orders.example/", "audience": "orders-api"}),
    ]:
        doc = {"metadata": {"name": name}, "spec": {"subscriber": subscriber}}
        assert b.put(ns, "triggers", name, doc).status_code == 201


def make_connection(b: LocalBroker, ns: str, secret: str) -> str:
    """An API-key Connection whose key is ``secret`` (planted), and a trigger that uses it."""
    client = boto3.client("secretsmanager", endpoint_url=b.aws_url, region_name="us-east-1")
    name = f"serverless-broker/local/connections/console-{uuid.uuid4().hex[:8]}"
    arn = str(client.create_secret(Name=name, SecretString=secret)["ARN"])
    auth = {"apiKey": {"header": "X-Api-Key", "secretRef": {"arn": arn}}}
    url = f"{b.url}/apis/serverless-broker.dev/v1alpha1/namespaces/{ns}/connections/partner"
    r = httpx.put(url, json={"metadata": {"name": "partner"}, "spec": {"auth": auth}}, timeout=30)
    assert r.status_code == 201, r.text
    meta = {"name": "keyed", "annotations": {"serverless-broker/connection": "partner"}}
    never = {"attributes": {"type": "console.never"}}  # the test's events stay off it
    spec = {"subscriber": {"uri": "https://partner.example/"}, "filter": never}
    doc = {"metadata": meta, "spec": spec}
    assert b.put(ns, "triggers", "keyed", doc).status_code == 201
    return arn


@pytest.mark.parametrize("name", ["chromium", "firefox"])
def test_console_trigger_tail_dead_letter_redrive(
    broker: LocalBroker, tmp_path: Path, name: str
) -> None:
    ns = f"ui-{uuid.uuid4().hex[:8]}"
    r = broker.put(ns, "brokers", "default", {"metadata": {"name": "default"}})
    assert r.status_code == 201, r.text
    broker.wait_ready(ns, "brokers", "default")
    # A second broker with an EventPolicy of its own: its row names it (docs/security.md).
    assert broker.put(ns, "brokers", "other", {"metadata": {"name": "other"}}).status_code == 201
    to_other = {"ref": {"apiVersion": "eventing.knative.dev/v1", "kind": "Broker", "name": "other"}}
    policy = {"metadata": {"name": "audit-only"}, "spec": {"to": [to_other]}}
    policies = f"{broker.url}/apis/eventing.knative.dev/v1alpha1/namespaces/{ns}/eventpolicies"
    assert httpx.put(f"{policies}/audit-only", json=policy, timeout=30).status_code == 201
    planted = f"PLANTED-console-key-{uuid.uuid4().hex}"
    secret_arn = make_connection(broker, ns, planted)
    switch = Switch()
    with EventDisplay(responder=switch) as sink, sync_api.sync_playwright() as pw:
        browser = launch(pw, name, tmp_path)
        page = browser.new_page(viewport={"width": 1400, "height": 1100})
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        fetched: set[str] = set()  # the GETs the page makes (the live tail's stream aside)
        page.on(
            "request",
            lambda r: (
                fetched.add(r.url) if r.method == "GET" and "/ui/events" not in r.url else None
            ),
        )
        page.set_default_timeout(TIMEOUT_MS)
        page.goto(f"{broker.url}/ui")
        page.fill("#namespace", ns)
        page.click("#refresh")
        page.wait_for_selector("#brokers tbody tr >> text=default")
        page.wait_for_selector("#brokers tbody tr:has-text('other') >> text=audit-only")
        # The Connection: its auth, its secret's ARN and Ready; the trigger names it.
        conn_row = page.locator("#connections tr[data-connection=partner]")
        conn_row.wait_for()
        assert "apiKey" in conn_row.inner_text() and secret_arn in conn_row.inner_text()
        page.wait_for_selector("#connections tr[data-connection=partner] >> text=True")
        assert "partner" in page.locator("#triggers tr[data-trigger=keyed]").inner_text()

        # Create the trigger with the form, after testing its filter.
        form = page.locator("#trigger-form")
        name_input = form.locator("[name=name]")
        name_input.fill("Not_A-name-")  # the DNS-1123 label pattern, as each browser compiles it
        assert name_input.evaluate("e => e.validity.patternMismatch")
        name_input.fill("orders")
        assert name_input.evaluate("e => e.checkValidity()")
        form.locator("[name=subscriber]").fill(sink.url)
        form.locator("[name=filter]").fill('{"type": "console.test"}')
        form.locator("[name=retry]").fill("0")
        form.locator("[name=event]").fill(
            '{"specversion":"1.0","id":"t","source":"/s","type":"console.test"}'
        )
        page.click("#test-filter")
        page.wait_for_selector("#test-result >> text=matched:")
        assert page.inner_text("#test-result").startswith("matched")
        page.click("#save-trigger")
        page.wait_for_selector("#save-result >> text=saved orders")
        broker.wait_ready(ns, "triggers", "orders")

        # Delivered: seen in the live tail.
        ok_id = f"ok-{uuid.uuid4().hex[:6]}"
        send(broker, ns, ok_id)
        page.wait_for_selector(f"#tail-entries tr[data-kind=delivered][data-id={ok_id}]")
        # Its acceptance may reach the tail after its delivery (archived after queueing): it
        # still takes its place by time, below the delivery (newest first).
        page.wait_for_selector(f"#tail-entries tr[data-kind=accepted][data-id={ok_id}]")
        kinds = page.eval_on_selector_all(
            f"#tail-entries tr[data-id={ok_id}]", "rows => rows.map(r => r.dataset.kind)"
        )
        assert kinds == ["delivered", "accepted"]

        # Failed (no retries): dead-lettered, then inspected in the DLQ view.
        switch.failing.set()
        bad_id = f"bad-{uuid.uuid4().hex[:6]}"
        send(broker, ns, bad_id)
        page.wait_for_selector(f"#tail-entries tr[data-kind=dead-lettered][data-id={bad_id}]")
        page.click("#triggers tr[data-trigger=orders] .open-dlq")
        row = page.locator("#dead-letters tr.dead-letter", has_text=bad_id)
        deadline_ms = TIMEOUT_MS
        while row.count() == 0 and deadline_ms > 0:  # the DLQ is written after the tail entry
            page.wait_for_timeout(250)
            deadline_ms -= 250
            page.click("#dlq-refresh")
        row.first.click()
        detail = page.inner_text("#dead-letter")
        assert '"knativeerrorcode": 500' in detail
        assert "knativeerrordest" in detail
        assert "down for the test" in detail  # knativeerrordata, decoded
        page.screenshot(path=str(tmp_path / "dead-letter.png"), full_page=True)

        # Redriven with the subscriber healthy again: delivered.
        switch.failing.clear()
        page.click("#dlq-redrive")
        page.wait_for_selector("#dlq-result >> text=redriven")
        page.wait_for_selector(
            f"#tail-entries tr[data-kind=delivered][data-id={bad_id}]", timeout=TIMEOUT_MS
        )
        assert sink.wait_for(lambda got: any(bad_id in str(g.headers) for g in got), 5)
        # Edited with the form: its filter no longer matches the sample event; saved.
        page.click("#triggers tr[data-trigger=orders] >> text=Edit")
        assert form.locator("[name=subscriber]").input_value() == sink.url
        form.locator("[name=filter]").fill('{"type": "console.other"}')
        page.click("#test-filter")
        page.wait_for_selector("#test-result >> text=not matched")
        page.click("#save-trigger")
        page.wait_for_selector("#triggers tr[data-trigger=orders] >> text=console.other")

        # Each trigger's target kind and audience (docs/targets.md), for triggers made by API.
        make_target_triggers(broker, ns)
        page.click("#refresh")
        log_row = page.locator("#triggers tr[data-trigger=to-log]")
        log_row.wait_for()
        assert "IntegrationSink" in log_row.inner_text()
        assert "quiet → log:console?level=INFO" in log_row.inner_text()
        aud_row = page.locator("#triggers tr[data-trigger=with-audience]").inner_text()
        assert "HTTP URL" in aud_row and "orders-api" in aud_row
        assert "HTTP URL" in page.locator("#triggers tr[data-trigger=orders]").inner_text()
        page.wait_for_selector("#chart-area svg")
        page.screenshot(path=str(tmp_path / "console.png"), full_page=True)
        # docs/img/console.png, on demand
        if name == "chromium" and os.environ.get("BROKER_UPDATE_SCREENSHOT"):
            shutil.copyfile(tmp_path / "console.png", DOCS_IMAGE)
        assert errors == []
        # The planted key is on no page and in no answer the console fetched.
        assert planted not in page.content()
        assert any("/connections" in u for u in fetched)
        for url in sorted(fetched):
            answer = httpx.get(url, timeout=30)
            assert answer.status_code == 200 and planted not in answer.text, url
        browser.close()
