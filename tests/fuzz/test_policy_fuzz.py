"""EventPolicies under hostile input (docs/security.md): hostile policy documents and test calls
never answer 5xx and every 4xx is a problem; a body with several faults is one 400 naming each of
them; hostile requests to a broker guarded by policies are answered 2xx or a 4xx problem; sub
patterns match exactly as the rule reads (equal, or a prefix before a trailing '*', any case)."""

from __future__ import annotations

import json
from typing import Any

from chalice.test import Client
from hypothesis import example, given
from hypothesis import strategies as st

from chalicelib.core.authorization import compile_rule
from chalicelib.core.errors import ValidationError
from chalicelib.core.resources.event_policy import parse_event_policy
from tests.functional.harness import Harness
from tests.fuzz.conftest import FUZZ, check_answer
from tests.fuzz.test_ingress_fuzz import json_values, texts

EP = "/apis/eventing.knative.dev/v1alpha1/namespaces/ns/eventpolicies"
anything = st.one_of(json_values, texts, st.integers(), st.floats(allow_nan=False))
names = st.one_of(st.sampled_from(["default", "orders", "p1", "", "A", "x" * 64]), texts)
api_versions = st.one_of(
    st.sampled_from(
        ["eventing.knative.dev/v1", "sources.knative.dev/v1", "v1", "", "a/b/c", "/v1"]
    ),
    anything,
)
kinds = st.one_of(
    st.sampled_from(["Broker", "KafkaSource", "PingSource", "IntegrationSource", "Trigger", "Pod"]),
    anything,
)
refs = st.fixed_dictionaries(
    {},
    optional={"apiVersion": api_versions, "kind": kinds, "name": names, "namespace": anything},
)
requirements = st.fixed_dictionaries(
    {},
    optional={
        "key": st.one_of(st.sampled_from(["team", "a/b", "/x", "-x", "x" * 70]), texts),
        "operator": st.one_of(
            st.sampled_from(["In", "NotIn", "Exists", "DoesNotExist", "in"]), anything
        ),
        "values": st.one_of(st.lists(st.one_of(texts, anything), max_size=4), anything),
    },
)
selectors = st.fixed_dictionaries(
    {},
    optional={
        "apiVersion": api_versions,
        "kind": kinds,
        "matchLabels": st.one_of(
            st.dictionaries(texts, st.one_of(texts, anything), max_size=3), anything
        ),
        "matchExpressions": st.one_of(st.lists(requirements, max_size=3), anything),
    },
)
targets = st.one_of(
    st.fixed_dictionaries(
        {}, optional={"ref": st.one_of(refs, anything), "selector": st.one_of(selectors, anything)}
    ),
    anything,
)
subs = st.one_of(
    st.sampled_from(["token:ns:*", "*", "a*b", "", " x", "arn:aws:iam::1:role/*", "x" * 3000]),
    texts,
)
froms = st.one_of(
    st.fixed_dictionaries(
        {}, optional={"sub": st.one_of(subs, anything), "ref": st.one_of(refs, anything)}
    ),
    anything,
)
filters = st.one_of(
    st.lists(
        st.one_of(
            st.fixed_dictionaries({"exact": st.dictionaries(texts, texts, max_size=2)}),
            st.fixed_dictionaries({"cesql": st.one_of(texts, st.just("type = 'a'"))}),
            st.fixed_dictionaries({"eventPattern": anything}),
            anything,
        ),
        max_size=3,
    ),
    anything,
)
policy_docs = st.fixed_dictionaries(
    {"metadata": st.one_of(st.just({"name": "p1"}), anything)},
    optional={
        "apiVersion": st.one_of(st.just("eventing.knative.dev/v1alpha1"), anything),
        "kind": st.one_of(st.just("EventPolicy"), anything),
        "spec": st.one_of(
            st.fixed_dictionaries(
                {},
                optional={
                    "to": st.one_of(st.lists(targets, max_size=4), anything),
                    "from": st.one_of(st.lists(froms, max_size=4), anything),
                    "filters": filters,
                },
            ),
            anything,
        ),
    },
)


@FUZZ
@given(doc=policy_docs, method=st.sampled_from(["PUT", "PUT", "POST", "GET", "DELETE"]))
@example(doc={"metadata": {"name": "p1"}, "spec": {"from": [{"sub": "a*b"}]}}, method="PUT")
def test_control_plane_never_answers_5xx(client: Client, doc: Any, method: str) -> None:
    path = EP if method == "POST" else f"{EP}/p1"
    headers = {"content-type": "application/json"}
    response = client.http.request(method, path, headers=headers, body=json.dumps(doc).encode())
    check_answer(response.status_code, dict(response.headers), response.body, f"{method} {path}")
    if response.status_code == 400:
        assert json.loads(response.body)["errors"], "a 400 names its problems"


