import copy
import json
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from chalicelib.core.errors import ImmutableFieldError, ValidationError
from chalicelib.core.resources.broker import (
    BROKER_CLASS_ANNOTATION,
    BROKERS,
    DEFAULT_MAX_EVENT_BYTES,
    MAX_EVENT_BYTES_ANNOTATION,
    Broker,
    admit_broker,
    check_immutable_broker,
    ingress_url,
    parse_broker,
)
from chalicelib.core.resources.delivery_spec import DEFAULT_BROKER_DELIVERY, DeliverySpec
from chalicelib.core.resources.durations import Duration
from chalicelib.core.resources.meta import format_timestamp
from chalicelib.core.resources.trigger import (
    TRIGGERS,
    Trigger,
    admit_trigger,
    check_immutable_trigger,
    effective_delivery,
    parse_trigger,
)

NOW = datetime(2026, 1, 2, 3, 4, 5, 678000, tzinfo=UTC)
DELETE = object()
CLASS = f"metadata.annotations[{BROKER_CLASS_ANNOTATION}]"
MAX_BYTES = f"metadata.annotations[{MAX_EVENT_BYTES_ANNOTATION}]"
LEGACY = "metadata.annotations[serverless-broker/legacy-spec-versions]"
AUTH = "metadata.annotations[serverless-broker/ingress-auth]"

BROKER: dict[str, Any] = {
    "apiVersion": "eventing.knative.dev/v1",
    "kind": "Broker",
    "metadata": {"name": "default"},
}
TRIGGER: dict[str, Any] = {
    "apiVersion": "eventing.knative.dev/v1",
    "kind": "Trigger",
    "metadata": {"name": "orders"},
    "spec": {
        "broker": "default",
        "filter": {"attributes": {"type": "x"}},
        "subscriber": {"uri": "http://sub.example/orders"},
    },
}


def patched(base: dict[str, Any], path: str, value: object) -> dict[str, Any]:
    """A copy of ``base`` with the dotted ``path`` set (``key[name]`` for keys holding dots)."""
    body = copy.deepcopy(base)
    keys = list(_keys(path))
    node = body
    for key in keys[:-1]:
        node = node.setdefault(key, {})
    if value is DELETE:
        node.pop(keys[-1], None)
    else:
        node[keys[-1]] = value
    return body


def _keys(path: str) -> Iterator[str]:
    head, _, bracket = path.partition("[")
    yield from head.split(".")
    if bracket:
        yield bracket.rstrip("]")


def problems_of(fn: Any, *args: Any, **kwargs: Any) -> dict[str, str]:
    with pytest.raises(ValidationError) as err:
        fn(*args, **kwargs)
    return {p.field: p.message for p in err.value.problems}


def uids() -> Iterator[str]:
    n = 0
    while True:
        n += 1
        yield f"uid-{n}"


# --- Broker validation ---------------------------------------------------------------------------


def test_broker_defaults() -> None:
    broker = parse_broker("default", BROKER, path_name=None)
    assert broker.name == "default"
    assert broker.namespace == "default"
    assert broker.delivery == DeliverySpec(10, "exponential", Duration("PT0.2S", 0.2))
    assert broker.annotations == {BROKER_CLASS_ANNOTATION: "ServerlessBroker"}
    assert broker.config is None
    assert (broker.legacy_spec_versions, broker.max_event_bytes, broker.ingress_auth) == (
        False,
        DEFAULT_MAX_EVENT_BYTES,
        "none",
    )


