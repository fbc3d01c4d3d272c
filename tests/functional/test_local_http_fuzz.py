"""Chunked framing, fuzzed, on the local runtime's HTTP server: any split of a body into chunks
(with chunk extensions and trailers) is read back byte for byte, and bytes that are not HTTP
never get a 5xx or an answer other than problem+json."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.functional.harness import Harness
from tests.functional.local_server import serving

SETTINGS = settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


@pytest.fixture(scope="module")
def served() -> Iterator[tuple[Harness, int]]:
    with serving() as both:
        yield both


def answers(port: int, data: bytes) -> list[tuple[int, bytes, bytes]]:
    """Each answer to ``data`` (status, head, body), read until the server closes or is quiet."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(data)
        sock.shutdown(socket.SHUT_WR)
        got = b""
        try:
            while part := sock.recv(65536):
                got += part
        except ConnectionResetError:
            pass
    out = []
    while got:
        head, _, rest = got.partition(b"\r\n\r\n")
        length = next(
            (int(line.split(b":")[1]) for line in head.split(b"\r\n")
             if line.lower().startswith(b"content-length:")), 0,
        )  # fmt: skip
        out.append((int(head.split(b" ")[1]), head, rest[:length]))
        got = rest[length:]
    return out


@st.composite
def chunked(draw: st.DrawFn) -> tuple[bytes, bytes]:
    body = draw(st.binary(max_size=3000))
    cuts = sorted(draw(st.lists(st.integers(0, len(body)), max_size=8)))
    framed = b""
    for start, end in zip([0, *cuts], [*cuts, len(body)], strict=True):
        if end > start:
            extension = draw(st.sampled_from([b"", b";x=1", b';name="v"']))
            framed += b"%x%s\r\n%s\r\n" % (end - start, extension, body[start:end])
    framed += b"0\r\n" + draw(st.sampled_from([b"", b"X-Trailer: 1\r\n"])) + b"\r\n"
    return body, framed


@SETTINGS
@given(case=chunked())
def test_any_chunking_delivers_the_body_intact(
    served: tuple[Harness, int], case: tuple[bytes, bytes]
) -> None:
    h, port = served
    body, framed = case
    head = (
        f"POST /ns/default HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nCe-Specversion: 1.0\r\n"
        "Ce-Id: f1\r\nCe-Source: /s\r\nCe-Type: t\r\nContent-Type: application/octet-stream\r\n"
        "Transfer-Encoding: chunked\r\n\r\n"
    ).encode()
    ((status, _, _),) = answers(port, head + framed)
    assert status == 202
    h.sender.sent.clear()
    h.deliver_once("all")
    (sent,) = h.sender.sent
    assert sent.body == body


@SETTINGS
@given(noise=st.binary(min_size=1, max_size=400))
def test_bytes_that_are_not_http_get_problem_json_never_a_5xx(
    served: tuple[Harness, int], noise: bytes
) -> None:
    _, port = served
    head = f"POST /ns/default HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n".encode()
    for data in (noise + b"\r\n\r\n", head + b"Transfer-Encoding: chunked\r\n\r\n" + noise):
        for status, head_bytes, body in answers(port, data):
            assert status < 500
            if status >= 400:
                assert b"application/problem+json" in head_bytes
                assert json.loads(body)["status"] == status
