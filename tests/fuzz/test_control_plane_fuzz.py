"""The control plane under hostile documents for every resource kind (brokers, triggers with
every filter dialect, Kafka sources, registry endpoints, tokens, dead letters): no 5xx, every
4xx a problem (issue 16)."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote

from chalice.test import Client
from hypothesis import example, given
from hypothesis import strategies as st

from tests.fuzz.conftest import FUZZ, check_answer
from tests.fuzz.test_ingress_fuzz import deep, extreme_numbers, json_values, texts

CP = "/apis/eventing.knative.dev/v1/namespaces/ns"
KS = "/apis/sources.knative.dev/v1/namespaces/ns/kafkasources"

anything = st.one_of(json_values, texts, st.integers(), st.floats(allow_nan=False))
durations = st.one_of(
    st.sampled_from(["PT1S", "PT0.2S", "P1Y", "PT" + "9" * 400 + "S", "-PT1S", "P"]), texts
)
cesql = st.one_of(
    st.sampled_from(
        [
            "INT(seq) > " + "9" * 4000,
            "type IN (" + ",".join(["'a'"] * 300) + ")",
            "CONCAT(" + ",".join(["type"] * 100) + ") = 'x'",
            "type LIKE '" + "%_" * 600 + "'",
            "(" * 2000 + "TRUE" + ")" * 2000,
            "NOT " * 3000 + "TRUE",
            "type = 'x' OR " * 400 + "TRUE",
        ]
    ),
    st.text(max_size=60),
)
filters = st.lists(
    st.one_of(
        st.fixed_dictionaries(
            {"exact": st.dictionaries(st.text(max_size=8), anything, max_size=2)}
        ),
        st.fixed_dictionaries(
            {"prefix": st.dictionaries(st.text(max_size=8), anything, max_size=2)}
        ),
        st.fixed_dictionaries({"cesql": st.one_of(cesql, anything)}),
        st.fixed_dictionaries(
            {"all": st.lists(st.fixed_dictionaries({"cesql": cesql}), max_size=2)}
        ),
        st.fixed_dictionaries(
            {
                "not": st.fixed_dictionaries(
                    {"suffix": st.dictionaries(st.text(max_size=4), anything, max_size=1)}
                )
            }
        ),
        anything,
    ),
    max_size=3,
)
delivery = st.fixed_dictionaries(
    {},
    optional={
        "retry": st.one_of(st.integers(), extreme_numbers, anything),
        "backoffPolicy": st.one_of(st.sampled_from(["exponential", "linear"]), anything),
        "backoffDelay": durations,
        "timeout": durations,
        "retryAfterMax": durations,
        "deadLetterSink": st.one_of(
            st.fixed_dictionaries({"uri": st.one_of(texts, st.just("http://x.example"))}), anything
        ),
        "format": anything,
    },
)
metadata = st.fixed_dictionaries(
    {"name": st.one_of(st.just("r1"), texts)},
    optional={
        "annotations": st.dictionaries(
            st.sampled_from(
                [
                    "serverless-broker/max-event-bytes",
                    "serverless-broker/ingress-auth",
                    "serverless-broker/legacy-spec-versions",
                    "eventing.knative.dev/broker.class",
                    "x",
                ]
            ),
            st.one_of(extreme_numbers, texts, anything),
            max_size=3,
        ),
        "generation": anything,
    },
)
brokers = st.fixed_dictionaries(
    {"metadata": metadata},
    optional={
        "spec": st.fixed_dictionaries({}, optional={"delivery": delivery, "config": anything})
    },
)
triggers = st.fixed_dictionaries(
    {"metadata": metadata},
    optional={
        "spec": st.fixed_dictionaries(
            {},
            optional={
                "broker": st.one_of(st.just("default"), texts),
                "filter": st.one_of(
                    st.fixed_dictionaries(
                        {"attributes": st.dictionaries(st.text(max_size=8), anything, max_size=3)}
                    ),
                    anything,
                ),
                "filters": st.one_of(filters, anything),
                "subscriber": st.one_of(
                    st.fixed_dictionaries(
                        {
                            "uri": st.one_of(
                                texts,
                                st.sampled_from(
                                    ["http://s.example", "kafka://k:9092/t", "http://u:p@x"]
                                ),
                            )
                        }
                    ),
                    anything,
                ),
                "delivery": st.one_of(delivery, anything),
            },
        )
    },
)
sources = st.fixed_dictionaries(
    {"metadata": metadata},
    optional={
        "spec": st.fixed_dictionaries(
            {},
            optional={
                "bootstrapServers": st.one_of(st.lists(texts, max_size=3), anything),
                "topics": st.one_of(st.lists(texts, max_size=3), anything),
                "initialOffset": anything,
                "batchSize": st.one_of(extreme_numbers, anything),
                "consumerGroup": anything,
                "sink": st.one_of(st.fixed_dictionaries({"uri": texts}), anything),
            },
        )
    },
)
endpoints = st.dictionaries(
    st.sampled_from(
        [
            "endpointid",
            "usage",
            "envelope",
            "protocol",
            "protocoloptions",
            "messages",
            "epoch",
            "name",
            "x",
        ]
    ),
    anything,
    max_size=5,
)

documents = st.one_of(
    st.tuples(st.just(f"{CP}/brokers/r1"), brokers),
    st.tuples(st.just(f"{CP}/triggers/r1"), triggers),
    st.tuples(st.just(f"{KS}/r1"), sources),
    st.tuples(st.just("/registry/endpoints/e1"), endpoints),
)


def _body(doc: Any, raw: bytes | None) -> bytes:
    return raw if raw is not None else json.dumps(doc).encode()


@FUZZ
@given(
    target=documents,
    method=st.sampled_from(["PUT", "PUT", "PUT", "POST", "GET", "DELETE"]),
    raw=st.one_of(
        st.none(),
        st.sampled_from(
            [
                b"",
                b"{",
                b"\xff",
                deep(100_000).encode(),
                b'{"a":' * 990 + b"1" + b"}" * 990,
                b'{"spec": {"delivery": {"retry": ' + b"1" * 5000 + b"}}}",
            ]
        ),
    ),
)
@example(
    target=(
        f"{CP}/triggers/r1",
        {
            "metadata": {"name": "r1"},
            "spec": {
                "broker": "default",
                "subscriber": {"uri": "http://s.example"},
                "filters": [{"cesql": "INT(seq) > " + "9" * 4000}],
            },
        },
    ),
    method="PUT",
    raw=None,
)
@example(
    target=(
        f"{KS}/r1",
        {
            "metadata": {"name": "r1"},
            "spec": {
                "bootstrapServers": [],
                "topics": [],
                "initialOffset": {},
                "sink": {"uri": "https://0.com"},
            },
        },
    ),
    method="PUT",
    raw=None,
)
def test_control_plane_never_answers_5xx(
    client: Client, target: tuple[str, Any], method: str, raw: bytes | None
) -> None:
    path, doc = target
    if method == "POST":
        path = path.rsplit("/", 1)[0]
    headers = {"content-type": "application/json"}
    response = client.http.request(method, path, headers=headers, body=_body(doc, raw))
    check_answer(response.status_code, dict(response.headers), response.body, f"{method} {path}")


@FUZZ
@given(
    limit=st.one_of(extreme_numbers, texts, st.integers().map(str)),
    which=st.sampled_from(["triggers/sql/deadletters", "brokers/default/tokens"]),
)
def test_queries_and_sub_resources_never_answer_5xx(client: Client, limit: str, which: str) -> None:
    for method in ("GET", "POST", "DELETE"):
        path = f"{CP}/{which}?limit={quote(limit.encode('utf-8', 'surrogatepass'), safe='')}"
        response = client.http.request(
            method, path, headers={"content-type": "application/json"}, body=b""
        )
        check_answer(
            response.status_code, dict(response.headers), response.body, f"{method} {path[:80]}"
        )
    r = client.http.request(
        "GET", f"{KS}/nope/failures?limit={quote(limit.encode('utf-8', 'surrogatepass'), safe='')}"
    )
    check_answer(r.status_code, dict(r.headers), r.body, "failures")
