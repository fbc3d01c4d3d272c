"""The address guard of delivery (design.md §2.3, §5): outside local mode, subscribers and sinks,
HTTP or Kafka, may not be reached on addresses inside the deployment's own networks — loopback,
link-local (169.254.169.254, the instance metadata), private, carrier-grade NAT (100.64.0.0/10,
which Python does not count as private), multicast, reserved — unless allow-listed."""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterable

_SHARED = ipaddress.ip_network("100.64.0.0/10")  # RFC 6598: carrier-grade NAT


def is_blocked(ip: str, allowlist: Iterable[str] = ()) -> bool:
    addr = ipaddress.ip_address(ip)
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
        addr = addr.ipv4_mapped  # ::ffff:127.0.0.1 is 127.0.0.1
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
        or (isinstance(addr, ipaddress.IPv4Address) and addr in _SHARED)
    )


def refusal(host: str, port: int, allowlist: Iterable[str] = ()) -> str | None:
    """Why ``host`` may not be reached (it resolves to a guarded address), or None."""
    try:
        infos = socket.getaddrinfo(host.strip("[]"), port, type=socket.SOCK_STREAM)
    except OSError as exc:
        return f"{host} does not resolve: {exc}"
    allowlist = tuple(allowlist)
    for info in infos:
        address = str(info[4][0])
        if is_blocked(address, allowlist):
            return f"{host} resolves to {address}, a private or reserved address (not allowed)"
    return None
