"""The console's live tail (brokerctl/console): the archive tap, the hub's bounds (ring, slow
pages dropped and counted, a cap on open tails) and the SSE stream over the runtime's HTTP
server, with its filters and its resume after ``Last-Event-ID``."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime

import httpx
import pytest
from chalice import Chalice

from brokerctl.console import Console, TailHub, TappedArchive, tail_entry
from brokerctl.embedded_aws import free_port
from brokerctl.http_server import AppServer
from chalicelib.core import archive
from chalicelib.core.errors import UnavailableError
from tests.fakes import MemoryArchive

OUTCOMES = ("delivered", "reply", "retry", "dead_lettered")
AT = datetime(2026, 1, 1, tzinfo=UTC)


def delivery(trigger: str, outcome: str, event_id: str = "e1", broker: str = "b") -> bytes:
    record = archive.delivery_record(
        "ns", broker, trigger, event_id, "t", "/s", AT, 1, 200, outcome, 3.0, AT
    )
    return archive.encode_line(record)


def accepted(event_id: str, triggers: list[str], broker: str = "b") -> bytes:
    event = {"specversion": "1.0", "id": event_id, "source": "/s", "type": "t"}
    return archive.encode_line(archive.accepted_record("ns", broker, event, triggers, 10, AT))


def entry(n: int, broker: str = "b", trigger: str = "t") -> dict[str, object]:
    return {"kind": "accepted", "namespace": "ns", "broker": broker, "triggers": [trigger],
            "id": f"e{n}"}  # fmt: skip


def test_outcomes_are_named_for_the_tail() -> None:
    entries = [tail_entry(json.loads(delivery("t", o))) for o in OUTCOMES]
    kinds = [e["kind"] for e in entries if e is not None]
    assert kinds == ["delivered", "delivered", "retried", "dead-lettered"]


def test_tap_passes_records_on_and_shows_each_written_one_once() -> None:
    sink, hub = MemoryArchive(), TailHub()
    tap = TappedArchive(sink, hub)
    lines = [accepted("e1", ["t"]), delivery("t", "retry"), b"not json\n"]
    sink.fail_next = 1
    with pytest.raises(UnavailableError):
        tap.put(lines)
    assert hub.ring() == []  # not written: not shown (the archiver's retry shows it)
    tap.put(lines)
    assert sink.records == lines
    assert [e["kind"] for e in hub.ring()] == ["accepted", "retried"]
    assert [e["seq"] for e in hub.ring()] == [1, 2]


def test_ring_keeps_the_last_entries_only() -> None:
    hub = TailHub(ring_size=3)
    for n in range(5):
        hub.publish(entry(n))
    assert [e["id"] for e in hub.ring()] == ["e2", "e3", "e4"]


def test_a_slow_page_is_dropped_and_counted_never_waited_for() -> None:
    hub = TailHub(queue_size=4)
    got = hub.subscribe(None, None, None)
    assert got is not None
    slow, _ = got
    started = time.monotonic()
    for n in range(10):
        hub.publish(entry(n))
    assert time.monotonic() - started < 1.0
    assert slow.dropped and hub.dropped == 1 and hub.subscribers == 0
    assert slow.entries.qsize() == 4  # bounded: what it had, no more


def test_open_tails_are_capped() -> None:
    hub = TailHub(max_subscribers=2)
    assert hub.subscribe(None, None, None) and hub.subscribe(None, None, None)
    assert hub.subscribe(None, None, None) is None


def test_filters_by_broker_and_trigger() -> None:
    hub = TailHub()
    got = hub.subscribe("ns", "b1", "t2")
    assert got is not None
    sub, _ = got
    hub.publish(entry(1, "b1", "t1"))
    hub.publish(entry(2, "b2", "t2"))
    hub.publish(entry(3, "b1", "t2"))
    assert sub.entries.get_nowait()["id"] == "e3"  # type: ignore[index]
    assert sub.entries.empty()


@pytest.fixture
def served() -> Iterator[tuple[str, Console]]:
    console = Console(TailHub(queue_size=3))
    server = AppServer(Chalice("console-test"), "127.0.0.1", free_port(), lambda _: None, console)
    server.start()
    yield server.url, console
    console.stop()
    server.stop()


def read_events(response: httpx.Response, count: int) -> list[str]:
    """The data lines of the first ``count`` events of an SSE stream."""
    out: list[str] = []
    for line in response.iter_lines():
        if line.startswith("id: "):
            out.append(line[4:])
            if len(out) == count:
                break
    return out


def test_sse_streams_the_backlog_then_new_entries_and_resumes(
    served: tuple[str, Console],
) -> None:
    url, console = served
    console.hub.publish(entry(1))
    console.hub.publish(entry(2, broker="other"))
    with httpx.stream("GET", f"{url}/ui/events?broker=b", timeout=10) as r:
        assert r.headers["content-type"] == "text/event-stream"
        threading.Timer(0.2, console.hub.publish, [entry(3)]).start()
        assert read_events(r, 2) == ["1", "3"]
    headers = {"Last-Event-ID": "1"}
    with httpx.stream("GET", f"{url}/ui/events?broker=b", headers=headers, timeout=10) as r:
        assert read_events(r, 1) == ["3"]


def test_sse_tells_a_dropped_page_and_ends(served: tuple[str, Console]) -> None:
    url, console = served
    with httpx.stream("GET", f"{url}/ui/events", timeout=10) as r:
        deadline = time.monotonic() + 5
        while console.hub.subscribers == 0:  # the stream is subscribed once its headers arrive
            assert time.monotonic() < deadline
            time.sleep(0.01)
        # Its handler sends what it can until the socket's buffers are full; then its queue of
        # 3 fills: published (big entries) until it is dropped, which must not block.
        while console.hub.dropped == 0:
            assert time.monotonic() < deadline, "the unread page was never dropped"
            console.hub.publish({**entry(0), "pad": "x" * 65536})
        text = "\n".join(r.iter_lines())
    assert "event: dropped" in text
    assert console.hub.dropped == 1


def test_static_pages_are_served_and_nothing_else(served: tuple[str, Console]) -> None:
    url, _ = served
    page = httpx.get(f"{url}/ui", timeout=5)
    assert page.status_code == 200 and 'src="/ui/console.js"' in page.text
    assert "http://" not in page.text and "https://" not in page.text  # no assets from the net
    assert (
        httpx.get(f"{url}/ui/console.js", timeout=5)
        .headers["content-type"]
        .startswith("text/javascript")
    )
    assert httpx.get(f"{url}/ui/../app.py", timeout=5).status_code == 404
    assert httpx.post(f"{url}/ui/events", timeout=5).status_code == 405


def test_proxy_for_a_deployed_api_signs_calls_and_has_no_tail() -> None:
    from botocore.credentials import Credentials

    from brokerctl.client import resolve_target
    from brokerctl.console.proxy import ConsoleProxy

    seen: list[httpx.Request] = []

    def api(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json={"items": []})

    target = resolve_target("https://abc123.execute-api.eu-west-1.amazonaws.com/api", None)
    proxy = ConsoleProxy(
        target, "127.0.0.1", free_port(), Credentials("AKIDEXAMPLE", "secret"),
        httpx.MockTransport(api),
    ).start()  # fmt: skip
    try:
        path = "/apis/eventing.knative.dev/v1/namespaces/default/triggers"
        token = {"x-console-token": proxy.console.token}
        r = httpx.get(f"{proxy.url}{path}", headers=token, timeout=5)
        assert r.status_code == 200 and r.json() == {"items": []}
        (request,) = seen
        assert str(request.url) == f"{target.url}{path}"  # the stage kept
        assert request.headers["authorization"].startswith("AWS4-HMAC-SHA256 Credential=AKID")
        assert "/eu-west-1/execute-api/" in request.headers["authorization"]
        assert "x-console-token" not in request.headers  # the page's, never sent on
        page = httpx.get(f"{proxy.url}/ui", timeout=5)
        assert page.status_code == 200 and proxy.console.token in page.text
        assert httpx.get(f"{proxy.url}/ui/events", timeout=5).status_code == 204
        assert len(seen) == 1  # the page's own files are never fetched from the API
    finally:
        proxy.stop()


@pytest.mark.parametrize(
    ("length", "status"), [("abc", 400), ("-1", 400), ("9" * 5000, 400), ("99999999999", 413)]
)
def test_proxy_refuses_an_unreadable_content_length_as_the_api_does(
    length: str, status: int
) -> None:
    # It used to answer 413 to any of them, and to drop the connection (int() of 5,000 digits).
    import socket

    from brokerctl.client import resolve_target
    from brokerctl.console.proxy import ConsoleProxy

    def api(request: httpx.Request) -> httpx.Response:
        raise AssertionError("nothing is forwarded")

    target = resolve_target("http://127.0.0.1:9/", None)
    proxy = ConsoleProxy(
        target, "127.0.0.1", free_port(), transport=httpx.MockTransport(api)
    ).start()
    try:
        host, port = proxy.url.removeprefix("http://").split(":")
        with socket.create_connection((host, int(port)), timeout=10) as sock:
            request = f"POST /ns/b HTTP/1.1\r\nHost: x\r\nContent-Length: {length}\r\n\r\n"
            sock.sendall(request.encode())
            head = sock.recv(65536).decode()
    finally:
        proxy.stop()
    assert head.startswith(f"HTTP/1.1 {status} ") and "application/problem+json" in head
