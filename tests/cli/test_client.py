"""Endpoint and namespace resolution, SigV4 signing (checked against botocore's own signer at a
fixed time), and the lazy metrics import."""

from __future__ import annotations

import re
import subprocess
import sys
from datetime import UTC, datetime

import httpx
import pytest
from botocore.credentials import Credentials

from brokerctl.client import (
    BrokerClient,
    SigV4Auth,
    UsageError,
    execute_api_region,
    resolve_target,
)
from brokerctl.commands_metrics import LOCAL_ARCHIVE, add_metrics_parser, report_arguments
from tests.e2e.conftest import ROOT

API = "https://a1b2c3d4e5.execute-api.eu-west-1.amazonaws.com/prod"
FIXED = datetime(2024, 1, 2, 3, 4, 5, tzinfo=UTC)
CREDENTIALS = Credentials("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", "session-tok")


def test_url_and_namespace_precedence():
    env = {"BROKERCTL_URL": "http://env:1/", "BROKERCTL_NAMESPACE": "envns"}
    assert resolve_target(None, None, environ={}) == resolve_target(
        "http://127.0.0.1:8080", "default", environ={}
    )
    t = resolve_target(None, None, environ=env)
    assert (t.url, t.namespace, t.sigv4) == ("http://env:1", "envns", False)
    t = resolve_target("http://flag:2", "flagns", environ=env)
    assert (t.url, t.namespace) == ("http://flag:2", "flagns")
    with pytest.raises(UsageError):
        resolve_target("ftp://x", None, environ={})


def test_execute_api_hosts_are_signed_with_their_region():
    assert execute_api_region(API) == "eu-west-1"
    assert execute_api_region("https://x.execute-api.cn-north-1.amazonaws.com.cn/") == "cn-north-1"
    assert execute_api_region("https://broker.example.com/") is None
    t = resolve_target(API, None, environ={"AWS_REGION": "us-east-1"})
    assert (t.sigv4, t.region) == (True, "eu-west-1")
    t = resolve_target("https://broker.example.com", None, sigv4=True, environ={"AWS_REGION": "r"})
    assert (t.sigv4, t.region) == (True, "r")
    with pytest.raises(UsageError, match="AWS_REGION"):
        resolve_target("https://broker.example.com", None, sigv4=True, environ={})
    assert not resolve_target("http://127.0.0.1:8080", None, environ={}).sigv4


def _captured(target_url: str, auth: httpx.Auth | None, credentials=None):
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(201, json={"ok": True})

    client = BrokerClient(
        resolve_target(target_url, "shop", environ={}),
        transport=httpx.MockTransport(handler),
        credentials=credentials,
        auth=auth,
    )
    return client, seen


def _fix_botocore_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    """botocore's signer reads the wall clock; in these tests it reads FIXED."""
    import botocore.auth

    monkeypatch.setattr(botocore.auth, "get_current_datetime", lambda: FIXED.replace(tzinfo=None))


def _botocore_reference(request: httpx.Request) -> dict[str, str]:
    """The same request signed by botocore's stock SigV4Auth.add_auth with the clock fixed."""
    import botocore.auth
    from botocore.awsrequest import AWSRequest

    aws = AWSRequest(
        method=request.method,
        url=str(request.url),
        data=request.content,
        headers={"host": request.headers["host"], "content-type": request.headers["content-type"]},
    )
    botocore.auth.SigV4Auth(CREDENTIALS, "execute-api", "eu-west-1").add_auth(aws)
    return dict(aws.headers.items())


def test_sigv4_matches_botocore(monkeypatch: pytest.MonkeyPatch):
    _fix_botocore_clock(monkeypatch)
    signer = SigV4Auth(CREDENTIALS, "eu-west-1")
    client, seen = _captured(API, signer)
    body = {"metadata": {"name": "orders"}, "spec": {"delivery": {"retry": 3}}}
    client.put(client.path("brokers", "orders"), body)
    (request,) = seen
    assert request.url.path == "/prod/apis/eventing.knative.dev/v1/namespaces/shop/brokers/orders"
    auth = request.headers["authorization"]
    assert re.fullmatch(
        r"AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20240102/eu-west-1/execute-api/aws4_request, "
        r"SignedHeaders=content-type;host;x-amz-date;x-amz-security-token, "
        r"Signature=[0-9a-f]{64}",
        auth,
    ), auth
    assert request.headers["x-amz-date"] == "20240102T030405Z"
    assert request.headers["x-amz-security-token"] == "session-tok"
    reference = _botocore_reference(request)
    assert auth == reference["Authorization"]
    assert request.headers["x-amz-date"] == reference["X-Amz-Date"]


def test_sigv4_signs_the_query_string(monkeypatch: pytest.MonkeyPatch):
    _fix_botocore_clock(monkeypatch)
    signer = SigV4Auth(CREDENTIALS, "eu-west-1")
    client, seen = _captured(API, signer)
    client.get(client.path("triggers", "audit", "deadletters"), params={"limit": 5})
    (request,) = seen
    assert request.url.query == b"limit=5"
    import botocore.auth
    from botocore.awsrequest import AWSRequest

    aws = AWSRequest(method="GET", url=str(request.url), headers={"host": request.headers["host"]})
    botocore.auth.SigV4Auth(CREDENTIALS, "execute-api", "eu-west-1").add_auth(aws)
    assert request.headers["authorization"] == aws.headers["Authorization"]
    assert "SignedHeaders=host;x-amz-date;x-amz-security-token," in aws.headers["Authorization"]


def test_execute_api_url_is_signed_without_asking_and_events_never_are():
    client, seen = _captured(API, None, credentials=CREDENTIALS)
    client.get(client.path("brokers"))
    client.send_event("/shop/orders", {"authorization": "Bearer sbt_x"}, b"x")
    assert seen[0].headers["authorization"].startswith("AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/")
    assert seen[1].headers["authorization"] == "Bearer sbt_x"
    assert "x-amz-date" not in seen[1].headers


def test_local_url_is_not_signed():
    client, seen = _captured("http://127.0.0.1:8080", None)
    client.get(client.path("brokers"))
    assert "authorization" not in seen[0].headers


def test_metrics_report_defaults_to_the_local_archive():
    import argparse

    parser = argparse.ArgumentParser()
    add_metrics_parser(parser.add_subparsers())
    args = parser.parse_args(["metrics", "report"])
    assert report_arguments(args, environ={}) == {
        "archive": LOCAL_ARCHIVE,
        "out": "metrics-report",
        "endpoint_url": "http://127.0.0.1:4566",
        "open_browser": False,
    }
    assert report_arguments(args, environ={"BROKER_AWS_PORT": "5000"})["endpoint_url"] == (
        "http://127.0.0.1:5000"
    )
    args = parser.parse_args(["metrics", "report", "--archive", "s3://prod/archive/", "--open"])
    kw = report_arguments(args, environ={})
    assert (kw["archive"], kw["endpoint_url"], kw["open_browser"]) == (
        "s3://prod/archive/",
        None,
        True,
    )


def test_cli_imports_neither_the_metrics_job_nor_aws_sdks():
    code = (
        "import sys, brokerctl.cli; brokerctl.cli.build_parser(); "
        "heavy = {'brokerctl.metrics', 'pyspark', 'boto3', 'botocore'} & set(sys.modules); "
        "assert not heavy, heavy"
    )
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True, timeout=60)
