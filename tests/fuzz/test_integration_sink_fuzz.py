"""IntegrationSinks and triggers that name one (docs/targets.md) under hostile documents: no 5xx,
every 4xx a problem."""

from __future__ import annotations

import json
from typing import Any

from chalice.test import Client
from hypothesis import given
from hypothesis import strategies as st

from tests.fuzz.conftest import FUZZ, check_answer
from tests.fuzz.test_ingress_fuzz import json_values, texts

IS = "/apis/sinks.knative.dev/v1alpha1/namespaces/ns/integrationsinks/s1"
TRIGGER = "/apis/eventing.knative.dev/v1/namespaces/ns/triggers/r1"

anything = st.one_of(json_values, texts, st.integers(), st.booleans())
arns = st.one_of(
    st.sampled_from(
        [
            "arn:aws:sqs:us-east-1:123456789012:q",
            "arn:aws:s3:::bucket",
            "arn:aws:s3:us-east-1:123456789012:bucket",
            "arn:aws:sns:us-east-1:123456789012:t.fifo",
            "arn:aws:events:us-east-1:123456789012:event-bus/b",
            "arn:" + "a" * 600,
        ]
    ),
    texts,
    anything,
)
target = st.fixed_dictionaries({}, optional={"arn": arns, "region": anything, "x": anything})
aws = st.fixed_dictionaries(
    {},
    optional={
        "sqs": st.one_of(target, anything),
        "sns": target,
        "s3": target,
        "eventbridge": target,
        "auth": st.one_of(
            st.fixed_dictionaries({"secret": st.fixed_dictionaries({"ref": anything})}), anything
        ),
    },
)
log = st.dictionaries(
    st.sampled_from(
        ["loggerName", "level", "marker", "showHeaders", "showBody", "multiline", "logMask", "x"]
    ),
    anything,
    max_size=5,
)
sinks = st.fixed_dictionaries(
    {"metadata": st.just({"name": "s1"})},
    optional={"spec": st.fixed_dictionaries({}, optional={"aws": aws, "log": log, "x": anything})},
)
refs = st.fixed_dictionaries(
    {},
    optional={
        "apiVersion": st.one_of(st.just("sinks.knative.dev/v1alpha1"), anything),
        "kind": st.one_of(st.just("IntegrationSink"), anything),
        "name": st.one_of(st.just("s1"), anything),
        "namespace": anything,
    },
)
triggers = st.fixed_dictionaries(
    {"metadata": st.just({"name": "r1"})},
    optional={
        "spec": st.fixed_dictionaries(
            {},
            optional={
                "subscriber": st.one_of(
                    st.fixed_dictionaries({"ref": refs}, optional={"audience": anything}),
                    anything,
                ),
                "delivery": st.one_of(
                    st.fixed_dictionaries(
                        {},
                        optional={
                            "deadLetterSink": st.one_of(
                                st.fixed_dictionaries(
                                    {"ref": refs}, optional={"uri": anything, "audience": anything}
                                ),
                                anything,
                            )
                        },
                    ),
                    anything,
                ),
            },
        )
    },
)


@FUZZ
@given(target=st.one_of(st.tuples(st.just(IS), sinks), st.tuples(st.just(TRIGGER), triggers)))
def test_integration_sinks_and_their_refs_never_answer_5xx(
    client: Client, target: tuple[str, Any]
) -> None:
    path, doc = target
    headers = {"content-type": "application/json"}
    response = client.http.request("PUT", path, headers=headers, body=json.dumps(doc).encode())
    check_answer(response.status_code, dict(response.headers), response.body, f"PUT {path}")
    got = client.http.request("GET", path, headers=headers)  # a stored one reads back
    check_answer(got.status_code, dict(got.headers), got.body, f"GET {path}")
