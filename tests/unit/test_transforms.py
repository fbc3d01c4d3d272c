"""EventTransform (docs/transforms.md): the JSONata evaluation, the merge rule, the bounds, and the
kind's parsing; plus a trigger's subscriber.ref."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from jsonata import Jsonata

from chalicelib.core import limits, transforms
from chalicelib.core.cloudevents import codec
from chalicelib.core.cloudevents.event import CloudEvent
from chalicelib.core.errors import ValidationError
from chalicelib.core.registry.entities import trigger_definition
from chalicelib.core.resources.event_transform import (
    EVENT_TRANSFORMS,
    event_transform_status,
    parse_event_transform,
)
from chalicelib.core.resources.trigger import TRIGGERS, parse_trigger, trigger_spec_json
from chalicelib.core.transforms import Limits, TransformError

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def event(**attrs: Any) -> CloudEvent:
    obj: dict[str, Any] = {
        "specversion": "1.0",
        "id": "e1",
        "source": "/orders",
        "type": "order.created",
        "datacontenttype": "application/json",
        "data": {"user": {"id": "u7"}, "total": 12},
    }
    obj.update(attrs)
    return codec.from_json(obj)


def body(expression: Any, **spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": "tx"}, "spec": {"jsonata": {"expression": expression}, **spec}}


def problems(exc: pytest.ExceptionInfo[ValidationError]) -> dict[str, str]:
    return {p.field: p.message for p in exc.value.problems}


# ---- evaluation and the merge rule ---------------------------------------------------------------


def test_input_is_the_event_json_and_the_result_is_the_new_event() -> None:
    out = transforms.apply(
        '{"specversion": "1.0", "id": id & "-x", "source": "/tx", "type": "user.extracted",'
        ' "userid": data.user.id, "data": {"total": data.total * 2}}',
        event(),
    )
    assert (out.id, out.source, out.type) == ("e1-x", "/tx", "user.extracted")
    assert out.get("userid") == "u7"
    assert out.json_data == {"total": 24}
    assert out.get("datacontenttype") is None  # nothing else is carried over


def test_merge_rule_keeps_the_inputs_id_source_type_and_specversion() -> None:
    out = transforms.apply('{"data": data.user, "priority": "high"}', event())
    assert (out.specversion, out.id, out.source, out.type) == (
        "1.0",
        "e1",
        "/orders",
        "order.created",
    )
    assert out.json_data == {"id": "u7"} and out.get("priority") == "high"
    # null counts as missing; a value given wins
    out = transforms.apply('{"id": null, "type": "t2"}', event())
    assert (out.id, out.type) == ("e1", "t2")
    assert transforms.merge({"id": "a"}, {"id": "b", "source": "s"}) == {"id": "a", "source": "s"}


@pytest.mark.parametrize(
    ("expression", "reason"),
    [
        ("data.nothing", "no result (undefined)"),
        ('"a string"', "got a string"),
        ("[1, 2]", "got an array"),
        ('{"specversion": "0.1"}', "not a valid CloudEvent"),
        ('{"type": ""}', "not a valid CloudEvent"),
        ("$undefinedfn(1)", "T1006"),
        ('{"f": function($x){$x}}', "not JSON"),
        ('$error("boom")', "boom"),
    ],
)
def test_runtime_errors_name_the_reason(expression: str, reason: str) -> None:
    with pytest.raises(TransformError) as exc:
        transforms.apply(expression, event())
    assert reason in str(exc.value)


def test_legacy_spec_versions_only_where_the_broker_takes_them() -> None:
    assert transforms.apply('{"specversion": "0.3"}', event()).specversion == "0.3"
    with pytest.raises(TransformError, match="legacy version"):
        transforms.apply('{"specversion": "0.2"}', event())
    assert transforms.apply('{"specversion": "0.2"}', event(), legacy=True).specversion == "0.2"


def test_binary_data_is_seen_as_a_string_and_an_invalid_attribute_is_refused() -> None:
    text = codec.from_json(
        {"specversion": "1.0", "id": "1", "source": "/s", "type": "t", "data": "hello"}
    )
    assert transforms.apply('{"data": $uppercase(data)}', text).json_data == "HELLO"
    with pytest.raises(TransformError, match="not a valid CloudEvent"):
        transforms.apply('{"Bad-Name": "x"}', text)


# ---- bounds --------------------------------------------------------------------------------------


def test_an_endless_recursion_stops_at_the_deadline() -> None:
    started = time.monotonic()
    with pytest.raises(TransformError) as exc:
        transforms.apply("($f := function($x){ $f($x) }; $f(1))", event(), Limits(timeout_ms=200))
    elapsed = time.monotonic() - started
    assert "ran longer than 200 ms" in str(exc.value)
    assert elapsed < 2.0


def test_a_long_loop_stops_at_the_deadline() -> None:
    started = time.monotonic()
    with pytest.raises(TransformError, match="ran longer than 100 ms"):
        transforms.apply(
            "$sum([1..999999].($ * 2))", event(), Limits(timeout_ms=100, max_depth=10_000)
        )
    assert time.monotonic() - started < 2.0


def test_deep_recursion_stops_at_the_depth_bound() -> None:
    recursive = '{"data": ($f := function($x){ $x > 0 ? 1 + $f($x - 1) : 0 }; $f(%d))}'
    assert transforms.apply(recursive % 20, event()).json_data == 20
    with pytest.raises(TransformError, match="nests deeper than 300 steps"):
        transforms.apply(recursive % 100_000, event(), Limits(timeout_ms=60_000))


def test_a_huge_range_is_refused_by_the_library() -> None:
    with pytest.raises(TransformError, match="D2014"):
        transforms.apply("[1..100000000]", event())


def test_the_result_is_bounded_in_bytes() -> None:
    with pytest.raises(TransformError, match="bytes; at most 1000"):
        transforms.apply('{"data": [1..500].("xx")}', event(), Limits(max_bytes=1000))


def test_a_step_that_makes_a_huge_value_is_stopped() -> None:
    with pytest.raises(TransformError, match="array of 10000001 items"):
        transforms.apply('{"data": [1..10000000]}', event())  # lazy in the library: caught early
    with pytest.raises(TransformError, match=r"\$pad to 100000000 characters"):
        transforms.apply('{"data": $pad("", 100000000)}', event())  # before it allocates
    with pytest.raises(TransformError, match="string of 1200 characters; at most 1000"):
        transforms.apply('{"data": $pad("", 600) & $pad("", 600)}', event(), Limits(max_bytes=1000))
    with pytest.raises(TransformError, match=r"\$join would make 2000 characters; at most 1000"):
        transforms.apply('{"data": $join([1..2000].("x"), "")}', event(), Limits(max_bytes=1000))


def test_many_strings_each_under_the_bound_are_stopped_in_all() -> None:
    started = time.monotonic()
    with pytest.raises(TransformError, match="characters of strings in all"):
        transforms.apply('{"data": [1..1000].$pad("", 4000000)}', event())
    assert time.monotonic() - started < 2.0


@pytest.mark.parametrize(
    "expression",
    [
        '$replace(s, "hello", "bye")',
        '$replace(s, /h(e)llo/, "j$1llo")',
        '$replace(s, "l", "L", 2)',
        '$replace(s, "l", "L", 0)',
        '$replace(s, /l/, "L", 3)',
        '$replace(s, /o/, function($m){"0"})',
        '$replace(s, "hello", "[$0]")',
        '$replace(s, "o", "$$")',
        '$replace(s, ".", "!")',
        '$replace(s, /(l)(o)/, "$2$1$3")',
    ],
)
def test_bounded_replace_answers_as_the_library(expression: str) -> None:
    document = {"s": "hello world, hello $ a.b"}
    assert transforms.evaluate(expression, document) == Jsonata(expression).evaluate(document)


def test_replace_is_bounded_and_fast_on_many_matches() -> None:
    many = {"s": "a" * 1_000_000}
    started = time.monotonic()
    assert transforms.evaluate('$replace(s, "a", "b")', many) == "b" * 1_000_000
    assert time.monotonic() - started < 1.0  # the library's own takes ~30 s here
    with pytest.raises(TransformError, match="could make 2000000000000 characters"):
        transforms.evaluate('$replace(s, "a", $pad("", 2000000, "x"))', many)
    with pytest.raises(TransformError, match="could make"):
        transforms.evaluate('$replace(s, /(a)/, "$1$1")', many, Limits(max_bytes=2_000_000))


def test_the_expression_is_bounded_in_size() -> None:
    long = "1" + " + 1" * limits.MAX_TRANSFORM_EXPRESSION_CHARS
    [problem] = transforms.expression_problems(long, "spec.jsonata.expression")
    assert f"at most {limits.MAX_TRANSFORM_EXPRESSION_CHARS}" in problem.message


# ---- the kind ------------------------------------------------------------------------------------


def test_a_syntax_error_is_named_with_its_position() -> None:
    with pytest.raises(ValidationError) as exc:
        parse_event_transform("ns", body('{"a": data.x + }'), path_name="tx")
    message = problems(exc)["spec.jsonata.expression"]
    assert "S0211 at position 16" in message and "not valid JSONata" in message


@pytest.mark.parametrize("expression", ["a ~ b", "1 !", "/"])
def test_the_parsers_own_faults_are_problems_not_server_errors(expression: str) -> None:
    # The library raises KeyError / IndexError here instead of its JException (found by fuzzing).
    [problem] = transforms.expression_problems(expression, "spec.jsonata.expression")
    assert "is not valid JSONata: the parser failed" in problem.message


def test_every_problem_is_named_at_once() -> None:
    bad = {
        "metadata": {"name": "Bad_Name"},
        "spec": {
            "jsonata": {"expression": ""},
            "sink": {"uri": "ftp://x"},
            "reply": {"discard": "yes"},
            "extra": 1,
        },
    }
    with pytest.raises(ValidationError) as exc:
        parse_event_transform("ns", bad, path_name=None)
    assert set(problems(exc)) == {
        "metadata.name",
        "spec.jsonata.expression",
        "spec.sink.uri",
        "spec.reply.discard",
        "spec.extra",
    }


def test_reply_needs_a_sink_and_one_of_jsonata_or_discard() -> None:
    with pytest.raises(ValidationError) as exc:
        parse_event_transform("ns", body("$", reply={"discard": True}), path_name="tx")
    assert "needs spec.sink" in problems(exc)["spec.reply"]
    both = body(
        "$", sink={"uri": "http://s/"}, reply={"discard": True, "jsonata": {"expression": "$"}}
    )
    with pytest.raises(ValidationError) as exc:
        parse_event_transform("ns", both, path_name="tx")
    assert "not both" in problems(exc)["spec.reply"]
    with pytest.raises(ValidationError) as exc:
        parse_event_transform("ns", {"metadata": {"name": "tx"}, "spec": {}}, path_name="tx")
    assert "spec.jsonata" in problems(exc)


def test_round_trip_through_storage_and_status() -> None:
    parsed = parse_event_transform(
        "ns",
        body(
            "$",
            sink={"uri": "http://sink/"},
            reply={"jsonata": {"expression": '{"type": "r"}'}},
        ),
        path_name="tx",
    )
    admitted = EVENT_TRANSFORMS.admit(parsed, None, "uid-1", NOW)
    assert admitted.generation == 1 and admitted.uid == "uid-1"
    again = EVENT_TRANSFORMS.from_item(EVENT_TRANSFORMS.to_item(admitted))
    assert again == admitted
    status = event_transform_status(admitted, public_url="http://api:8080", now=NOW)
    assert status["address"]["url"] == (
        "http://api:8080/apis/eventing.knative.dev/v1alpha1/namespaces/ns/eventtransforms/tx"
    )
    assert status["sinkUri"] == "http://sink/"
    ready = {c["type"]: c["status"] for c in status["conditions"]}
    assert ready == {"Addressable": "True", "Ready": "True", "SinkResolved": "True"}
    doc = EVENT_TRANSFORMS.to_json(admitted, status)
    assert doc["apiVersion"] == "eventing.knative.dev/v1alpha1" and doc["kind"] == "EventTransform"
    assert doc["spec"]["reply"] == {"jsonata": {"expression": '{"type": "r"}'}}


# ---- a trigger's subscriber.ref ------------------------------------------------------------------

REF = {"apiVersion": "eventing.knative.dev/v1alpha1", "kind": "EventTransform", "name": "tx"}


def test_trigger_subscriber_ref_to_an_event_transform() -> None:
    trigger = parse_trigger(
        "ns", {"metadata": {"name": "t"}, "spec": {"subscriber": {"ref": REF}}}, path_name="t"
    )
    assert trigger.subscriber_ref == "tx" and trigger.subscriber_uri == ""
    assert trigger_spec_json(trigger)["subscriber"] == {"ref": REF}
    admitted = TRIGGERS.admit(trigger, None, "u", NOW)
    assert TRIGGERS.from_item(TRIGGERS.to_item(admitted)) == admitted


@pytest.mark.parametrize(
    ("ref", "field"),
    [
        ({**REF, "kind": "Service"}, "spec.subscriber.ref"),
        ({**REF, "apiVersion": "serving.knative.dev/v1"}, "spec.subscriber.ref"),
        ({**REF, "name": "Not_A_Name"}, "spec.subscriber.ref.name"),
        ({**REF, "namespace": "other"}, "spec.subscriber.ref.namespace"),
    ],
)
def test_trigger_refs_other_than_an_event_transform_are_refused(
    ref: dict[str, str], field: str
) -> None:
    raw = {"metadata": {"name": "t"}, "spec": {"subscriber": {"ref": ref}}}
    with pytest.raises(ValidationError) as exc:
        parse_trigger("ns", raw, path_name="t")
    assert field in problems(exc)


def test_the_registry_names_the_transform_as_a_refs_endpoint() -> None:
    trigger = parse_trigger(
        "ns", {"metadata": {"name": "t"}, "spec": {"subscriber": {"ref": REF}}}, path_name="t"
    )
    attributes = trigger_definition(trigger, None, "http://api:8080/").attributes
    [endpoint] = attributes["protocoloptions"]["endpoints"]
    assert endpoint["uri"] == (
        "http://api:8080/apis/eventing.knative.dev/v1alpha1/namespaces/ns/eventtransforms/tx"
    )


def test_the_app_imports_the_jsonata_library_only_when_it_is_used() -> None:
    # ~55 ms that the ingress Lambda, which never evaluates an expression, does not pay.
    code = (
        "import sys, app\n"
        "assert 'jsonata' not in sys.modules\n"
        "from chalicelib.core import transforms\n"
        "transforms.expression_problems('$', 'e')\n"
        "assert 'jsonata' in sys.modules\n"
    )
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": str(root)}
    subprocess.run([sys.executable, "-c", code], cwd=root, env=env, check=True, timeout=60)
