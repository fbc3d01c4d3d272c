"""Connections under hostile documents (docs/targets.md, Connections): no 5xx, every 4xx a
problem, and a secret ARN never echoed beyond what the client sent."""

from __future__ import annotations

import json
from typing import Any

import pytest
from chalice.test import Client
from hypothesis import example, given
from hypothesis import strategies as st

from tests.fakes.secrets import MemorySecrets
from tests.functional.harness import Harness
from tests.fuzz.conftest import FUZZ, check_answer
from tests.fuzz.test_ingress_fuzz import json_values, texts

SB = "/apis/serverless-broker.dev/v1alpha1/namespaces/ns/connections"
ARN = "arn:aws:secretsmanager:us-east-1:123456789012:secret:serverless-broker/local/connections/x"

anything = st.one_of(json_values, texts, st.integers())
refs = st.one_of(st.fixed_dictionaries({"arn": st.one_of(st.just(ARN), texts)}), anything)
auth = st.one_of(
    st.fixed_dictionaries(
        {"apiKey": st.fixed_dictionaries({"header": st.one_of(texts, anything), "secretRef": refs})}
    ),
    st.fixed_dictionaries({"basic": st.fixed_dictionaries({"secretRef": refs})}),
    st.fixed_dictionaries(
        {
            "oauthClientCredentials": st.fixed_dictionaries(
                {},
                optional={
                    "tokenUrl": st.one_of(st.just("http://auth.example/t"), texts),
                    "clientId": anything,
                    "clientSecretRef": refs,
                    "scope": anything,
                },
            )
        }
    ),
    st.fixed_dictionaries(
        {"awsSigV4": st.fixed_dictionaries({"service": anything, "region": anything})}
    ),
    st.dictionaries(st.text(max_size=20), anything, max_size=3),
    anything,
)


@pytest.fixture(scope="module", autouse=True)
def memory_secrets(harness: Harness) -> None:
    secrets = MemorySecrets()
    secrets.values[ARN] = "s3cr3t"
    harness.container.secrets = secrets  # type: ignore[misc]


@FUZZ
@given(name=st.one_of(st.just("c1"), texts), spec=st.fixed_dictionaries({"auth": auth}))
@example(name="c1", spec={"auth": {"basic": {"secretRef": {"arn": ARN}}}})
def test_connections_never_answer_5xx(client: Client, name: str, spec: Any) -> None:
    body = json.dumps({"metadata": {"name": name}, "spec": spec})
    path = f"{SB}/{name}" if name.isalnum() and name.islower() else f"{SB}/c1"
    response = client.http.put(path, headers={"content-type": "application/json"}, body=body)
    check_answer(response.status_code, dict(response.headers), response.body, path)
    assert b"s3cr3t" not in response.body