def test_broker_with_every_option() -> None:
    body = {
        "metadata": {
            "name": "b",
            "namespace": "team",
            "labels": {"app": "shop"},
            "annotations": {
                BROKER_CLASS_ANNOTATION: "ServerlessBroker",
                "serverless-broker/legacy-spec-versions": "true",
                MAX_EVENT_BYTES_ANNOTATION: "1024",
                "serverless-broker/ingress-auth": "token",
                "example.com/owner": "ops",
            },
            "uid": "ignored",
            "generation": 42,
        },
        "spec": {
            "config": {"apiVersion": "v1", "kind": "ConfigMap", "name": "cfg"},
            "delivery": {
                "deadLetterSink": {"uri": "https://dls.example/x?y=1"},
                "retry": 0,
                "backoffPolicy": "linear",
                "backoffDelay": "PT1S",
                "timeout": "PT30S",
                "retryAfterMax": "PT0S",
                "format": "binary",
            },
        },
        "status": {"ignored": True},
    }
    broker = parse_broker("team", body, path_name="b")
    assert (broker.legacy_spec_versions, broker.max_event_bytes, broker.ingress_auth) == (
        True,
        1024,
        "token",
    )
    assert broker.labels == {"app": "shop"}
    assert broker.config == {"apiVersion": "v1", "kind": "ConfigMap", "name": "cfg"}
    assert broker.delivery == DeliverySpec(
        retry=0,
        backoff_policy="linear",
        backoff_delay=Duration("PT1S", 1.0),
        timeout=Duration("PT30S", 30.0),
        retry_after_max=Duration("PT0S", 0.0),
        dead_letter_sink_uri="https://dls.example/x?y=1",
        format="binary",
    )
    assert broker.uid == "" and broker.generation == 0  # server-owned: set on admission


def test_empty_delivery_stays_empty() -> None:
    """Knative defaults only an absent delivery; ``{}`` means no retries."""
    broker = parse_broker("default", patched(BROKER, "spec.delivery", {}), path_name=None)
    assert broker.delivery == DeliverySpec()


def test_null_delivery_is_absent() -> None:
    broker = parse_broker("default", patched(BROKER, "spec.delivery", None), path_name=None)
    assert broker.delivery == DEFAULT_BROKER_DELIVERY


@pytest.mark.parametrize("value", ["1", "4194304"])
def test_max_event_bytes_bounds(value: str) -> None:
    body = patched(BROKER, f"metadata.annotations[{MAX_EVENT_BYTES_ANNOTATION}]", value)
    assert parse_broker("default", body, path_name=None).max_event_bytes == int(value)


