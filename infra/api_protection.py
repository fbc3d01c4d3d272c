"""What protects the deployed REST API, and lets it be watched: stage throttling (rate and
burst), JSON access logs and X-Ray tracing.

Settings per stage, in ``.chalice/config.json`` under the stage's ``api_protection`` key::

    "api_protection": {"throttling_rate_limit": 500, "throttling_burst_limit": 1000,
                       "access_logs": true}

Two ways in, as for the gateway responses: the packaged template carries them on the REST API
(``MethodSettings`` and ``AccessLogSetting``), and ``chalice deploy`` gets them through the API
afterwards. Access logs go to the shared stack's ``ApiAccessLogGroup``; API Gateway writes them
only once the account has its CloudWatch Logs role (``aws apigateway update-account``, once per
account and region: docs/deploy.md). A WAF web ACL is associated with the stage by the operator
(docs/deploy.md), not here.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

# API Gateway's defaults for an account are 10,000 requests/s and a burst of 5,000; a stage limit
# below them keeps one client of one broker from taking the whole account's share.
DEFAULT_RATE_LIMIT = 500.0
DEFAULT_BURST_LIMIT = 1000
ACCESS_LOG_EXPORT = "ApiAccessLogGroupArn"  # the shared stack's output (infra/template.yaml)

# One JSON object per request; $context variables as API Gateway documents them.
ACCESS_LOG_FORMAT = json.dumps(
    {
        "requestId": "$context.requestId",
        "ip": "$context.identity.sourceIp",
        "caller": "$context.identity.caller",
        "user": "$context.identity.user",
        "requestTime": "$context.requestTime",
        "httpMethod": "$context.httpMethod",
        "resourcePath": "$context.resourcePath",
        "path": "$context.path",
        "status": "$context.status",
        "protocol": "$context.protocol",
        "responseLength": "$context.responseLength",
        "integrationLatency": "$context.integrationLatency",
        "responseLatency": "$context.responseLatency",
        "errorMessage": "$context.error.message",
        "wafResponse": "$context.wafResponseCode",
    },
    separators=(",", ":"),
)


@dataclass(frozen=True)
class ApiProtection:
    rate_limit: float = DEFAULT_RATE_LIMIT
    burst_limit: int = DEFAULT_BURST_LIMIT
    access_logs: bool = True

    @classmethod
    def of_stage(cls, config: dict[str, Any], stage: str) -> ApiProtection:
        raw = config["stages"][stage].get("api_protection") or {}
        return cls(
            rate_limit=float(raw.get("throttling_rate_limit", DEFAULT_RATE_LIMIT)),
            burst_limit=int(raw.get("throttling_burst_limit", DEFAULT_BURST_LIMIT)),
            access_logs=bool(raw.get("access_logs", True)),
        )

    def sam_properties(self, access_log_arn: Any) -> dict[str, Any]:
        """Properties of the packaged ``AWS::Serverless::Api``."""
        props: dict[str, Any] = {
            # X-Ray on the stage too, so that a request's trace starts at API Gateway.
            "TracingEnabled": True,
            "MethodSettings": [
                {
                    "ResourcePath": "/*",
                    "HttpMethod": "*",
                    "ThrottlingRateLimit": self.rate_limit,
                    "ThrottlingBurstLimit": self.burst_limit,
                }
            ],
        }
        if self.access_logs:
            props["AccessLogSetting"] = {
                "DestinationArn": access_log_arn,
                "Format": ACCESS_LOG_FORMAT,
            }
        return props

    def stage_patch(self, access_log_arn: str | None) -> list[dict[str, str]]:
        """``UpdateStage`` patch operations for a stage ``chalice deploy`` made."""
        ops = [
            {"op": "replace", "path": "/tracingEnabled", "value": "true"},
            {"op": "replace", "path": "/*/*/throttling/rateLimit", "value": str(self.rate_limit)},
            {"op": "replace", "path": "/*/*/throttling/burstLimit", "value": str(self.burst_limit)},
        ]
        if self.access_logs and access_log_arn:
            ops += [
                {
                    "op": "replace",
                    "path": "/accessLogSettings/destinationArn",
                    "value": access_log_arn.removesuffix(":*"),
                },
                {"op": "replace", "path": "/accessLogSettings/format", "value": ACCESS_LOG_FORMAT},
            ]
        return ops


def put_on(
    apigateway: Any,
    rest_api_id: str,
    stage: str,
    protection: ApiProtection,
    access_log_arn: str | None,
    say: Any = print,
) -> None:
    """Sets throttling and access logging on a stage ``chalice deploy`` made. Without the
    account's CloudWatch Logs role API Gateway refuses access logs: throttling is still set,
    and one line says what to do."""
    try:
        apigateway.update_stage(
            restApiId=rest_api_id,
            stageName=stage,
            patchOperations=protection.stage_patch(access_log_arn),
        )
    except Exception as exc:  # botocore's ClientError, whose import we keep out of here
        if "CloudWatch Logs role" not in str(exc):
            raise
        apigateway.update_stage(
            restApiId=rest_api_id,
            stageName=stage,
            patchOperations=protection.stage_patch(None),
        )
        say(
            "warning: access logs are off: this account has no CloudWatch Logs role for API "
            "Gateway (set one with `aws apigateway update-account`, see docs/deploy.md)"
        )
