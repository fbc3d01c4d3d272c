"""API Gateway's own answers, made to speak the API's language (design.md §2.1, last row).

API Gateway answers a path no route matches with ``403 {"message": "Missing Authentication
Token"}``, which users read as an auth problem. Its gateway response of type
``MISSING_AUTHENTICATION_TOKEN`` is mapped to a 404 problem+json naming the ingress URL shape, the
same document local mode answers. Two ways in, from the one definition here: the packaged template
carries it in the REST API's definition (``x-amazon-apigateway-gateway-responses``, so it is part of
every deployment CloudFormation makes), and ``chalice deploy`` gets it through the API afterwards
(Chalice's own deploy has no place for it).
"""

from __future__ import annotations

import json
from typing import Any

from chalicelib.problems import PROBLEM_TYPE, no_route_problem

MISSING_ROUTE = "MISSING_AUTHENTICATION_TOKEN"


def _response() -> dict[str, Any]:
    return {
        "statusCode": "404",
        "responseParameters": {"gatewayresponse.header.Content-Type": f"'{PROBLEM_TYPE}'"},
        # API Gateway picks the template by the client's Accept header, falling back to
        # application/json: the one template answers every client.
        "responseTemplates": {"application/json": json.dumps(no_route_problem())},
    }


def swagger_extension() -> dict[str, Any]:
    """The ``x-amazon-apigateway-gateway-responses`` entry of a REST API definition."""
    return {MISSING_ROUTE: _response()}


def put_on(apigateway: Any, rest_api_id: str, stage: str) -> None:
    """Sets the responses on a deployed REST API and redeploys its stage (a gateway response
    takes effect with the next deployment)."""
    response = _response()
    apigateway.put_gateway_response(
        restApiId=rest_api_id,
        responseType=MISSING_ROUTE,
        statusCode=response["statusCode"],
        responseParameters=response["responseParameters"],
        responseTemplates=response["responseTemplates"],
    )
    apigateway.create_deployment(
        restApiId=rest_api_id, stageName=stage, description="gateway responses"
    )
