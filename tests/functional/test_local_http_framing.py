"""The local runtime's HTTP server owns HTTP/1.1 framing (brokerctl/http_server.py, waitress): a
chunked body is read whole (the hand-parsed server read only ``Content-Length``: a binary event
was answered 202 and delivered empty, structured ones and batches were refused, and the unread
chunks were taken for the next request), the connection stays usable after it, ``Expect:
100-continue`` is answered, a body over 10 MiB is refused however it is framed, and what is not
HTTP gets a problem+json 400, never an HTML page."""

from __future__ import annotations

import http.client
import json
import socket
import threading
from collections.abc import Iterator
from contextlib import closing

import pytest

from brokerctl.http_server import MAX_BODY_BYTES
from tests.functional.harness import Harness
from tests.functional.local_server import serving


@pytest.fixture
def served() -> Iterator[tuple[Harness, int]]:
    with serving() as both:
        yield both


def chunks(data: bytes, size: int = 7) -> Iterator[bytes]:
    for i in range(0, len(data), size):
        yield data[i : i + size]


def post_chunked(conn: http.client.HTTPConnection, headers: dict[str, str], body: bytes) -> int:
    conn.request("POST", "/ns/default", body=chunks(body), headers=headers, encode_chunked=True)
    answer = conn.getresponse()
    answer.read()
    return answer.status


def test_a_binary_event_sent_chunked_is_delivered_with_its_body(
    served: tuple[Harness, int],
) -> None:
    h, port = served
    data = bytes(range(256)) * 4  # not text: data_base64 on the queue
    headers = {"ce-specversion": "1.0", "ce-id": "b1", "ce-source": "/s", "ce-type": "t",
               "content-type": "application/octet-stream"}  # fmt: skip
    with closing(http.client.HTTPConnection("127.0.0.1", port, timeout=10)) as conn:
        assert post_chunked(conn, headers, data) == 202
    h.deliver_once("all")
    (sent,) = h.sender.sent
    assert sent.body == data and sent.headers["ce-id"] == "b1"


def test_structured_and_batch_sent_chunked_are_accepted(served: tuple[Harness, int]) -> None:
    h, port = served
    one = {"specversion": "1.0", "id": "s1", "source": "/s", "type": "t", "data": {"n": 1}}
    batch = [{**one, "id": f"b{i}"} for i in range(3)]
    structured = {"content-type": "application/cloudevents+json"}
    batched = {"content-type": "application/cloudevents-batch+json"}
    with closing(http.client.HTTPConnection("127.0.0.1", port, timeout=10)) as conn:
        assert post_chunked(conn, structured, json.dumps(one).encode()) == 202
        assert post_chunked(conn, batched, json.dumps(batch).encode()) == 202
    stored = sorted(m["event"]["id"] for m in h.messages(h.queue_of("all")))
    assert stored == ["b0", "b1", "b2", "s1"]


def test_the_connection_serves_two_more_requests_after_a_chunked_one(
    served: tuple[Harness, int],
) -> None:
    h, port = served
    event = {"specversion": "1.0", "id": "k1", "source": "/s", "type": "t"}
    headers = {"content-type": "application/cloudevents+json"}
    with closing(http.client.HTTPConnection("127.0.0.1", port, timeout=10)) as conn:
        assert post_chunked(conn, headers, json.dumps(event).encode()) == 202
        sock = conn.sock
        for _ in range(2):
            conn.request("GET", "/apis/eventing.knative.dev/v1/namespaces/ns/brokers/default")
            answer = conn.getresponse()
            assert answer.status == 200 and json.loads(answer.read())["kind"] == "Broker"
        assert conn.sock is sock  # one kept-alive connection throughout
    assert [m["event"]["id"] for m in h.messages(h.queue_of("all"))] == ["k1"]


def exchange(port: int, data: bytes, after_head: bytes = b"") -> bytes:
    """Sends ``data``, reads what comes back until the server closes or pauses; ``after_head``
    is sent once the first answer's head is in (the body after ``100 Continue``)."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(data)
        got = b""
        while b"\r\n\r\n" not in got:
            part = sock.recv(65536)
            if not part:
                return got
            got += part
        if after_head:
            sock.sendall(after_head)
        sock.settimeout(2)
        try:
            while part := sock.recv(65536):
                got += part
                if after_head and got.count(b"\r\n\r\n") >= 2 and got.endswith(b"}"):
                    break
        except TimeoutError:
            pass
        return got


def test_expect_100_continue_is_answered_before_the_body(served: tuple[Harness, int]) -> None:
    # As curl sends a body it streams (-T -): chunked, after the server says to go on.
    h, port = served
    body = json.dumps({"specversion": "1.0", "id": "c1", "source": "/s", "type": "t"}).encode()
    head = (
        f"POST /ns/default HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
        "Content-Type: application/cloudevents+json\r\nExpect: 100-continue\r\n"
        "Transfer-Encoding: chunked\r\n\r\n"
    ).encode()
    got = exchange(port, head, after_head=b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body))
    assert got.startswith(b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 202 ")
    assert [m["event"]["id"] for m in h.messages(h.queue_of("all"))] == ["c1"]


def test_a_chunked_body_over_the_limit_is_refused_413(served: tuple[Harness, int]) -> None:
    h, port = served
    mib = b"x" * (1024 * 1024)
    head = (
        f"POST /ns/default HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
        "Content-Type: text/plain\r\nCe-Specversion: 1.0\r\nCe-Id: big\r\nCe-Source: /s\r\n"
        "Ce-Type: t\r\nTransfer-Encoding: chunked\r\n\r\n"
    ).encode()
    chunk = b"%x\r\n%s\r\n" % (len(mib), mib)
    assert 11 * len(mib) > MAX_BODY_BYTES

    def send(sock: socket.socket) -> None:
        try:
            sock.sendall(head)
            for _ in range(11):
                sock.sendall(chunk)
            sock.sendall(b"0\r\n\r\n")
        except OSError:
            pass  # refused and closed before the last chunk: the answer is read meanwhile

    got = b""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sender = threading.Thread(target=send, args=(sock,))
        sender.start()
        try:
            while part := sock.recv(65536):
                got += part
        except ConnectionResetError:
            pass  # the rest of the body, unread when it closed
        sender.join(10)
    assert got.startswith(b"HTTP/1.1 413 ")
    head_text, _, body = got.partition(b"\r\n\r\n")
    assert b"application/problem+json" in head_text
    assert json.loads(body)["status"] == 413
    assert h.messages(h.queue_of("all")) == []


@pytest.mark.parametrize(
    "garbage",
    [
        b"HELLO\r\n\r\n",
        b"GET /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n",
        b"POST /ns/default HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
    ],
    ids=["request-line", "content-length", "chunk-size"],
)
def test_a_malformed_request_is_400_problem_json(
    served: tuple[Harness, int], garbage: bytes
) -> None:
    _, port = served
    got = exchange(port, garbage)
    head, _, body = got.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 400 ") or head.startswith(b"HTTP/1.0 400 ")
    assert b"application/problem+json" in head
    doc = json.loads(body)
    assert doc["status"] == 400 and doc["detail"]
