"""IntegrationSources under hostile input (docs/sources.md): hostile documents never answer 5xx and
every 4xx is a problem; any accepted timer's period becomes a schedule the local runtime reads
back to the same period."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from chalice.test import Client
from hypothesis import example, given
from hypothesis import strategies as st

from chalicelib.core.cron import Rate, from_scheduler
from chalicelib.core.errors import NotFoundError
from chalicelib.core.resources.integration_source import AwsSource
from tests.functional.harness import Harness
from tests.fuzz.conftest import FUZZ, check_answer
from tests.fuzz.test_ingress_fuzz import json_values, texts

IS = "/apis/sources.knative.dev/v1alpha1/namespaces/ns/integrationsources"
anything = st.one_of(json_values, texts, st.integers(), st.floats(allow_nan=False))
arns = st.one_of(
    st.sampled_from(
        [
            "arn:aws:sqs:us-east-1:123456789012:orders",
            "arn:aws:sqs:us-east-1:123456789012:o.fifo",
            "arn:aws:s3:::pics",
            "arn:aws:s3:::Bad_Bucket",
            "arn:aws:sqs:::",
            "",
            "x" * 3000,
        ]
    ),
    texts,
    anything,
)
aws_source = st.fixed_dictionaries(
    {}, optional={"arn": arns, "table": st.one_of(texts, anything), "region": anything}
)
docs = st.fixed_dictionaries(
    {"metadata": st.one_of(st.just({"name": "s1"}), anything)},
    optional={
        "spec": st.fixed_dictionaries(
            {},
            optional={
                "timer": st.one_of(
                    st.fixed_dictionaries(
                        {},
                        optional={
                            "period": st.one_of(
                                st.integers(-1, 10**12), st.sampled_from([2000, 60000]), anything
                            ),
                            "message": st.one_of(texts, anything),
                            "contentType": st.one_of(st.just("text/plain"), texts, anything),
                        },
                    ),
                    anything,
                ),
                "aws": st.one_of(
                    st.dictionaries(
                        st.sampled_from(["sqs", "s3", "ddbStreams", "auth", "other"]),
                        st.one_of(aws_source, anything),
                        max_size=3,
                    ),
                    anything,
                ),
                "sink": st.one_of(
                    st.just({"ref": {"kind": "Broker", "name": "default"}}),
                    st.fixed_dictionaries({}, optional={"uri": texts, "ref": anything}),
                    anything,
                ),
            },
        )
    },
)


class MissingEverything:
    """The AWS plumbing of a stage where no queue, bucket or table exists (no network here)."""

    def resource_arn(self, aws: AwsSource) -> str | None:
        return aws.resource if aws.resource.startswith("arn:") else None

    def ensure(self, aws: AwsSource) -> None:
        raise NotFoundError(f"{aws.resource} does not exist")

    def remove(self, aws: AwsSource) -> None:
        return None


@pytest.fixture(scope="module", autouse=True)
def no_aws(harness: Harness) -> Iterator[None]:
    hooks = harness.container.integration_source_hooks
    saved = hooks._plumbing
    hooks._plumbing = MissingEverything()
    yield
    hooks._plumbing = saved


@FUZZ
@given(doc=docs, method=st.sampled_from(["PUT", "PUT", "POST", "GET", "DELETE"]))
@example(
    doc={"metadata": {"name": "s1"}, "spec": {"timer": {"period": 1500, "message": 1}}},
    method="PUT",
)
def test_control_plane_never_answers_5xx(client: Client, doc: Any, method: str) -> None:
    path = IS if method == "POST" else f"{IS}/s1"
    headers = {"content-type": "application/json"}
    response = client.http.request(method, path, headers=headers, body=json.dumps(doc).encode())
    check_answer(response.status_code, dict(response.headers), response.body, f"{method} {path}")


@FUZZ
@given(seconds=st.integers(1, 31_536_000))
def test_a_local_rate_reads_back_to_its_period(seconds: int) -> None:
    expression, zone = Rate(seconds).scheduler(seconds=True)
    assert from_scheduler(expression, zone) == Rate(seconds)
