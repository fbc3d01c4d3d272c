"""A destination's CACerts in the urllib3 sender against a real local TLS server of the tests'
own CA (docs/targets.md, CACerts): trusted with the bundle, refused without it, the address guard
still applied with it, and one pool manager per bundle, bounded."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import closing

import pytest
from werkzeug.serving import make_server
from werkzeug.wrappers import Request, Response

from chalicelib.adapters import http_sender
from chalicelib.adapters.http_sender import Urllib3Sender
from chalicelib.core.resources.delivery_spec import ca_certs_problems
from tests.tls_ca import LocalCa


@pytest.fixture(scope="module")
def ca() -> LocalCa:
    return LocalCa()


@pytest.fixture(scope="module")
def tls_url(ca: LocalCa) -> Iterator[str]:
    @Request.application  # type: ignore[misc]
    def app(request: Request) -> Response:
        return Response(status=202)

    server = make_server("127.0.0.1", 0, app, threaded=True, ssl_context=ca.server_context())
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"https://127.0.0.1:{server.server_port}/"
    server.shutdown()
    thread.join(5)


def test_the_bundle_is_trusted_and_nothing_without_it(ca: LocalCa, tls_url: str) -> None:
    with closing(Urllib3Sender(guard=False)) as sender:
        refused = sender.post(tls_url, {}, b"x", timeout=5)
        assert refused.status is None and "CERTIFICATE_VERIFY_FAILED" in (refused.error or "")
        assert sender.trusting(ca.ca_pem).post(tls_url, {}, b"x", timeout=5).status == 202
        other = LocalCa("another CA").ca_pem
        assert sender.trusting(other).post(tls_url, {}, b"x", timeout=5).status is None


def test_the_address_guard_still_applies_with_ca_certs(ca: LocalCa, tls_url: str) -> None:
    with closing(Urllib3Sender(guard=True)) as guarded:
        answer = guarded.trusting(ca.ca_pem).post(tls_url, {}, b"x", timeout=5)
    assert answer.status is None and "blocked" in (answer.error or "")


def test_one_sender_per_bundle_and_a_bounded_number(
    monkeypatch: pytest.MonkeyPatch, ca: LocalCa
) -> None:
    monkeypatch.setattr(http_sender, "MAX_TRUST_BUNDLES", 2)
    bundles = [LocalCa(f"CA {i}").ca_pem for i in range(3)]
    with closing(Urllib3Sender(guard=False)) as sender:
        first = sender.trusting(bundles[0])
        assert sender.trusting(bundles[0]) is first
        sender.trusting(bundles[1])
        sender.trusting(bundles[2])
        assert len(sender._trusting) == 2
        assert sender.trusting(bundles[0]) is not first  # dropped, built again


def test_pem_bundles_are_checked_block_by_block(ca: LocalCa) -> None:
    two = ca.ca_pem + LocalCa("second").ca_pem
    assert ca_certs_problems(two, "p") == []
    broken = ca.ca_pem + "-----BEGIN CERTIFICATE-----\nTUlJQg==\n-----END CERTIFICATE-----\n"
    [problem] = ca_certs_problems(broken, "p")
    assert problem.message == "certificate 2 of 2 is not a valid X.509 certificate"
    assert ca_certs_problems(ca.ca_pem * 40, "p")[0].message.startswith("holds 40 certificates")
    assert "larger than" in ca_certs_problems("x" * 70_000, "p")[0].message
    key = "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"
    assert "nothing else" in ca_certs_problems(ca.ca_pem + key, "p")[0].message
