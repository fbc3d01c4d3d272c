"""A Lambda Function URL for the API function, beside API Gateway: the cheaper ingress
(docs/cost.md: no per-request API Gateway charge; in exchange no API Gateway throttling, WAF or
access logs, and Lambda's 6 MB request/response limit instead of API Gateway's 10 MB).

Per stage in ``.chalice/config.json``::

    "function_url": {"auth_type": "AWS_IAM",     # or "NONE"; {"enabled": false} for none
                     "routes": "ingress"}        # or "all" (the default)

AWS_IAM (the default): every caller signs with SigV4 and needs ``lambda:InvokeFunctionUrl`` on
the function in its own IAM policy. That right is the function's, not a route's: with
``routes: "all"`` a producer's role allowed to post events there is also a control-plane caller of
every namespace. ``routes: "ingress"`` (BROKER_FUNCTION_URL_INGRESS_ONLY on the API function)
serves only the ingress and /healthz on the URL, to every caller; the control plane stays on API
Gateway, behind its IAM authorizer (docs/deploy.md).

NONE: anyone may call it; the function then lets a request without an IAM identity reach only
the public routes (the ingress and /healthz, ``chalicelib/function_url.py``), so choose it only
where every broker authenticates producers with its own tokens (docs/tokens) or is meant to be
open.

Two ways in, as for the API's protection: the packaged template gets an ``AWS::Lambda::Url`` (and,
for NONE, the public permissions), and ``chalice deploy`` gets it through the Lambda API after.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any

URL_ID = "APIHandlerFunctionUrl"
AUTH_TYPES = ("AWS_IAM", "NONE")
ROUTES = ("all", "ingress")
INGRESS_ONLY_VARIABLE = "BROKER_FUNCTION_URL_INGRESS_ONLY"  # chalicelib/config.py
_STATEMENTS = ("FunctionUrlPublic", "FunctionUrlPublicInvoke")


@dataclass(frozen=True)
class FunctionUrl:
    enabled: bool = True
    auth_type: str = "AWS_IAM"
    routes: str = "all"

    @classmethod
    def of_stage(cls, config: dict[str, Any], stage: str) -> FunctionUrl:
        spec = config["stages"][stage].get("function_url", {})
        auth = str(spec.get("auth_type", "AWS_IAM"))
        if auth not in AUTH_TYPES:
            raise SystemExit(f"error: function_url.auth_type of stage {stage}: one of {AUTH_TYPES}")
        routes = str(spec.get("routes", "all"))
        if routes not in ROUTES:
            raise SystemExit(f"error: function_url.routes of stage {stage}: one of {ROUTES}")
        return cls(enabled=bool(spec.get("enabled", True)), auth_type=auth, routes=routes)

    def environment(self) -> dict[str, str]:
        """What the API function reads to serve only the ingress on its URL."""
        return {INGRESS_ONLY_VARIABLE: "true" if self.routes == "ingress" else "false"}

    def sam_resources(self, function_logical_id: str) -> dict[str, Any]:
        """The resources to add to a ``chalice package`` template."""
        if not self.enabled:
            return {}
        ref = {"Ref": function_logical_id}
        out: dict[str, Any] = {
            URL_ID: {
                "Type": "AWS::Lambda::Url",
                "Properties": {"TargetFunctionArn": ref, "AuthType": self.auth_type},
            }
        }
        if self.auth_type == "NONE":
            # Since October 2025 a public URL needs both permissions (Lambda's documentation).
            out["APIHandlerFunctionUrlPublic"] = {
                "Type": "AWS::Lambda::Permission",
                "Properties": {
                    "FunctionName": ref,
                    "Action": "lambda:InvokeFunctionUrl",
                    "Principal": "*",
                    "FunctionUrlAuthType": "NONE",
                },
            }
            out["APIHandlerFunctionUrlPublicInvoke"] = {
                "Type": "AWS::Lambda::Permission",
                "Properties": {
                    "FunctionName": ref,
                    "Action": "lambda:InvokeFunction",
                    "Principal": "*",
                    "InvokedViaFunctionUrl": True,
                },
            }
        return out

    def sam_output(self) -> dict[str, Any]:
        if not self.enabled:
            return {}
        return {"FunctionUrl": {"Value": {"Fn::GetAtt": [URL_ID, "FunctionUrl"]}}}


def put_on(lam: Any, function_name: str, url: FunctionUrl) -> str | None:
    """Creates or updates the URL of a function ``chalice deploy`` made (or deletes it when the
    stage disables it); returns the URL."""
    try:
        current = lam.get_function_url_config(FunctionName=function_name)
    except lam.exceptions.ResourceNotFoundException:
        current = None
    if not url.enabled:
        if current is not None:
            lam.delete_function_url_config(FunctionName=function_name)
        _remove_public(lam, function_name)
        return None
    if current is None:
        current = lam.create_function_url_config(FunctionName=function_name, AuthType=url.auth_type)
    elif current["AuthType"] != url.auth_type:
        current = lam.update_function_url_config(FunctionName=function_name, AuthType=url.auth_type)
    if url.auth_type == "NONE":
        _remove_public(lam, function_name)
        lam.add_permission(
            FunctionName=function_name, StatementId=_STATEMENTS[0],
            Action="lambda:InvokeFunctionUrl", Principal="*", FunctionUrlAuthType="NONE",
        )  # fmt: skip
        lam.add_permission(
            FunctionName=function_name, StatementId=_STATEMENTS[1],
            Action="lambda:InvokeFunction", Principal="*", InvokedViaFunctionUrl=True,
        )  # fmt: skip
    else:
        _remove_public(lam, function_name)
    return str(current["FunctionUrl"])


def _remove_public(lam: Any, function_name: str) -> None:
    for sid in _STATEMENTS:
        with contextlib.suppress(lam.exceptions.ResourceNotFoundException):
            lam.remove_permission(FunctionName=function_name, StatementId=sid)
