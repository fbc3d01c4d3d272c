"""The API function invoked by a Lambda Function URL (payload format 2.0, as AWS documents it:
tests/fixtures/function_url/request.json), on in-memory fakes: the same answers as through API
Gateway, and the control plane only for callers the URL authenticated (AuthType AWS_IAM)."""

from __future__ import annotations

import base64
import copy
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from app import app
from brokerctl.lambda_context import LocalLambdaContext
from chalicelib.container import use_container
from chalicelib.function_url import Routes, decoded_body, is_function_url_event, to_url_response
from chalicelib.ports import HttpResponse
from tests.functional.harness import CP, Harness

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "function_url" / "request.json"
IAM = {
    "iam": {
        "accessKey": "AKIAEXAMPLE",
        "accountId": "123456789012",
        "callerId": "AIDAEXAMPLE",
        "principalOrgId": None,
        "userArn": "arn:aws:iam::123456789012:user/ops",
        "userId": "AIDAEXAMPLE",
    }
}


@pytest.fixture
def h() -> Iterator[Harness]:
    h = Harness(HttpResponse(202, {}, b""))
    use_container(h.container)
    h.broker()
    h.trigger("t1")
    yield h
    use_container(None)


def url_event(**changes: Any) -> dict[str, Any]:
    event: dict[str, Any] = json.loads(FIXTURE.read_text())
    for key, value in changes.items():
        event[key] = value
    return event


def invoke(event: dict[str, Any]) -> dict[str, Any]:
    answer: dict[str, Any] = app(event, LocalLambdaContext("serverless-broker-prod"))
    return answer


def test_the_fixture_is_a_function_url_event_and_a_rest_event_is_not() -> None:
    assert is_function_url_event(url_event())
    rest = {"requestContext": {"resourcePath": "/healthz", "httpMethod": "GET"}}
    assert not is_function_url_event(rest)


def test_an_event_posted_through_the_url_is_accepted_byte_exact(h: Harness) -> None:
    answer = invoke(url_event())
    assert answer["statusCode"] == 202, answer
    assert set(answer) <= {"statusCode", "headers", "body", "isBase64Encoded", "cookies"}
    assert "multiValueHeaders" not in answer
    (message,) = h.messages(h.queue_of("t1"))
    event = message.get("event", message)
    assert event["id"] == "e-1"
    assert base64.b64decode(event["data_base64"]) == b"\x00\x01\x02\xff"


def test_a_structured_text_body_arrives_as_text(h: Harness) -> None:
    doc = {"specversion": "1.0", "id": "e-2", "source": "/s", "type": "t", "data": {"é": 1}}
    headers = {"content-type": "application/cloudevents+json"}
    answer = invoke(url_event(headers=headers, body=json.dumps(doc), isBase64Encoded=False))
    assert answer["statusCode"] == 202, answer
    (message,) = h.messages(h.queue_of("t1"))
    assert message.get("event", message)["data"] == {"é": 1}


def test_an_invalid_event_gets_the_same_problem_document(h: Harness) -> None:
    headers = {"content-type": "application/json", "ce-specversion": "1.0"}
    answer = invoke(url_event(headers=headers, body="{}", isBase64Encoded=False))
    assert answer["statusCode"] == 400
    assert answer["headers"]["Content-Type"] == "application/problem+json"
    assert json.loads(decoded_body(answer))["type"].endswith("/validation")


def test_an_unknown_path_is_the_no_such_route_problem(h: Harness) -> None:
    answer = invoke(url_event(rawPath="/a/b/c/d"))
    assert answer["statusCode"] == 404
    assert json.loads(decoded_body(answer))["type"].endswith("/no-such-route")


def test_healthz_is_public(h: Harness) -> None:
    context = copy.deepcopy(url_event()["requestContext"])
    context["http"]["method"] = "GET"
    answer = invoke(url_event(rawPath="/healthz", body=None, requestContext=context))
    assert answer["statusCode"] == 200, answer


