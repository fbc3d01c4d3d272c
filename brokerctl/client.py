"""HTTP client for the broker's API: where it is, how requests are signed, what errors mean."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Generator, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlsplit

import httpx

DEFAULT_URL = "http://127.0.0.1:8080"
DEFAULT_NAMESPACE = "default"
CONTROL_PLANE = "/apis/eventing.knative.dev/v1/namespaces"
PROBLEM_JSON = "application/problem+json"

_EXECUTE_API_HOST = re.compile(r"\.execute-api\.([a-z0-9-]+)\.amazonaws\.com(\.cn)?$")


class CliError(Exception):
    """A failure to report to the user; ``exit_code`` 1 for API errors, 2 for usage errors."""

    exit_code = 1


class UsageError(CliError):
    exit_code = 2


class UnreachableError(CliError):
    pass


class ApiError(CliError):
    def __init__(self, status: int, problem: Mapping[str, Any], text: str = "") -> None:
        self.status = status
        self.problem = dict(problem)
        super().__init__(format_problem(status, problem, text))


def format_problem(status: int, problem: Mapping[str, Any], text: str = "") -> str:
    """An RFC 9457 problem as lines a person can act on: title, detail, then every field."""
    title = problem.get("title") or httpx.codes.get_reason_phrase(status) or "Error"
    lines = [f"{title} (HTTP {status})"]
    errors = [e for e in problem.get("errors") or [] if isinstance(e, Mapping)]
    detail = problem.get("detail")
    if detail and not errors:
        lines.append(f"  {detail}")
    for e in errors:
        field = e.get("field") or "(request)"
        lines.append(f"  - {field}: {e.get('message', '')}")
    if not problem and text.strip():
        lines.append("  " + text.strip()[:500])
    return "\n".join(lines)


@dataclass(frozen=True)
class Target:
    url: str
    namespace: str
    sigv4: bool
    region: str | None


def execute_api_region(url: str) -> str | None:
    """The region of an API Gateway ``{id}.execute-api.{region}.amazonaws.com`` URL, else None."""
    m = _EXECUTE_API_HOST.search((urlsplit(url).hostname or "").lower())
    return m.group(1) if m else None


def resolve_target(
    url: str | None,
    namespace: str | None,
    sigv4: bool = False,
    environ: Mapping[str, str] = os.environ,
) -> Target:
    """The endpoint from ``--url``, ``BROKERCTL_URL``, then the local default; the namespace from
    ``-n``, ``BROKERCTL_NAMESPACE``, then ``default``. The control plane is SigV4-signed when asked
    to or when the host is an execute-api host: deployed, it uses IAM authorization (design.md §5).
    """
    base = (url or environ.get("BROKERCTL_URL") or DEFAULT_URL).rstrip("/")
    parts = urlsplit(base)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise UsageError(f"--url must be an http(s) URL, got {base!r}")
    region = execute_api_region(base)
    sign = sigv4 or region is not None
    if sign and region is None:
        region = environ.get("AWS_REGION") or environ.get("AWS_DEFAULT_REGION")
        if not region:
            raise UsageError("--sigv4 needs a region: set AWS_REGION (the URL does not name one)")
    ns = namespace or environ.get("BROKERCTL_NAMESPACE") or DEFAULT_NAMESPACE
    return Target(base, ns, sign, region)


class SigV4Auth(httpx.Auth):
    """Signs each request with botocore's SigV4 signer for ``execute-api``.

    Signed headers are ``host``, ``content-type`` and the ``x-amz-*`` the signer adds; the rest
    (user-agent, connection, ...) may be changed by proxies and is left out of the signature.
    """

    requires_request_body = True

    def __init__(self, credentials: Any, region: str) -> None:
        self._credentials = credentials
        self._region = region

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        for name, value in self.sign(request).items():
            request.headers[name] = value
        yield request

    def sign(self, request: httpx.Request) -> dict[str, str]:
        # Imported when signing: most runs talk to the local broker and never need botocore.
        from botocore.auth import SigV4Auth as BotocoreSigV4
        from botocore.awsrequest import AWSRequest

        headers = {"host": request.headers["host"]}
        if "content-type" in request.headers:
            headers["content-type"] = request.headers["content-type"]
        aws = AWSRequest(
            method=request.method, url=str(request.url), data=request.content, headers=headers
        )
        BotocoreSigV4(self._credentials, "execute-api", self._region).add_auth(aws)
        wanted = ("Authorization", "X-Amz-Date", "X-Amz-Security-Token")
        return {k: aws.headers[k] for k in wanted if k in aws.headers}


def default_credentials() -> Any:
    import boto3

    credentials = boto3.Session().get_credentials()
    if credentials is None:
        raise CliError(
            "SigV4 signing needs AWS credentials (environment, ~/.aws, or an instance role); "
            "none were found"
        )
    return credentials.get_frozen_credentials()


class BrokerClient:
    def __init__(
        self,
        target: Target,
        transport: httpx.BaseTransport | None = None,
        credentials: Any = None,
        timeout: float = 30.0,
        auth: httpx.Auth | None = None,
    ) -> None:
        self.target = target
        if auth is None and target.sigv4:
            assert target.region is not None
            auth = SigV4Auth(credentials or default_credentials(), target.region)
        self._http = httpx.Client(
            base_url=target.url,
            transport=transport,
            timeout=timeout,
            follow_redirects=False,
            headers={"user-agent": "brokerctl", "accept": "application/json"},
        )
        self._auth = auth

    def close(self) -> None:
        self._http.close()

    def path(self, *parts: str) -> str:
        """A control-plane path in the target namespace, each part percent-encoded."""
        tail = "/".join(quote(p, safe="") for p in parts)
        return f"{CONTROL_PLANE}/{quote(self.target.namespace, safe='')}/{tail}"

    def get(self, path: str, params: Mapping[str, Any] | None = None) -> Any:
        return self.request("GET", path, params=params)

    def post(self, path: str, body: Any = None) -> Any:
        return self.request("POST", path, body=body)

    def put(self, path: str, body: Any) -> Any:
        return self.request("PUT", path, body=body)

    def delete(self, path: str) -> Any:
        return self.request("DELETE", path)

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        params: Mapping[str, Any] | None = None,
    ) -> Any:
        content = None if body is None else json.dumps(body).encode()
        headers = {"content-type": "application/json"} if content is not None else {}
        response = self._send(
            method, path, content=content, headers=headers, params=params, auth=self._auth
        )
        raise_for_problem(response)
        if not response.content:
            return None
        try:
            return response.json()
        except ValueError:
            raise CliError(
                f"{method} {path}: the answer (HTTP {response.status_code}) is not JSON"
            ) from None

    def send_event(self, path: str, headers: Mapping[str, str], body: bytes) -> httpx.Response:
        # Never signed: the ingress has no IAM authorizer; its bearer tokens use Authorization.
        response = self._send("POST", path, content=body, headers=dict(headers), auth=None)
        raise_for_problem(response)
        return response

    def _send(self, method: str, path: str, auth: httpx.Auth | None, **kw: Any) -> httpx.Response:
        try:
            return self._http.request(method, path, auth=auth or httpx.USE_CLIENT_DEFAULT, **kw)
        except httpx.ConnectError:
            raise UnreachableError(
                f"cannot reach the broker at {self.target.url}; is `make run` running?"
            ) from None
        except httpx.TimeoutException:
            raise UnreachableError(
                f"the broker at {self.target.url} did not answer in time ({method} {path})"
            ) from None
        except httpx.RemoteProtocolError:
            raise CliError(
                f"the broker at {self.target.url} closed the connection without an answer "
                f"({method} {path}); its log says why"
            ) from None
        except httpx.TransportError as exc:
            raise UnreachableError(f"cannot talk to {self.target.url}: {exc}") from None


def raise_for_problem(response: httpx.Response) -> None:
    if response.status_code < 400:
        return
    problem: dict[str, Any] = {}
    media = response.headers.get("content-type", "").split(";")[0].strip().lower()
    if media in (PROBLEM_JSON, "application/json"):
        try:
            doc = response.json()
        except ValueError:
            doc = None
        if isinstance(doc, dict):
            problem = doc
            # API Gateway's own answers (403 from IAM, 429 throttling) carry {"message": ...}.
            if "message" in doc and "detail" not in doc:
                problem = {"detail": str(doc["message"])}
    raise ApiError(response.status_code, problem, response.text)
