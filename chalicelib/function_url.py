"""A Lambda Function URL in front of the API function (docs/cost.md): its events (payload format
2.0) become the API Gateway REST events Chalice routes, and Chalice's answers the 2.0 response.

Chalice routes only REST events (``requestContext.resourcePath``), so a 2.0 event is matched here
against the app's own routes (a literal segment beats a ``{parameter}``, as API Gateway does) and
rewritten; everything after that is the same code path as through API Gateway.

Authentication: API Gateway checks the control plane's IAM authorizer before Lambda runs; a
Function URL checks SigV4 itself when its AuthType is AWS_IAM (``requestContext.authorizer.iam``
is then present), and nothing when it is NONE. So a request whose event carries no IAM identity
reaches only the public routes (the ingress, /healthz): a control-plane route answers 401 there.

With AWS_IAM, any principal allowed ``lambda:InvokeFunctionUrl`` on the function (a producer's
role, given it to send events) is an IAM caller of every route of every namespace: Lambda checks
the right to invoke the function, not a route. A stage whose Function URL is for producers serves
only the public routes there (``ingress_only``, ``BROKER_FUNCTION_URL_INGRESS_ONLY``, set from
``function_url.routes: "ingress"`` in ``.chalice/config.json``): every other route answers 404
problem+json, whoever signs; the control plane stays behind API Gateway's IAM authorizer.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any
from urllib.parse import parse_qs, unquote

from chalice.app import Chalice

from chalicelib.problems import PROBLEM_TYPE, no_route_problem, problem_document

_PARAM = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
MAX_PATH_CHARS = 8192  # a Function URL refuses longer request lines anyway


def is_function_url_event(event: Any) -> bool:
    return (
        isinstance(event, dict)
        and event.get("version") == "2.0"
        and "rawPath" in event
        and "resourcePath" not in (event.get("requestContext") or {})
    )


class Routes:
    """The app's route patterns, most literal first, as regular expressions."""

    def __init__(self, paths: Iterable[str]) -> None:
        def literal_segments(path: str) -> int:
            return sum(1 for s in path.split("/") if s and not _PARAM.fullmatch(s))

        self._patterns: list[tuple[str, re.Pattern[str], list[str]]] = []
        for path in sorted(paths, key=lambda p: (-literal_segments(p), p)):
            names = _PARAM.findall(path)
            regex = "".join(
                "([^/]+)" if _PARAM.fullmatch(part) else re.escape(part)
                for part in re.split(r"(\{[A-Za-z_][A-Za-z0-9_]*\})", path)
            )
            self._patterns.append((path, re.compile(regex), names))

    def match(self, raw_path: str) -> tuple[str, dict[str, str]] | None:
        for path, regex, names in self._patterns:
            m = regex.fullmatch(raw_path)
            if m:
                return path, {n: unquote(v) for n, v in zip(names, m.groups(), strict=True)}
        return None


def to_rest_event(event: Mapping[str, Any], route: str, params: dict[str, str]) -> dict[str, Any]:
    """The API Gateway REST (payload 1.0) event that Chalice reads, from a 2.0 event."""
    context = dict(event.get("requestContext") or {})
    http = context.get("http") or {}
    method = str(http.get("method", "GET")).upper()
    headers = {str(k).lower(): str(v) for k, v in (event.get("headers") or {}).items()}
    if event.get("cookies"):
        headers["cookie"] = "; ".join(event["cookies"])
    raw_query = str(event.get("rawQueryString") or "")
    multi = parse_qs(raw_query, keep_blank_values=True) if raw_query else None
    context.update(
        resourcePath=route,
        httpMethod=method,
        path=event.get("rawPath"),
        identity={"sourceIp": http.get("sourceIp"), "userAgent": http.get("userAgent")},
    )
    return {
        "resource": route,
        "path": event.get("rawPath"),
        "httpMethod": method,
        "headers": headers,
        "multiValueHeaders": {k: [v] for k, v in headers.items()},
        "queryStringParameters": {k: v[-1] for k, v in multi.items()} if multi else None,
        "multiValueQueryStringParameters": multi or None,
        "pathParameters": params or None,
        "stageVariables": None,
        "requestContext": context,
        "body": event.get("body"),
        "isBase64Encoded": bool(event.get("isBase64Encoded")),
    }


