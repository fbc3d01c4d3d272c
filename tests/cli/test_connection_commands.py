"""``brokerctl connection`` and ``trigger create --connection`` (docs/targets.md, Connections):
arguments → HTTP requests, answers → output, against the recording server."""

from __future__ import annotations

import pytest

from tests.cli.conftest import RecordingApi, Runner

SB = "/apis/serverless-broker.dev/v1alpha1/namespaces"
CP = "/apis/eventing.knative.dev/v1/namespaces"
ARN = "arn:aws:secretsmanager:us-east-1:123456789012:secret:serverless-broker/local/connections/k"


@pytest.mark.parametrize(
    ("flags", "auth"),
    [
        (
            ["--api-key", "X-Api-Key", "--secret-arn", ARN],
            {"apiKey": {"header": "X-Api-Key", "secretRef": {"arn": ARN}}},
        ),
        (["--basic", "--secret-arn", ARN], {"basic": {"secretRef": {"arn": ARN}}}),
        (
            ["--oauth", "https://auth/t", "--client-id", "c", "--secret-arn", ARN, "--scope", "s"],
            {
                "oauthClientCredentials": {
                    "tokenUrl": "https://auth/t",
                    "clientId": "c",
                    "clientSecretRef": {"arn": ARN},
                    "scope": "s",
                }
            },
        ),
        (
            ["--aws-sigv4", "lambda", "--region", "eu-west-1"],
            {"awsSigV4": {"service": "lambda", "region": "eu-west-1"}},
        ),
    ],
)
def test_connection_create_puts_each_kind(
    api: RecordingApi, cli: Runner, flags: list[str], auth: dict[str, object]
) -> None:
    r = cli("connection", "create", "api", "-n", "shop", *flags)
    assert r.code == 0, r.err
    (seen,) = api.seen
    assert (seen.method, seen.path) == ("PUT", f"{SB}/shop/connections/api")
    assert seen.json() == {
        "apiVersion": "serverless-broker.dev/v1alpha1",
        "kind": "Connection",
        "metadata": {"name": "api"},
        "spec": {"auth": auth},
    }
    assert "Connection 'api' saved in namespace 'shop'." in r.out


def test_connection_create_names_the_flags_a_kind_needs_or_refuses(
    api: RecordingApi, cli: Runner
) -> None:
    r = cli("connection", "create", "api", "--oauth", "https://auth/t", "--region", "x")
    assert r.code == 2
    assert "--oauth needs --secret-arn, --client-id and does not take --region" in r.err
    assert cli("connection", "create", "api").code == 2  # no kind
    assert api.seen == []


def test_connection_list_describe_delete(api: RecordingApi, cli: Runner) -> None:
    doc = {
        "metadata": {"name": "api", "namespace": "default"},
        "spec": {"auth": {"basic": {"secretRef": {"arn": ARN}}}},
        "status": {
            "conditions": [
                {
                    "type": "Ready",
                    "status": "False",
                    "reason": "SecretNotReadable",
                    "message": "secret: ResourceNotFoundException",
                }
            ]
        },
    }
    api.answer("GET", f"{SB}/default/connections", doc={"items": [doc]})
    api.answer("GET", f"{SB}/default/connections/api", doc=doc)
    r = cli("connection", "list")
    assert r.code == 0 and "api" in r.out and "basic" in r.out
    r = cli("connection", "describe", "api")
    assert r.code == 0 and ARN in r.out and "SecretNotReadable" in r.out
    r = cli("connection", "delete", "api")
    assert r.code == 0 and api.seen[-1].method == "DELETE"


def test_trigger_create_names_its_connections_in_annotations(
    api: RecordingApi, cli: Runner
) -> None:
    r = cli(
        "trigger", "create", "t", "--broker", "default", "--sink", "https://api.example/",
        "--connection", "api", "--dead-letter-sink", "https://dl.example/",
        "--dead-letter-connection", "dl",
    )  # fmt: skip
    assert r.code == 0, r.err
    assert api.seen[0].json()["metadata"]["annotations"] == {
        "serverless-broker/connection": "api",
        "serverless-broker/dead-letter-connection": "dl",
    }
