"""The urllib3 sender against real local HTTP servers: no redirects, per-attempt timeout, and the
connect-time address guard used outside local mode."""

from __future__ import annotations

import threading
from contextlib import closing

import pytest

from brokerctl.event_display import EventDisplay, Received, Reply
from chalicelib.adapters.http_sender import Urllib3Sender, is_blocked


@pytest.mark.parametrize(
    ("ip", "blocked"),
    [
        ("127.0.0.1", True),
        ("::1", True),
        ("169.254.169.254", True),
        ("10.1.2.3", True),
        ("192.168.0.1", True),
        ("172.16.5.4", True),
        ("224.0.0.1", True),
        ("0.0.0.0", True),
        ("fe80::1", True),
        ("100.64.0.1", True),  # carrier-grade NAT: not "private" to Python (issue 16)
        ("100.127.255.254", True),
        ("::ffff:127.0.0.1", True),  # IPv4-mapped loopback
        ("::ffff:10.0.0.1", True),
        ("100.128.0.1", False),
        ("8.8.8.8", False),
        ("2001:4860:4860::8888", False),
    ],
)
def test_blocked_ranges(ip: str, blocked: bool) -> None:
    assert is_blocked(ip) is blocked


def test_allowlist_opens_a_range() -> None:
    assert not is_blocked("10.1.2.3", ["10.0.0.0/8"])
    assert is_blocked("10.1.2.3", ["192.168.0.0/16"])


def test_guard_refuses_loopback_at_connect_time() -> None:
    with EventDisplay() as sub:
        with closing(Urllib3Sender(guard=True)) as guarded:
            response = guarded.post(sub.url, {}, b"x", timeout=5)
        assert response.status is None and "blocked" in (response.error or "")
        assert sub.count == 0
        with closing(Urllib3Sender(guard=True, allowlist=("127.0.0.0/8",))) as allowed:
            assert allowed.post(sub.url, {}, b"x", timeout=5).status == 202
        assert sub.count == 1


def test_redirects_are_not_followed() -> None:
    with (
        EventDisplay() as target,
        EventDisplay(responder=lambda got, n: Reply(302, {"Location": target.url})) as redirecting,
    ):
        with closing(Urllib3Sender(guard=False)) as sender:
            response = sender.post(redirecting.url, {}, b"x", timeout=5)
        assert response.status == 302
        assert target.count == 0


def test_timeout_bounds_each_attempt() -> None:
    release = threading.Event()

    def slow(got: Received, n: int) -> Reply:
        release.wait(10)
        return Reply(202)

    with EventDisplay(responder=slow) as sub:
        try:
            with closing(Urllib3Sender(guard=False)) as sender:
                response = sender.post(sub.url, {}, b"x", timeout=0.3)
        finally:
            release.set()
        assert response.status is None
        assert response.error and "Timeout" in response.error
        assert 250 <= response.elapsed_ms < 5000


def test_keep_alive_reuses_the_connection() -> None:
    with EventDisplay() as sub:
        with closing(Urllib3Sender(guard=False)) as sender:
            for _ in range(3):
                assert sender.post(sub.url, {}, b"x", timeout=5).status == 202
        assert sub.connections == 1


def test_guard_resolves_names_and_covers_https() -> None:
    with EventDisplay() as sub:
        port = sub.url.rsplit(":", 1)[1].split("/")[0]
        with closing(Urllib3Sender(guard=True)) as guarded:
            by_name = guarded.post(f"http://localhost:{port}/", {}, b"x", timeout=5)
            # Refused before any TLS: the socket is never opened to a blocked address.
            tls = guarded.post(f"https://127.0.0.1:{port}/", {}, b"x", timeout=5)
        assert by_name.status is None and "blocked" in (by_name.error or "")
        assert tls.status is None and "blocked" in (tls.error or "")
        assert sub.count == 0 and sub.connections == 0


def test_answer_headers_are_lower_case_and_body_is_read() -> None:
    reply = Reply(200, {"Ce-Id": "r1", "Retry-After": "3", "Content-Type": "text/plain"}, b"hi")
    with EventDisplay(responder=lambda got, n: reply) as sub:
        with closing(Urllib3Sender(guard=False)) as sender:
            response = sender.post(sub.url, {"ce-id": "1"}, b"x" * 70_000, timeout=5)
        assert response.status == 200 and response.body == b"hi"
        assert response.headers["ce-id"] == "r1" and response.headers["retry-after"] == "3"
        assert sub.received[0].body == b"x" * 70_000


def test_transport_errors_are_answers_without_status() -> None:
    with EventDisplay() as sub:
        url = sub.url
    with closing(Urllib3Sender(guard=False)) as sender:
        response = sender.post(url, {}, b"x", timeout=5)  # nothing listens there any more
    assert response.status is None and response.error and response.body.startswith(b"dispatch")


def test_answer_headers_list_lower_case_names_and_look_up_in_any_case() -> None:
    reply = Reply(503, {"Retry-After": "3", "X-Multi": "a"}, b"busy")
    with (
        EventDisplay(responder=lambda got, n: reply) as sub,
        closing(Urllib3Sender(guard=False)) as sender,
    ):
        response = sender.post(sub.url, {}, b"x", timeout=5)
    headers = dict(response.headers.items())
    assert headers["retry-after"] == "3" and headers["x-multi"] == "a"
    assert all(name == name.lower() for name in headers)
    assert response.headers.get("RETRY-AFTER") == "3" and response.headers.get("absent") is None
    assert len(response.headers) == len(headers)


def test_repeated_answer_fields_read_as_one_joined_value() -> None:
    from urllib3 import HTTPHeaderDict

    from chalicelib.adapters.http_sender import _Headers

    raw = HTTPHeaderDict()
    raw.add("Warning", "a")
    raw.add("warning", "b")
    raw.add("Ce-Id", "1")
    headers = _Headers(raw)
    assert dict(headers) == {"warning": "a, b", "ce-id": "1"}
    assert headers["WARNING"] == "a, b" and len(headers) == 2


def test_kafka_subscribers_get_the_same_guard() -> None:
    from chalicelib.adapters.kafka_publisher import KafkaProducerPublisher
    from chalicelib.core.cloudevents.kafka_binding import KafkaRecord

    record = KafkaRecord(key=None, value=b"x", headers=())
    for servers in (
        "127.0.0.1:9092",
        "localhost:9092",
        "100.64.1.2:9092",
        "8.8.8.8:9092,10.0.0.5:9094",
    ):
        guarded = KafkaProducerPublisher(guard=True)
        result = guarded.publish(servers, "t", record, timeout=1)
        assert not result.ok and (result.error or "").startswith("refused"), servers
        assert guarded._producers == {}  # no producer was made, nothing connected
