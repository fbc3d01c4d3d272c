"""The local HTTP server runs the Chalice app on a thread per connection. Chalice keeps the request
being handled on the app object; shared by every thread, one request's view could read another's
method, headers or body (a PUT answered as a GET; an event stored twice and its neighbour never,
both answered 202). Each thread must see its own request."""

from __future__ import annotations

import http.client
import json
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from urllib.parse import urlsplit

import pytest

from app import app
from brokerctl.embedded_aws import free_port
from brokerctl.http_server import AppServer
from chalicelib.container import use_container
from tests.functional.harness import Harness

SENDERS = 8
EACH = 40


@pytest.fixture
def url() -> Iterator[str]:
    h = Harness()
    h.broker()
    h.trigger("all")
    use_container(h.container)
    srv = AppServer(app, "127.0.0.1", free_port(), lambda line: None)
    srv.start()
    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)  # switch threads often: a shared request is then read by another
    try:
        yield srv.url
    finally:
        sys.setswitchinterval(before)
        srv.stop()
        use_container(None)
    queue = h.queue_of("all")
    stored = [m["event"]["id"] for m in h.messages(queue)]
    sent = [f"{s}-{i}" for s in range(SENDERS) for i in range(EACH)]
    assert sorted(stored) == sorted(sent)  # each event once, none lost


def test_concurrent_requests_each_see_their_own(url: str) -> None:
    where = urlsplit(url)

    def send(sender: int) -> list[str]:
        wrong = []
        conn = http.client.HTTPConnection(where.hostname, where.port, timeout=30)
        for i in range(EACH):
            event_id = f"{sender}-{i}"
            body = json.dumps({"specversion": "1.0", "id": event_id, "source": "/s", "type": "t"})
            conn.request("POST", "/ns/default", body=body,
                         headers={"content-type": "application/cloudevents+json"})  # fmt: skip
            answer = conn.getresponse()
            answer.read()
            if answer.status != 202:
                wrong.append(f"{event_id}: {answer.status}")
            # and a read of another method on the same server between the writes
            conn.request("GET", "/apis/eventing.knative.dev/v1/namespaces/ns/brokers/default")
            got = conn.getresponse()
            doc = json.loads(got.read())
            if got.status != 200 or doc.get("kind") != "Broker":
                wrong.append(f"GET after {event_id}: {got.status}")
        conn.close()
        return wrong

    with ThreadPoolExecutor(SENDERS) as pool:
        wrong = [w for ws in pool.map(send, range(SENDERS)) for w in ws]
    assert wrong == []