BROKER_REJECTIONS = [
    ("metadata.name", "My-Broker", "metadata.name", "DNS-1123"),
    ("metadata.name", "b" * 64, "metadata.name", "longer than 63"),
    ("metadata.name", DELETE, "metadata.name", "is required"),
    ("metadata.name", 7, "metadata.name", "is required"),
    ("metadata.namespace", "other", "metadata.namespace", "does not match the namespace"),
    ("metadata", "x", "metadata", "JSON object"),
    ("metadata.labels", {"app": 1}, "metadata.labels[app]", "must be a string"),
    ("metadata.annotations", ["x"], "metadata.annotations", "JSON object"),
    ("apiVersion", "eventing.knative.dev/v1beta1", "apiVersion", "eventing.knative.dev/v1"),
    ("kind", "Trigger", "kind", '"Broker"'),
    ("extra", 1, "extra", "unknown field"),
    ("spec", [], "spec", "JSON object"),
    ("spec.channel", {}, "spec.channel", "unknown field"),
    ("spec.config", "cfg", "spec.config", "JSON object"),
    ("spec.config", {"name": "cfg"}, "spec.config.kind", "is required"),
    ("spec.config", {"kind": "ConfigMap"}, "spec.config.name", "is required"),
    ("spec.config", {"kind": "K", "name": "n", "namespace": 3}, "spec.config.namespace", "string"),
    ("spec.delivery", "x", "spec.delivery", "JSON object"),
    ("spec.delivery.backofPolicy", "linear", "spec.delivery.backofPolicy", "unknown field"),
    ("spec.delivery.retry", -1, "spec.delivery.retry", "from 0 to 996"),
    ("spec.delivery.retry", 997, "spec.delivery.retry", "from 0 to 996"),
    ("spec.delivery.retry", 1.5, "spec.delivery.retry", "whole number"),
    ("spec.delivery.retry", "3", "spec.delivery.retry", "whole number"),
    ("spec.delivery.retry", True, "spec.delivery.retry", "whole number"),
    ("spec.delivery.backoffPolicy", "Linear", "spec.delivery.backoffPolicy", '"linear" or'),
    ("spec.delivery.backoffDelay", "1s", "spec.delivery.backoffDelay", "ISO-8601"),
    ("spec.delivery.backoffDelay", 5, "spec.delivery.backoffDelay", "ISO-8601"),
    ("spec.delivery.backoffDelay", "-PT1S", "spec.delivery.backoffDelay", "not be negative"),
    ("spec.delivery.timeout", "PT0S", "spec.delivery.timeout", "greater than zero"),
    ("spec.delivery.timeout", "-PT1S", "spec.delivery.timeout", "greater than zero"),
    ("spec.delivery.timeout", "30s", "spec.delivery.timeout", "ISO-8601"),
    ("spec.delivery.retryAfterMax", "-PT1S", "spec.delivery.retryAfterMax", "not be negative"),
    ("spec.delivery.retryAfterMax", "P", "spec.delivery.retryAfterMax", "no components"),
    ("spec.delivery.format", "xml", "spec.delivery.format", '"json" or "binary"'),
    ("spec.delivery.deadLetterSink", "x", "spec.delivery.deadLetterSink", "JSON object"),
    ("spec.delivery.deadLetterSink", {}, "spec.delivery.deadLetterSink.uri", "is required"),
    (
        "spec.delivery.deadLetterSink",
        {"ref": {"kind": "Service", "name": "dls"}},
        "spec.delivery.deadLetterSink.ref",
        "only a ref to an IntegrationSink",
    ),
    (
        "spec.delivery.deadLetterSink",
        {"uri": "http://x/", "audience": ""},
        "spec.delivery.deadLetterSink.audience",
        "non-empty string",
    ),
    ("spec.delivery.deadLetterSink.uri", "ftp://x/", "spec.delivery.deadLetterSink.uri", "http"),
    ("spec.delivery.deadLetterSink.uri", "/dls", "spec.delivery.deadLetterSink.uri", "http"),
    ("spec.delivery.deadLetterSink.uri", "", "spec.delivery.deadLetterSink.uri", "non-empty"),
    ("spec.delivery.deadLetterSink.uri", "http://", "spec.delivery.deadLetterSink.uri", "host"),
    (
        "spec.delivery.deadLetterSink.uri",
        "http://user:pw@dls.example/",
        "spec.delivery.deadLetterSink.uri",
        "user information",
    ),
    (
        "spec.delivery.deadLetterSink.uri",
        "http://dls.example:99999/",
        "spec.delivery.deadLetterSink.uri",
        "port",
    ),
    (
        "spec.delivery.deadLetterSink.uri",
        "http://dls example/",
        "spec.delivery.deadLetterSink.uri",
        "spaces",
    ),
    (CLASS, "MTChannelBasedBroker", CLASS, 'only "ServerlessBroker"'),
    (LEGACY, "yes", LEGACY, '"true" or "false"'),
    (MAX_BYTES, "0", MAX_BYTES, "from 1 to 4194304"),
    (MAX_BYTES, "4194305", MAX_BYTES, "from 1 to 4194304"),
    (MAX_BYTES, "-1", MAX_BYTES, "from 1 to 4194304"),
    (MAX_BYTES, "1.5", MAX_BYTES, "from 1 to 4194304"),
    (MAX_BYTES, "9" * 5000, MAX_BYTES, "from 1 to 4194304"),
    (MAX_BYTES, "١٢", MAX_BYTES, "from 1 to 4194304"),  # Unicode digits are not a number here
    (MAX_BYTES, 1024, MAX_BYTES, "must be a string"),
    (AUTH, "basic", AUTH, '"none" or "token"'),
    (
        "metadata.annotations[serverless-broker/max-bytes]",
        "1",
        "metadata.annotations[serverless-broker/max-bytes]",
        "unknown annotation",
    ),
]


@pytest.mark.parametrize(("path", "value", "field", "fragment"), BROKER_REJECTIONS)
def test_broker_rejections(path: str, value: object, field: str, fragment: str) -> None:
    problems = problems_of(parse_broker, "default", patched(BROKER, path, value), path_name=None)
    assert field in problems, problems
    assert fragment in problems[field]


def test_broker_body_must_be_an_object() -> None:
    assert "body" in problems_of(parse_broker, "default", ["x"], path_name=None)


@pytest.mark.parametrize("namespace", ["apis", "Bad", ""])
def test_broker_namespace(namespace: str) -> None:
    assert "metadata.namespace" in problems_of(parse_broker, namespace, BROKER, path_name=None)