def to_url_response(response: Mapping[str, Any]) -> dict[str, Any]:
    """Chalice's REST answer as a 2.0 answer: one ``headers`` map (repeated headers joined with
    commas, as HTTP allows), and ``Set-Cookie`` as ``cookies``."""
    headers: dict[str, str] = {}
    cookies: list[str] = []
    merged: dict[str, list[str]] = {}
    for name, value in (response.get("headers") or {}).items():
        merged.setdefault(name, []).append(str(value))
    for name, values in (response.get("multiValueHeaders") or {}).items():
        merged.setdefault(name, []).extend(str(v) for v in values)
    for name, values in merged.items():
        if name.lower() == "set-cookie":
            cookies.extend(values)
        else:
            headers[name] = ",".join(values)
    out: dict[str, Any] = {
        "statusCode": response.get("statusCode", 200),
        "headers": headers,
        "body": response.get("body") or "",
        "isBase64Encoded": bool(response.get("isBase64Encoded")),
    }
    if cookies:
        out["cookies"] = cookies
    return out


def _problem(doc: dict[str, Any]) -> dict[str, Any]:
    return {
        "statusCode": doc["status"],
        "headers": {"Content-Type": PROBLEM_TYPE},
        "body": json.dumps(doc),
        "isBase64Encoded": False,
    }


def _not_served() -> dict[str, Any]:
    return _problem(
        problem_document(
            404,
            "Not served on this URL",
            "this Function URL serves only the ingress (POST /{namespace}/{broker}) and /healthz; "
            "the control plane is on the API's own URL",
            "not-served-here",
        )
    )


def _unauthorized() -> dict[str, Any]:
    return _problem(
        problem_document(
            401,
            "Unauthorized",
            "this Function URL does not authenticate callers (AuthType NONE): only events go "
            "through it; the control plane needs SigV4, through API Gateway or an AWS_IAM URL",
            "unauthorized",
        )
    )


class BrokerChalice(Chalice):
    """Chalice, also callable with a Function URL's events. ``public_routes`` names the routes
    that need no IAM identity (the rest carry the IAM authorizer under API Gateway);
    ``ingress_only``: a Function URL serves those only, to any caller."""

    public_routes: frozenset[str] = frozenset()
    ingress_only: bool = False
    _url_routes: Routes | None = None

    def __call__(self, event: Any, context: Any) -> Any:
        if not is_function_url_event(event):
            return super().__call__(event, context)
        return self.handle_function_url(event, context, super().__call__)

    def handle_function_url(
        self, event: dict[str, Any], context: Any, chalice: Callable[[Any, Any], Any]
    ) -> dict[str, Any]:
        raw_path = str(event.get("rawPath") or "/")
        if self._url_routes is None:
            self._url_routes = Routes(self.routes)
        found = self._url_routes.match(raw_path) if len(raw_path) <= MAX_PATH_CHARS else None
        if found is None:
            return _problem(no_route_problem())
        route, params = found
        authorizer = (event.get("requestContext") or {}).get("authorizer") or {}
        if route not in self.public_routes and self.ingress_only:
            return _not_served()
        if route not in self.public_routes and not authorizer.get("iam"):
            return _unauthorized()
        rest = to_rest_event(event, route, params)
        return to_url_response(chalice(rest, context))


def decoded_body(response: Mapping[str, Any]) -> bytes:
    """A 2.0 answer's body as bytes (for tests and callers that read answers)."""
    body = response.get("body") or ""
    return base64.b64decode(body) if response.get("isBase64Encoded") else str(body).encode()
