"""IntegrationSource: parsing (exactly one of timer, aws.sqs, aws.s3, aws.ddbStreams; every
problem said), its spec's JSON round trip, and its status."""

from datetime import UTC, datetime

import pytest

from chalicelib.core.errors import ValidationError
from chalicelib.core.resources.integration_source import (
    INTEGRATION_SOURCES,
    integration_source_status,
    parse_integration_source,
    spec_json,
)

NOW = datetime(2026, 11, 28, tzinfo=UTC)
SINK = {"ref": {"apiVersion": "eventing.knative.dev/v1", "kind": "Broker", "name": "default"}}
QUEUE = "arn:aws:sqs:eu-west-1:123456789012:orders"


def body(spec):
    return {
        "apiVersion": "sources.knative.dev/v1alpha1",
        "kind": "IntegrationSource",
        "metadata": {"name": "src"},
        "spec": spec | {"sink": SINK},
    }


def problems_of(spec):
    with pytest.raises(ValidationError) as caught:
        parse_integration_source("ns", body(spec), path_name="src")
    return {problem.field for problem in caught.value.problems}


@pytest.mark.parametrize(
    "spec",
    [
        {"timer": {"period": 2000, "message": "hi", "contentType": "text/plain"}},
        {"timer": {"period": 60000, "message": ""}},
        {"aws": {"sqs": {"arn": QUEUE, "region": "eu-west-1"}}},
        {"aws": {"s3": {"arn": "arn:aws:s3:::my-bucket", "region": "us-east-1"}}},
        {"aws": {"ddbStreams": {"table": "orders", "region": "us-east-1"}}},
    ],
)
def test_each_source_round_trips_through_its_spec_json(spec):
    source = parse_integration_source("ns", body(spec), path_name="src")
    assert spec_json(source) == spec | {"sink": SINK}


def test_sqs_region_defaults_to_the_arn_region():
    source = parse_integration_source("ns", body({"aws": {"sqs": {"arn": QUEUE}}}), path_name="src")
    assert source.aws is not None and source.aws.region == "eu-west-1"


@pytest.mark.parametrize(
    ("spec", "paths"),
    [
        ({}, {"spec"}),
        ({"timer": {"period": 1000, "message": "m"}, "aws": {"sqs": {"arn": QUEUE}}}, {"spec"}),
        ({"aws": {}}, {"spec.aws"}),
        ({"aws": {"sqs": {"arn": QUEUE}, "s3": {"arn": "arn:aws:s3:::b-1"}}}, {"spec.aws"}),
        ({"aws": {"sqs": {"arn": "orders"}}}, {"spec.aws.sqs.arn"}),
        ({"aws": {"sqs": {"arn": QUEUE, "region": "us-east-1"}}}, {"spec.aws.sqs.region"}),
        ({"aws": {"s3": {"arn": "arn:aws:s3:::B"}}}, {"spec.aws.s3.arn"}),
        (
            {"aws": {"ddbStreams": {"table": "x", "region": "mars"}}},
            {
                "spec.aws.ddbStreams.table",
                "spec.aws.ddbStreams.region",
            },
        ),
        ({"aws": {"sqs": {"arn": QUEUE}, "auth": {}}}, {"spec.aws.auth"}),
        (
            {"timer": {"period": 0, "message": 3, "contentType": "no"}},
            {
                "spec.timer.period",
                "spec.timer.message",
                "spec.timer.contentType",
            },
        ),
        ({"timer": {"period": True, "message": "m"}}, {"spec.timer.period"}),
        ({"timer": {"period": 10**40, "message": "m"}}, {"spec.timer.period"}),
        ({"timer": {"period": 1000, "message": "m", "repeatCount": 2}}, {"spec.timer.repeatCount"}),
    ],
)
def test_every_problem_is_named_at_its_field(spec, paths):
    assert paths <= problems_of(spec)


def test_status_is_not_ready_with_the_deploy_reason():
    source = INTEGRATION_SOURCES.admit(
        parse_integration_source("ns", body({"aws": {"sqs": {"arn": QUEUE}}}), path_name="src"),
        None,
        "uid-1",
        NOW,
    )
    status = integration_source_status(
        source,
        sink_uri="http://broker",
        deployed=False,
        deploy_reason="QueueDoesNotExist",
        deploy_message=f"{QUEUE} does not exist",
        now=NOW,
    )
    ready = next(c for c in status["conditions"] if c["type"] == "Ready")
    assert (ready["status"], ready["reason"]) == ("False", "QueueDoesNotExist")
    assert status["ceAttributes"] == [
        {
            "type": "dev.knative.connector.event.aws-sqs",
            "source": "dev.knative.eventing.aws-sqs-source",
        }
    ]


def test_timer_is_a_whole_seconds_rate_with_the_timer_event_and_source_sender():
    from chalicelib.core.cron import Rate
    from chalicelib.core.resources.integration_source import schedule_of

    timer = {"timer": {"period": 2000, "message": "tick", "contentType": "text/plain"}}
    schedule = schedule_of(parse_integration_source("ns", body(timer), path_name="src"))
    assert schedule.key == "integrationsource/ns/src"
    assert schedule.expression == Rate(2)
    assert schedule.sender == "source:ns:IntegrationSource:src"
    event = schedule.template.event("id-1", "2026-11-28T00:00:00Z")
    assert (event.type, event.source, event.data) == (
        "dev.knative.connector.event.timer",
        "dev.knative.eventing.timer-source",
        b"tick",
    )
    assert event.get("datacontenttype") == "text/plain"


@pytest.mark.parametrize("period", [999, 1500, 2001])
def test_timer_period_in_part_seconds_is_refused(period):
    assert "spec.timer.period" in problems_of({"timer": {"period": period, "message": "m"}})