def test_every_problem_at_once() -> None:
    body = copy.deepcopy(BROKER)
    body["metadata"]["annotations"] = {
        BROKER_CLASS_ANNOTATION: "Other",
        MAX_EVENT_BYTES_ANNOTATION: "x",
    }
    body["spec"] = {"delivery": {"retry": -1, "backoffPolicy": "x", "format": "xml"}}
    problems = problems_of(parse_broker, "apis", body, path_name="Bad")
    assert set(problems) == {
        "metadata.namespace",
        "metadata.name",
        CLASS,
        MAX_BYTES,
        "spec.delivery.retry",
        "spec.delivery.backoffPolicy",
        "spec.delivery.format",
    }


@pytest.mark.parametrize(
    ("body_name", "path_name", "expected", "field"),
    [
        ("b", None, "b", None),
        ("b", "b", "b", None),
        (DELETE, "b", "b", None),
        ("a", "b", None, "metadata.name"),
        (DELETE, "Bad", None, "metadata.name"),
    ],
)
def test_name_from_body_and_path(
    body_name: object, path_name: str | None, expected: str | None, field: str | None
) -> None:
    body = patched(BROKER, "metadata.name", body_name)
    if expected is not None:
        assert parse_broker("default", body, path_name=path_name).name == expected
    else:
        assert field in problems_of(parse_broker, "default", body, path_name=path_name)


def test_mismatched_name_message_names_both() -> None:
    body = patched(BROKER, "metadata.name", "a")
    message = problems_of(parse_broker, "default", body, path_name="b")["metadata.name"]
    assert message == '"a" does not match the name in the path ("b")'


# --- Trigger validation --------------------------------------------------------------------------


def test_trigger() -> None:
    trigger = parse_trigger("default", TRIGGER, path_name="orders")
    assert trigger == Trigger(
        namespace="default",
        name="orders",
        uid="",
        generation=0,
        creation_timestamp="",
        broker="default",
        subscriber_uri="http://sub.example/orders",
        filter_attributes={"type": "x"},
    )


def test_trigger_defaults() -> None:
    body = {"metadata": {"name": "t"}, "spec": {"subscriber": {"uri": "https://s.example"}}}
    trigger = parse_trigger("default", body, path_name=None)
    assert trigger.broker == "default"
    assert trigger.filter_attributes == {}
    assert trigger.filters == ()
    assert trigger.delivery is None
    assert TRIGGERS.to_json(trigger, {})["spec"] == {
        "broker": "default",
        "filter": {},
        "subscriber": {"uri": "https://s.example"},
    }


def test_trigger_keeps_filters_and_delivery() -> None:
    body = patched(TRIGGER, "spec.filters", [{"exact": {"type": "x"}}])
    body = patched(body, "spec.delivery", {"retry": 2, "deadLetterSink": {"uri": "http://d/"}})
    trigger = parse_trigger("default", body, path_name=None)
    assert trigger.filters == ({"exact": {"type": "x"}},)
    assert trigger.delivery == DeliverySpec(retry=2, dead_letter_sink_uri="http://d/")
    assert TRIGGERS.to_json(trigger, {})["spec"]["filters"] == [{"exact": {"type": "x"}}]


TRIGGER_REJECTIONS = [
    ("spec.broker", "Default", "spec.broker", "DNS-1123"),
    ("spec.broker", 3, "spec.broker", "is required"),
    ("spec.brokerRef", {"name": "b"}, "spec.brokerRef", "unknown field"),
    ("spec.subscriber", DELETE, "spec.subscriber", "is required"),
    ("spec.subscriber", {}, "spec.subscriber.uri", "is required"),
    ("spec.subscriber", "http://s/", "spec.subscriber", "JSON object"),
    (
        "spec.subscriber",
        {"ref": {"apiVersion": "v1", "kind": "Service", "name": "s"}},
        "spec.subscriber.ref",
        "only a ref to an EventTransform",
    ),
    ("spec.subscriber.CACerts", "pem", "spec.subscriber.CACerts", "PEM certificates"),
    ("spec.subscriber.uri", "mailto:a@b.c", "spec.subscriber.uri", "http or https"),
    ("spec.subscriber.uri", "sub.example", "spec.subscriber.uri", "http or https"),
    ("spec.subscriber.uri", "https://u@s.example/", "spec.subscriber.uri", "user information"),
    ("spec.subscriber.uri", "http://s.example/\n", "spec.subscriber.uri", "control characters"),
    ("spec.subscriber.uri", 5, "spec.subscriber.uri", "non-empty"),
    ("spec.filter", "type=x", "spec.filter", "JSON object"),
    ("spec.filter.attributes", ["type"], "spec.filter.attributes", ""),
    ("spec.filter.cesql", "true", "spec.filter.cesql", "unknown field"),
    ("spec.filters", {"exact": {}}, "spec.filters", "list"),
    ("spec.delivery.retry", -1, "spec.delivery.retry", "from 0"),
    ("spec.delivery.deadLetterSink.uri", "x", "spec.delivery.deadLetterSink.uri", "http"),
    ("kind", "Broker", "kind", '"Trigger"'),
]


