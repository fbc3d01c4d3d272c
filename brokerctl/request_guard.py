"""Who may call the local runtime and the console's signing proxy (docs/local-mode.md): a program
on this machine, or the console page they serve, never another web page. A page elsewhere can
make the browser send a form post, a ``fetch`` without CORS, or (DNS rebinding) any request to
a name it controls that resolves to 127.0.0.1; every one of them is refused here, before the app
sees it. Deployed, API Gateway and IAM protect the control plane: this is local mode's check.

- ``Host`` names the bound address (``localhost``, the loopback or bound IP, with the port):
  else 421. A rebinding page's requests carry its own name.
- The target is a path (origin-form): an absolute URL (``GET http://elsewhere/``) or ``*`` is
  refused (400); the proxy never forwards anywhere but its API.
- A browser's cross-site request is refused (403): an ``Origin`` other than this server's own, or
  ``Sec-Fetch-Site`` other than ``same-origin`` or ``none``. Programs send neither.
- Control-plane writes (POST/PUT/PATCH/DELETE under ``/apis/`` and ``/registry``) carry
  ``Content-Type: application/json`` (415 otherwise): no HTML form can send it. A write with
  neither body nor content type (the CLI's DELETE, a redrive) passes: a form always has one.
- The console page's token (``X-Console-Token``, made per run and written into the page):
  required on every call the proxy forwards, and on the local runtime's control-plane writes
  sent by a browser (those with an ``Origin``)."""

from __future__ import annotations

import hmac
import ipaddress
from dataclasses import dataclass
from typing import TYPE_CHECKING

from chalicelib.core.errors import Problem

if TYPE_CHECKING:
    from brokerctl.http_server import Answer, Request

TOKEN_HEADER = "x-console-token"
WRITES = frozenset({"POST", "PUT", "PATCH", "DELETE"})
_LOOPBACK = frozenset({"localhost", "127.0.0.1", "[::1]"})
_SAFE_FETCH_SITES = frozenset({"same-origin", "none"})


def is_control_plane(path: str) -> bool:
    # Two segments are ingress's shape (/{namespace}/{broker}), which refuses these namespaces
    # itself (400); every control-plane route that writes is deeper.
    parts = path.strip("/").split("/")
    return parts[0] in ("apis", "registry") and len(parts) > 2


def _is_ip(name: str) -> bool:
    try:
        ipaddress.ip_address(name.removeprefix("[").removesuffix("]"))
    except ValueError:
        return False
    return True


@dataclass(frozen=True)
class Guard:
    host: str  # as bound
    port: int
    token: str | None = None  # the console page's, when a console is served

    def host_ok(self, value: str) -> bool:
        name, _, port = value.strip().lower().rpartition(":")
        if port != str(self.port):
            return False
        bound = f"[{self.host}]" if ":" in self.host else self.host
        if name in _LOOPBACK or name == bound.lower():
            return True
        # Bound to every interface, this machine's addresses are its own; a name is not (a
        # rebinding page's is its own name, never an address).
        return self.host in ("0.0.0.0", "::", "") and _is_ip(name)

    def problems(self, request: Request, forwarded: bool = False) -> list[tuple[int, Problem]]:
        """Every rule the request breaks, each with its status; ``forwarded``: the proxy is about
        to send it on to its API."""
        found: list[tuple[int, Problem]] = []
        headers = request.headers
        host = headers.get("host", "")
        if not self.host_ok(host):
            found.append((421, Problem("Host", f"must name this server ({self.host}:{self.port})")))
        target = request.target
        if not (target.startswith("/") and target.isascii() and target.isprintable()):
            found.append((400, Problem("target", "must be a path (ASCII), not an absolute URL")))
        origin = headers.get("origin")
        if origin is not None and origin != f"http://{host}":
            found.append((403, Problem("Origin", f"{origin[:100]!r} is another site")))
        site = headers.get("sec-fetch-site")
        if site is not None and site not in _SAFE_FETCH_SITES:
            found.append(
                (403, Problem("Sec-Fetch-Site", f"{site[:40]!r}: a request of another site"))
            )
        write = request.method in WRITES and is_control_plane(request.path)
        if self.token is not None and (forwarded or (write and origin is not None)):
            given = headers.get(TOKEN_HEADER, "")
            if not hmac.compare_digest(given.encode(), self.token.encode()):
                found.append((403, Problem("X-Console-Token", "missing or not this console's")))
        media = headers.get("content-type", "").split(";", 1)[0].strip().lower()
        if write and (media or request.body) and media != "application/json":
            message = f"a control-plane write is application/json, not {media[:100] or 'untyped'}"
            found.append((415, Problem("Content-Type", message)))
        return found

    def refusal(self, request: Request, forwarded: bool = False) -> Answer | None:
        """The answer to a request that breaks a rule (the status of the first, every one
        named), or None."""
        from brokerctl.http_server import problem

        found = self.problems(request, forwarded)
        if not found:
            return None
        status = found[0][0]
        title, slug = _TITLES[status]
        detail = "; ".join(f"{p.field} {p.message}" for _, p in found)
        return problem(status, title, detail, slug, errors=[p.to_json() for _, p in found])


_TITLES = {
    421: ("Misdirected request", "misdirected-request"),
    400: ("Bad request", "bad-request"),
    403: ("Forbidden", "cross-site-request"),
    415: ("Unsupported media type", "unsupported-media-type"),
}