def _cp_event(authorizer: dict[str, Any] | None) -> dict[str, Any]:
    event = url_event(rawPath=f"{CP}/ns/brokers", body=None, isBase64Encoded=False)
    event["requestContext"]["http"]["method"] = "GET"
    if authorizer is not None:
        event["requestContext"]["authorizer"] = authorizer
    return event


def test_the_control_plane_needs_an_iam_caller(h: Harness) -> None:
    """AuthType NONE: no IAM identity in the event, so no control plane."""
    answer = invoke(_cp_event(None))
    assert answer["statusCode"] == 401
    assert json.loads(decoded_body(answer))["type"].endswith("/unauthorized")


def test_an_iam_caller_reaches_the_control_plane(h: Harness) -> None:
    answer = invoke(_cp_event(IAM))
    assert answer["statusCode"] == 200, answer
    names = [b["metadata"]["name"] for b in json.loads(decoded_body(answer))["items"]]
    assert names == ["default"]


def test_a_literal_route_beats_a_parameter() -> None:
    routes = Routes(["/{namespace}/{broker}", "/apis/openapi.json", "/healthz"])
    assert routes.match("/apis/openapi.json") == ("/apis/openapi.json", {})
    assert routes.match("/ns/my%20broker") == ("/{namespace}/{broker}", {
        "namespace": "ns", "broker": "my broker"})  # fmt: skip
    assert routes.match("/ns/b/extra") is None


def test_repeated_headers_and_cookies_in_the_answer() -> None:
    answer = to_url_response(
        {
            "statusCode": 200,
            "headers": {"Content-Type": "text/plain"},
            "multiValueHeaders": {"Vary": ["a", "b"], "Set-Cookie": ["x=1", "y=2"]},
            "body": "ok",
            "isBase64Encoded": False,
        }
    )
    assert answer == {
        "statusCode": 200,
        "headers": {"Content-Type": "text/plain", "Vary": "a,b"},
        "cookies": ["x=1", "y=2"],
        "body": "ok",
        "isBase64Encoded": False,
    }


# ---- a URL that serves only the ingress (issue 31, item 10) --------------------------------------


@pytest.fixture
def ingress_only() -> Iterator[None]:
    app.ingress_only = True
    yield
    app.ingress_only = False


@pytest.mark.usefixtures("ingress_only")
def test_an_ingress_only_url_refuses_the_control_plane_to_any_signed_caller(h: Harness) -> None:
    """AWS_IAM checks the right to invoke the function, not a route: a producer's role that may
    post events through the URL would otherwise read and write every namespace's resources."""
    for event in (_cp_event(IAM), _cp_event(None)):
        answer = invoke(event)
        assert answer["statusCode"] == 404, answer
        assert answer["headers"]["Content-Type"] == "application/problem+json"
        problem = json.loads(decoded_body(answer))
        assert problem["type"].endswith("/not-served-here") and problem["status"] == 404
    registry = url_event(rawPath="/registry/endpoints", body=None, isBase64Encoded=False)
    registry["requestContext"]["http"]["method"] = "GET"
    registry["requestContext"]["authorizer"] = IAM
    assert invoke(registry)["statusCode"] == 404
    assert h.store.list("broker", "ns")  # nothing changed, nothing listed


@pytest.mark.usefixtures("ingress_only")
def test_an_ingress_only_url_still_takes_events_and_answers_healthz(h: Harness) -> None:
    signed = url_event()
    signed["requestContext"]["authorizer"] = IAM
    assert invoke(signed)["statusCode"] == 202
    assert [m["event"]["id"] for m in h.messages(h.queue_of("t1"))] == ["e-1"]
    context = copy.deepcopy(url_event()["requestContext"])
    context["http"]["method"] = "GET"
    assert (
        invoke(url_event(rawPath="/healthz", body=None, requestContext=context))["statusCode"]
        == 200
    )


def test_the_setting_is_read_from_the_environment() -> None:
    from chalicelib.config import Settings

    assert not Settings.from_env({}).function_url_ingress_only
    env = {"BROKER_FUNCTION_URL_INGRESS_ONLY": "true"}
    assert Settings.from_env(env).function_url_ingress_only
