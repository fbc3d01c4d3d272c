"""HttpSender on urllib3: one keep-alive pool manager per warm container, no redirects, no
retries (the queue retries), and (outside local mode) a guard that refuses loopback, link-local,
private and multicast addresses at connect time, so a DNS answer that changes between check and
connect cannot slip through (rebinding).

urllib3 rather than httpx: it already ships with botocore, and it spends about 40 % less CPU per
request, which is what a delivery worker posting to a fast subscriber is bound by
(``benchmarks/delivery.py``).

A Destination's CACerts (docs/targets.md) get a pool manager of their own, whose TLS trusts the
system's CAs and the bundle's, behind the same guard; one per bundle, the least recently used
dropped beyond MAX_TRUST_BUNDLES."""

from __future__ import annotations

import hashlib
import socket
import ssl
import threading
import time
from collections import OrderedDict
from collections.abc import Iterator, Mapping

import urllib3
from urllib3 import HTTPHeaderDict
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool
from urllib3.exceptions import (
    ConnectTimeoutError,
    HTTPError,
    NameResolutionError,
    NewConnectionError,
)
from urllib3.util import connection as util_connection

from chalicelib.adapters.addresses import is_blocked
from chalicelib.ports import HttpResponse

__all__ = ["Urllib3Sender", "is_blocked"]

MAX_TRUST_BUNDLES = 16


def _guarded_connect(conn: HTTPConnection, allowlist: tuple[str, ...]) -> socket.socket:
    """Resolve the host, check every address, and connect to a checked one (TLS still verifies
    the certificate against the host name: only the socket goes to the address)."""
    host = conn._dns_host.strip("[]")
    try:
        infos = socket.getaddrinfo(host, conn.port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise NameResolutionError(conn.host, conn, exc) from exc
    addresses = [str(info[4][0]) for info in infos]
    allowed = [a for a in addresses if not is_blocked(a, allowlist)]
    if not allowed:
        listed = ", ".join(addresses)
        raise NewConnectionError(
            conn, f"subscriber address {conn.host} resolves to a blocked range ({listed})"
        )
    try:
        return util_connection.create_connection(
            (allowed[0], conn.port or 80),
            conn.timeout,
            source_address=conn.source_address,
            socket_options=conn.socket_options,
        )
    except TimeoutError as exc:
        raise ConnectTimeoutError(conn, f"connection to {conn.host} timed out") from exc
    except OSError as exc:
        raise NewConnectionError(conn, f"failed to establish a new connection: {exc}") from exc


def _guarded_pools(
    allowlist: tuple[str, ...],
) -> dict[str, type[HTTPConnectionPool]]:
    class GuardedHTTPConnection(HTTPConnection):
        def _new_conn(self) -> socket.socket:
            return _guarded_connect(self, allowlist)

    class GuardedHTTPSConnection(HTTPSConnection):
        def _new_conn(self) -> socket.socket:
            return _guarded_connect(self, allowlist)

    class GuardedHTTPConnectionPool(HTTPConnectionPool):
        ConnectionCls = GuardedHTTPConnection

    class GuardedHTTPSConnectionPool(HTTPSConnectionPool):
        ConnectionCls = GuardedHTTPSConnection

    return {"http": GuardedHTTPConnectionPool, "https": GuardedHTTPSConnectionPool}


class _Headers(Mapping[str, str]):
    """An answer's headers: lower-case names, repeated fields joined with ", ", any case looks
    up; nothing is copied until it is read (most answers' headers never are)."""

    __slots__ = ("_raw",)

    def __init__(self, raw: HTTPHeaderDict) -> None:
        self._raw = raw

    def __getitem__(self, name: str) -> str:
        return self._raw[name]

    def __iter__(self) -> Iterator[str]:
        return (name.lower() for name in self._raw)

    def __len__(self) -> int:
        return len(self._raw)


class Urllib3Sender:
    def __init__(
        self,
        *,
        guard: bool,
        allowlist: tuple[str, ...] = (),
        pool_size: int = 32,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self._guard, self._allowlist, self._pool_size = guard, allowlist, pool_size
        # num_pools: subscriber hosts kept warm at once (one function serves every trigger).
        self._pool = urllib3.PoolManager(
            num_pools=100, maxsize=pool_size, retries=False, ssl_context=ssl_context
        )
        if guard:
            self._pool.pool_classes_by_scheme = _guarded_pools(allowlist)
        self._timeouts: dict[float, urllib3.Timeout] = {}
        self._trusting: OrderedDict[str, Urllib3Sender] = OrderedDict()
        self._lock = threading.Lock()

    def trusting(self, ca_certs: str) -> Urllib3Sender:
        """A sender whose TLS trusts the system's CAs and those of the PEM bundle ``ca_certs``
        (validated when its trigger was stored)."""
        key = hashlib.sha256(ca_certs.encode()).hexdigest()
        with self._lock:
            found = self._trusting.get(key)
            if found is not None:
                self._trusting.move_to_end(key)
                return found
        context = ssl.create_default_context()
        context.load_verify_locations(cadata=ca_certs)
        sender = Urllib3Sender(
            guard=self._guard,
            allowlist=self._allowlist,
            pool_size=self._pool_size,
            ssl_context=context,
        )
        with self._lock:
            self._trusting[key] = sender
            while len(self._trusting) > MAX_TRUST_BUNDLES:
                self._trusting.popitem(last=False)[1].close()
        return sender

    def post(
        self, url: str, headers: Mapping[str, str], body: bytes, timeout: float
    ) -> HttpResponse:
        started = time.perf_counter()
        try:
            response = self._pool.urlopen(
                "POST",
                url,
                body=body,
                headers=headers,
                redirect=False,
                retries=False,
                timeout=self._timeout(timeout),
                preload_content=False,
            )
            try:
                content = response.read()  # once: ``.data`` reads again when the body is empty
            finally:
                response.release_conn()
        except (HTTPError, OSError) as exc:
            return HttpResponse(
                status=None,
                headers={},
                body=f"dispatch error: {exc}".encode(),
                error=type(exc).__name__ + ": " + str(exc),
                elapsed_ms=(time.perf_counter() - started) * 1000,
            )
        return HttpResponse(
            status=response.status,
            headers=_Headers(response.headers),
            body=content,
            elapsed_ms=(time.perf_counter() - started) * 1000,
        )

    def _timeout(self, seconds: float) -> urllib3.Timeout:
        """The whole attempt (connect + send + answer) within ``seconds``; one object per value."""
        timeout = self._timeouts.get(seconds)
        if timeout is None:
            if len(self._timeouts) > 64:
                self._timeouts.clear()
            timeout = self._timeouts[seconds] = urllib3.Timeout(total=seconds)
        return timeout

    def close(self) -> None:
        self._pool.clear()