# Faults that each stand alone: the field the 400 must name, and the spec member carrying it.
FAULTS: list[tuple[str, str, Any]] = [
    (
        "spec.to[0]",
        "to",
        {
            "ref": {"apiVersion": "eventing.knative.dev/v1", "kind": "Broker", "name": "a"},
            "selector": {},
        },
    ),
    (
        "spec.to[1].ref.kind",
        "to",
        {"ref": {"apiVersion": "eventing.knative.dev/v1", "kind": "Channel", "name": "a"}},
    ),
    (
        "spec.to[2].ref.name",
        "to",
        {"ref": {"apiVersion": "eventing.knative.dev/v1", "kind": "Broker", "name": "Bad_Name"}},
    ),
    ("spec.to[3].selector.matchLabels[team]", "to", {"selector": {"matchLabels": {"team": "a b"}}}),
    (
        "spec.to[4].selector.matchExpressions[0].values",
        "to",
        {"selector": {"matchExpressions": [{"key": "t", "operator": "Exists", "values": ["x"]}]}},
    ),
    ("spec.from[0].sub", "from", {"sub": "to*ken:ns:*"}),
    ("spec.from[1].ref.kind", "from", {"ref": {"apiVersion": "v1", "kind": "Pod", "name": "p"}}),
    (
        "spec.from[2].ref.apiVersion",
        "from",
        {"ref": {"apiVersion": "eventing.knative.dev/v1", "kind": "PingSource", "name": "p"}},
    ),
    ("spec.from[3]", "from", {}),
    (
        "spec.from[4].ref.namespace",
        "from",
        {
            "ref": {
                "apiVersion": "sources.knative.dev/v1",
                "kind": "KafkaSource",
                "name": "k",
                "namespace": "NS",
            }
        },
    ),
    ("spec.filters[0]", "filters", {"exact": {"type": ""}}),
    ("spec.filters[1]", "filters", {"cesql": "type ="}),
]


@FUZZ
@given(chosen=st.sets(st.integers(0, len(FAULTS) - 1), min_size=1))
def test_a_body_with_several_faults_is_one_400_naming_each(chosen: set[int]) -> None:
    spec: dict[str, list[Any]] = {"to": [], "from": [], "filters": []}
    expected: list[str] = []
    for i in sorted(chosen):
        _, member, value = FAULTS[i]
        spec[member].append(value)
    # Renumber each expected field by the element's place in its list.
    seen = {"to": 0, "from": 0, "filters": 0}
    for i in sorted(chosen):
        field, member, _ = FAULTS[i]
        prefix = f"spec.{member}[{seen[member]}]"
        expected.append(prefix + field.split("]", 1)[1])
        seen[member] += 1
    try:
        parse_event_policy("ns", {"metadata": {"name": "p"}, "spec": spec}, path_name=None)
    except ValidationError as err:
        fields = [p.field for p in err.problems]
    else:
        raise AssertionError("refused nothing")
    for field in expected:
        assert any(
            f == field or f.startswith(field + ".") or f.startswith(field + "[") for f in fields
        ), (field, fields)


test_body = st.fixed_dictionaries(
    {},
    optional={
        "broker": st.one_of(st.just("default"), names, anything),
        "identity": st.one_of(st.just("token:ns:abc"), subs, anything),
        "event": st.one_of(
            st.just({"specversion": "1.0", "id": "1", "source": "/s", "type": "t"}), anything
        ),
        "other": anything,
    },
)


@FUZZ
@given(body=st.one_of(test_body, anything))
def test_the_test_call_never_answers_5xx(client: Client, body: Any) -> None:
    headers = {"content-type": "application/json"}
    path = f"{EP}-test"
    response = client.http.post(path, headers=headers, body=json.dumps(body).encode())
    check_answer(response.status_code, dict(response.headers), response.body, f"POST {path}")


@FUZZ
@given(
    authorization=st.one_of(
        st.none(), texts, st.sampled_from(["Bearer ", "Bearer x", "Basic abc", "bearer  "])
    ),
    type_=st.one_of(st.just("order.created"), texts),
)
def test_a_guarded_broker_answers_hostile_requests_with_a_problem(
    harness: Harness, authorization: str | None, type_: str
) -> None:
    harness.container.event_policies.put(
        "ns",
        "guard",
        {
            "metadata": {"name": "guard"},
            "spec": {"from": [{"sub": "token:ns:*"}], "filters": [{"prefix": {"type": "order."}}]},
        },
    )
    headers = {
        "ce-specversion": "1.0",
        "ce-id": "1",
        "ce-source": "/s",
        "ce-type": type_,
        "content-type": "text/plain",
    }
    if authorization is not None:
        headers["authorization"] = authorization
    answer = harness.post(headers, b"x")
    check_answer(answer.status, answer.headers, answer.body, f"POST with {authorization!r}")
    assert answer.status != 202  # no token of the broker: nobody this policy admits


identities = st.one_of(
    st.sampled_from(
        ["token:ns:abc", "TOKEN:NS:ABC", "source:ns:PingSource:p", "arn:aws:iam::1:role/x"]
    ),
    texts,
)


@FUZZ
@given(sub=subs, identity=identities)
def test_a_sub_admits_exactly_its_identity_or_what_its_prefix_begins(
    sub: str, identity: str
) -> None:
    body = {"metadata": {"name": "p"}, "spec": {"from": [{"sub": sub}]}}
    try:
        rule = compile_rule(parse_event_policy("ns", body, path_name=None))
    except ValidationError:
        return
    if sub.endswith("*"):
        expected = identity.lower().startswith(sub[:-1].lower())
    else:
        expected = identity.lower() == sub.lower()
    assert rule.admits(identity) is expected