@pytest.mark.parametrize(("path", "value", "field", "fragment"), TRIGGER_REJECTIONS)
def test_trigger_rejections(path: str, value: object, field: str, fragment: str) -> None:
    problems = problems_of(parse_trigger, "default", patched(TRIGGER, path, value), path_name=None)
    assert field in problems, problems
    assert fragment in problems[field]


def test_non_string_filter_value_is_reported_once() -> None:
    body = patched(TRIGGER, "spec.filter.attributes", {"type": 1})
    problems = problems_of(parse_trigger, "default", body, path_name=None)
    assert [f for f in problems if f.startswith("spec.filter.attributes")] == [
        "spec.filter.attributes.type"
    ]


def test_trigger_ref_without_uri_reports_only_the_ref() -> None:
    body = patched(TRIGGER, "spec.subscriber", {"ref": {"kind": "Service", "name": "s"}})
    assert list(problems_of(parse_trigger, "default", body, path_name=None)) == [
        "spec.subscriber.ref"
    ]


# --- admission: uid, generation, immutable fields ------------------------------------------------


def test_admit_new_broker() -> None:
    parsed = parse_broker("default", BROKER, path_name=None)
    broker = admit_broker(parsed, None, uid="u-1", now=NOW)
    assert (broker.uid, broker.generation, broker.creation_timestamp) == (
        "u-1",
        1,
        "2026-01-02T03:04:05Z",
    )


@pytest.mark.parametrize(
    ("path", "value", "bump"),
    [
        ("metadata.name", "default", 0),  # the same body again
        ("metadata.labels", {"a": "b"}, 0),
        ("metadata.annotations[example.com/note]", "x", 0),
        ("spec.delivery", {"retry": 3}, 1),
        (f"metadata.annotations[{MAX_EVENT_BYTES_ANNOTATION}]", "10", 1),
        ("metadata.annotations[serverless-broker/ingress-auth]", "token", 1),
    ],
)
def test_broker_generation(path: str, value: object, bump: int) -> None:
    ids = uids()
    first = admit_broker(
        parse_broker("default", BROKER, path_name=None),
        None,
        uid=next(ids),
        now=NOW,
    )
    later = NOW + timedelta(hours=1)
    parsed = parse_broker("default", patched(BROKER, path, value), path_name="default")
    second = admit_broker(parsed, first, uid=next(ids), now=later)
    assert second.uid == first.uid == "uid-1"
    assert second.creation_timestamp == first.creation_timestamp
    assert second.generation == 1 + bump


def test_broker_config_is_immutable() -> None:
    old = admit_broker(parse_broker("default", BROKER, path_name=None), None, uid="u", now=NOW)
    body = patched(BROKER, "spec.config", {"kind": "ConfigMap", "name": "c"})
    new = parse_broker("default", body, path_name=None)
    with pytest.raises(ImmutableFieldError) as err:
        admit_broker(new, old, uid="v", now=NOW)
    assert [p.field for p in err.value.problems] == ["spec.config"]
    assert "delete and re-create the broker" in err.value.problems[0].message


def test_broker_class_is_immutable() -> None:
    old = parse_broker("default", BROKER, path_name=None)
    new = replace(old, annotations={BROKER_CLASS_ANNOTATION: "Other"}, config={"kind": "K"})
    with pytest.raises(ImmutableFieldError) as err:
        check_immutable_broker(old, new)
    assert [p.field for p in err.value.problems] == [CLASS, "spec.config"]
    assert isinstance(err.value, ValidationError)  # the HTTP layer maps it to 422


