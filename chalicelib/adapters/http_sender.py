"""HttpSender on httpx: one keep-alive client per warm container, no redirects, and (outside
local mode) a guard that refuses loopback, link-local, private and multicast addresses at connect
time, so a DNS answer that changes between check and connect cannot slip through (rebinding)."""

from __future__ import annotations

import ipaddress
import socket
import time
from collections.abc import Iterable, Mapping
from typing import Any

import httpcore
import httpx

from chalicelib.ports import HttpResponse


class BlockedAddressError(OSError):
    pass


def is_blocked(ip: str, allowlist: Iterable[str] = ()) -> bool:
    addr = ipaddress.ip_address(ip)
    for entry in allowlist:
        if addr in ipaddress.ip_network(entry, strict=False):
            return False
    return bool(
        addr.is_loopback
        or addr.is_link_local
        or addr.is_private
        or addr.is_multicast
        or addr.is_reserved
        or addr.is_unspecified
    )


class _GuardedBackend(httpcore.SyncBackend):
    """Resolves the host itself, checks every address, and connects to a checked address."""

    def __init__(self, allowlist: tuple[str, ...]) -> None:
        self._allowlist = allowlist

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.NetworkStream:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        addresses = [info[4][0] for info in infos]
        allowed = [a for a in addresses if not is_blocked(str(a), self._allowlist)]
        if not allowed:
            listed = ", ".join(map(str, addresses))
            raise httpcore.ConnectError(
                f"subscriber address {host} resolves to a blocked range ({listed})"
            )
        return super().connect_tcp(str(allowed[0]), port, timeout, local_address, socket_options)


class HttpxSender:
    def __init__(
        self, *, guard: bool, allowlist: tuple[str, ...] = (), pool_size: int = 32
    ) -> None:
        limits = httpx.Limits(max_connections=pool_size, max_keepalive_connections=pool_size)
        transport = httpx.HTTPTransport(limits=limits, retries=0)
        if guard:
            transport._pool = httpcore.ConnectionPool(  # the public API has no backend hook
                max_connections=pool_size,
                max_keepalive_connections=pool_size,
                network_backend=_GuardedBackend(allowlist),
            )
        self._client = httpx.Client(transport=transport, follow_redirects=False)

    def post(
        self, url: str, headers: Mapping[str, str], body: bytes, timeout: float
    ) -> HttpResponse:
        started = time.perf_counter()
        try:
            response = self._client.post(url, headers=dict(headers), content=body, timeout=timeout)
            content = response.read()
        except httpx.HTTPError as exc:
            return HttpResponse(
                status=None,
                headers={},
                body=f"dispatch error: {exc}".encode(),
                error=type(exc).__name__ + ": " + str(exc),
                elapsed_ms=(time.perf_counter() - started) * 1000,
            )
        return HttpResponse(
            status=response.status_code,
            headers={k.lower(): v for k, v in response.headers.items()},
            body=content,
            elapsed_ms=(time.perf_counter() - started) * 1000,
        )

    def close(self) -> None:
        self._client.close()
