"""EventTransforms under hostile input (docs/transforms.md): hostile documents and expressions at
PUT never answer 5xx, and every 4xx is a problem; an expression applied to hostile event data
either gives a valid CloudEvent or fails with a TransformError (the dead letter's reason), never
another exception, and within its deadline."""

from __future__ import annotations

import json
import time
from typing import Any

import jsonata  # noqa: F401 - it raises the recursion limit on import: before hypothesis runs
from chalice.test import Client
from hypothesis import example, given
from hypothesis import strategies as st

from chalicelib.core import transforms
from chalicelib.core.cloudevents import codec
from chalicelib.core.cloudevents.event import CloudEvent
from chalicelib.core.transforms import Limits
from tests.fuzz.conftest import FUZZ, check_answer
from tests.fuzz.test_ingress_fuzz import json_values, texts

ET = "/apis/eventing.knative.dev/v1alpha1/namespaces/ns/eventtransforms"
CP = "/apis/eventing.knative.dev/v1/namespaces/ns"

anything = st.one_of(json_values, texts, st.integers(), st.floats(allow_nan=False))
# Pieces of JSONata, put together at random: most are invalid, some run.
pieces = st.sampled_from(
    [
        "data", "id", "type", ".", "$", "$$", "[", "]", "{", "}", "(", ")", ",", ":", ";", '"x"',
        "1", "0", "-1", "1e308", "..", "+", "*", "/", "%", "&", "=", "!=", "?", "~>", "|",
        "$count(", "$string(", "$pad(", "$replace(", "$split(", "$join(", "$sum(", "$keys(",
        "$lookup(", "$each(", "$sift(", "$reduce(", "$map(", "$eval(", "$match(", "$error(",
        "$formatNumber(", "$number(", "$fromMillis(", "$toMillis(", "$base64decode(",
        "function($x){", "$f", ":=", "/a+/", "/(a*)*b/", "/(a|aa)+$/", "**", "@", "#", "^(",
        "<", ">", "[0,", "$distinct(",
    ]
)  # fmt: skip
expressions = st.one_of(
    st.lists(pieces, min_size=1, max_size=12).map(" ".join),
    texts,
    st.sampled_from(
        [
            "(" * 3000 + "1" + ")" * 3000,
            "[" * 3000 + "]" * 3000,
            "{" * 2000,
            "$" * 20_000,
            '{"a": ' * 500 + "1" + "}" * 500,
            "($f := function($x){ $f($x) }; $f(1))",
            '$eval("[1..10000000]")',
            '$split($pad("", 4000000), "")',
            '$replace($pad("", 100000, "a"), "a", $pad("", 100000, "b"))',
            # Array and object constructors: the library marks their later items as parallel
            # calls, which once skipped every bound (issue 31).
            '[0, $count($split($pad("", 3000000), "").$uppercase($))]',
            '{"a": 0, "b": [0, $join([1..100000].$string($), "")]}',
            "[0, ($f := function($x){ $x > 0 ? 1 + $f($x - 1) : 0 }; $f(100000))]",
            '[0, $match($pad("", 40, "a") & "!", /(a|aa)+$/)]',
            "[0, $distinct([1..300000])]",
            "[0, $string([1..20000].($$))]",
            "[0, [1..10000].data]",
        ]
    ),
)
transform_docs = st.fixed_dictionaries(
    {"metadata": st.one_of(st.just({"name": "r1"}), anything)},
    optional={
        "spec": st.fixed_dictionaries(
            {},
            optional={
                "jsonata": st.one_of(
                    st.fixed_dictionaries({"expression": st.one_of(expressions, anything)}),
                    anything,
                ),
                "sink": st.one_of(st.fixed_dictionaries({"uri": texts}), anything),
                "reply": st.one_of(
                    st.fixed_dictionaries(
                        {},
                        optional={
                            "discard": anything,
                            "jsonata": st.fixed_dictionaries({"expression": expressions}),
                        },
                    ),
                    anything,
                ),
            },
        )
    },
)
ref_triggers = st.fixed_dictionaries(
    {
        "metadata": st.just({"name": "r1"}),
        "spec": st.fixed_dictionaries(
            {
                "subscriber": st.fixed_dictionaries(
                    {
                        "ref": st.one_of(
                            st.fixed_dictionaries(
                                {
                                    "apiVersion": st.sampled_from(
                                        ["eventing.knative.dev/v1alpha1", "v1"]
                                    ),
                                    "kind": st.sampled_from(["EventTransform", "Service"]),
                                    "name": st.one_of(st.just("r1"), texts),
                                },
                                optional={"namespace": texts},
                            ),
                            anything,
                        )
                    },
                    optional={"uri": texts},
                )
            }
        ),
    }
)


@FUZZ
@given(
    target=st.one_of(
        st.tuples(st.just(f"{ET}/r1"), transform_docs),
        st.tuples(st.just(f"{CP}/triggers/r1"), ref_triggers),
    ),
    method=st.sampled_from(["PUT", "PUT", "POST", "GET", "DELETE"]),
)
@example(
    target=(f"{ET}/r1", {"metadata": {"name": "r1"}, "spec": {"jsonata": {"expression": "{"}}}),
    method="PUT",
)
def test_control_plane_never_answers_5xx(
    client: Client, target: tuple[str, Any], method: str
) -> None:
    path, doc = target
    if method == "POST":
        path = path.rsplit("/", 1)[0]
    body = json.dumps(doc).encode()
    headers = {"content-type": "application/json"}
    response = client.http.request(method, path, headers=headers, body=body)
    check_answer(response.status_code, dict(response.headers), response.body, f"{method} {path}")


def _event(data: Any) -> CloudEvent:
    return codec.from_json(
        {
            "specversion": "1.0",
            "id": "e1",
            "source": "/fuzz",
            "type": "t",
            "datacontenttype": "application/json",
            "data": data,
        }
    )


@FUZZ
@given(expression=expressions, data=json_values)
@example(expression='$replace(data, "a", "bb")', data="a" * 10_000)
@example(expression="$keys(data).$lookup(data, $)", data={"a": [1, {"b": None}]})
def test_evaluation_gives_an_event_or_a_transform_error(expression: str, data: Any) -> None:
    if transforms.expression_problems(expression, "e"):
        return  # refused at PUT: never evaluated
    started = time.monotonic()
    try:
        out = transforms.apply(
            expression, _event(data), Limits(timeout_ms=200, max_bytes=1_000_000)
        )
    except transforms.TransformError as exc:
        assert str(exc)  # a reason for knativeerrordata
    else:
        assert codec.validate(out) == []
    assert time.monotonic() - started < 5.0