def test_trigger_broker_is_immutable() -> None:
    old = parse_trigger("default", TRIGGER, path_name=None)
    new = parse_trigger("default", patched(TRIGGER, "spec.broker", "other"), path_name=None)
    with pytest.raises(ImmutableFieldError) as err:
        check_immutable_trigger(old, new)
    assert [p.field for p in err.value.problems] == ["spec.broker"]
    with pytest.raises(ImmutableFieldError):
        admit_trigger(new, old, uid="u", now=NOW)


@pytest.mark.parametrize(
    ("path", "value", "bump"),
    [
        ("metadata.labels", {"a": "b"}, 0),
        ("spec.filter.attributes", {"type": "y"}, 1),
        ("spec.subscriber.uri", "http://other.example/", 1),
        ("spec.delivery", {"retry": 1}, 1),
    ],
)
def test_trigger_generation(path: str, value: object, bump: int) -> None:
    first = admit_trigger(parse_trigger("default", TRIGGER, path_name=None), None, uid="u", now=NOW)
    assert (first.uid, first.generation) == ("u", 1)
    parsed = parse_trigger("default", patched(TRIGGER, path, value), path_name=None)
    second = admit_trigger(parsed, first, uid="v", now=NOW)
    assert (second.uid, second.generation) == ("u", 1 + bump)


def test_timestamps_must_be_aware() -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        format_timestamp(datetime(2026, 1, 1))
    assert format_timestamp(NOW.astimezone(UTC)) == "2026-01-02T03:04:05Z"


# --- effective delivery --------------------------------------------------------------------------


def test_trigger_delivery_replaces_the_brokers_whole() -> None:
    broker = parse_broker(
        "default",
        patched(BROKER, "spec.delivery", {"retry": 5, "deadLetterSink": {"uri": "http://b/"}}),
        path_name=None,
    )
    inherits = parse_trigger("default", TRIGGER, path_name=None)
    overrides = parse_trigger(
        "default", patched(TRIGGER, "spec.delivery", {"retry": 1}), path_name=None
    )
    empty = parse_trigger("default", patched(TRIGGER, "spec.delivery", {}), path_name=None)
    assert effective_delivery(inherits, broker) == broker.delivery
    assert effective_delivery(overrides, broker) == DeliverySpec(retry=1)  # no broker DLS
    assert effective_delivery(empty, broker) == DeliverySpec()
    assert effective_delivery(inherits, None) == DeliverySpec()


# --- JSON shapes ---------------------------------------------------------------------------------


def _stored_broker() -> Broker:
    body = patched(BROKER, "metadata.labels", {"team": "a"})
    body = patched(body, "spec.config", {"apiVersion": "v1", "kind": "ConfigMap", "name": "c"})
    return admit_broker(parse_broker("ns", body, path_name=None), None, uid="u-1", now=NOW)


def _stored_trigger(**spec: Any) -> Trigger:
    body = copy.deepcopy(TRIGGER)
    body["spec"].update(spec)
    return admit_trigger(parse_trigger("ns", body, path_name=None), None, uid="u-2", now=NOW)


def test_broker_json() -> None:
    status = {"observedGeneration": 1}
    assert BROKERS.to_json(_stored_broker(), status) == {
        "apiVersion": "eventing.knative.dev/v1",
        "kind": "Broker",
        "metadata": {
            "name": "default",
            "namespace": "ns",
            "uid": "u-1",
            "generation": 1,
            "creationTimestamp": "2026-01-02T03:04:05Z",
            "labels": {"team": "a"},
            "annotations": {BROKER_CLASS_ANNOTATION: "ServerlessBroker"},
        },
        "spec": {
            "config": {"apiVersion": "v1", "kind": "ConfigMap", "name": "c"},
            "delivery": {"retry": 10, "backoffPolicy": "exponential", "backoffDelay": "PT0.2S"},
        },
        "status": {"observedGeneration": 1},
    }


def test_trigger_json() -> None:
    trigger = _stored_trigger(delivery={"timeout": "PT10S", "format": "json"})
    assert TRIGGERS.to_json(trigger, {}) == {
        "apiVersion": "eventing.knative.dev/v1",
        "kind": "Trigger",
        "metadata": {
            "name": "orders",
            "namespace": "ns",
            "uid": "u-2",
            "generation": 1,
            "creationTimestamp": "2026-01-02T03:04:05Z",
        },
        "spec": {
            "broker": "default",
            "filter": {"attributes": {"type": "x"}},
            "subscriber": {"uri": "http://sub.example/orders"},
            "delivery": {"timeout": "PT10S", "format": "json"},
        },
        "status": {},
    }


def test_rendered_json_parses_back_to_the_same_resource() -> None:
    broker = _stored_broker()
    again = parse_broker("ns", BROKERS.to_json(broker, {}), path_name="default")
    assert (
        replace(again, uid="u-1", generation=1, creation_timestamp=broker.creation_timestamp)
        == broker
    )


def _no_floats(value: object) -> bool:
    if isinstance(value, dict):
        return all(_no_floats(v) for v in value.values())
    if isinstance(value, list):
        return all(_no_floats(v) for v in value)
    return not isinstance(value, float)


@pytest.mark.parametrize(
    "broker_delivery",
    [
        DELETE,
        {},
        {"retry": 0, "backoffPolicy": "linear", "backoffDelay": "PT1.5S", "timeout": "PT1M"},
        {"retryAfterMax": "PT2M", "deadLetterSink": {"uri": "http://d.example/"}, "format": "json"},
    ],
)
def test_broker_storage_round_trip(broker_delivery: object) -> None:
    body = patched(BROKER, "spec.delivery", broker_delivery)
    body = patched(body, f"metadata.annotations[{MAX_EVENT_BYTES_ANNOTATION}]", "2048")
    broker = admit_broker(parse_broker("ns", body, path_name=None), None, uid="u", now=NOW)
    item = json.loads(json.dumps(BROKERS.to_item(broker)))
    assert _no_floats(item)
    assert BROKERS.from_item(item) == broker
    assert BROKERS.from_item(item).max_event_bytes == 2048


@pytest.mark.parametrize(
    "spec",
    [
        {},
        {"filter": {}},
        {"filters": [{"prefix": {"type": "com.example."}}]},
        {"delivery": {"retry": 3, "backoffDelay": "PT0.5S", "backoffPolicy": "exponential"}},
        {"delivery": {}},
    ],
)
def test_trigger_storage_round_trip(spec: dict[str, Any]) -> None:
    trigger = _stored_trigger(**spec)
    item = json.loads(json.dumps(TRIGGERS.to_item(trigger)))
    assert _no_floats(item)
    assert TRIGGERS.from_item(item) == trigger


def test_corrupt_item() -> None:
    item = BROKERS.to_item(_stored_broker())
    item["spec"]["delivery"]["retry"] = -5
    with pytest.raises(ValueError, match="stored broker ns/default is invalid"):
        BROKERS.from_item(item)
    trigger_item = TRIGGERS.to_item(_stored_trigger())
    del trigger_item["spec"]["subscriber"]
    with pytest.raises(ValueError, match="stored trigger ns/orders is invalid"):
        TRIGGERS.from_item(trigger_item)


def test_ingress_url() -> None:
    assert ingress_url("http://127.0.0.1:8080/", "ns", "b") == "http://127.0.0.1:8080/ns/b"


@pytest.mark.parametrize("value", ["1", "1001", "ten", "", "0x10", "99999999999999999999"])
def test_max_concurrency_annotation_is_lambdas_range_on_brokers_and_triggers(value: str) -> None:
    field = "metadata.annotations[serverless-broker/max-concurrency]"
    for parse, doc in ((parse_broker, BROKER), (parse_trigger, TRIGGER)):
        body = patched(doc, field, value)
        with pytest.raises(ValidationError) as caught:
            parse("default", body, path_name=None)
        assert [p.field for p in caught.value.problems] == [field]
    for parse, doc in ((parse_broker, BROKER), (parse_trigger, TRIGGER)):
        ok = parse("default", patched(doc, field, "20"), path_name=None)
        assert ok.annotations["serverless-broker/max-concurrency"] == "20"
