"""The ``sources`` function's records: partial batch failures (one bad record among good ones is
named alone), what each record becomes, and to which IntegrationSource's sink it goes."""

import json
from typing import Any

import pytest

from chalicelib.core.errors import UnavailableError
from chalicelib.core.resources.integration_source import parse_integration_source
from chalicelib.services.integration_events import SourceEvents
from chalicelib.services.metrics import Metrics
from tests.unit.test_integration_records import DDB_RECORD, S3_EVENT, SQS_RECORD

QUEUE = SQS_RECORD["eventSourceARN"]
SINK = {"ref": {"apiVersion": "eventing.knative.dev/v1", "kind": "Broker", "name": "default"}}


def source(name: str, aws: dict[str, Any]) -> Any:
    body = {
        "apiVersion": "sources.knative.dev/v1alpha1",
        "kind": "IntegrationSource",
        "metadata": {"name": name},
        "spec": {"aws": aws, "sink": SINK},
    }
    return parse_integration_source("ns", body, path_name=name)


SOURCES = [
    source("q", {"sqs": {"arn": QUEUE}}),
    source("t", {"ddbStreams": {"table": "orders"}}),
    source("b", {"s3": {"arn": "arn:aws:s3:::example-bucket"}}),
]


class Sink:
    """Records what is sent; raises for the ids it is told are unavailable."""

    def __init__(self, unavailable: frozenset[str] = frozenset()) -> None:
        self.sent: list[tuple[Any, Any, Any]] = []
        self.unavailable = unavailable

    def __call__(self, sink: Any, sender: Any, event: Any) -> str | None:
        if event.id in self.unavailable:
            raise UnavailableError("the broker's store is throttled")
        self.sent.append((sink, sender, event))
        return None


def lookup(connector: str, resource: str) -> list[Any]:
    return [s for s in SOURCES if s.aws.connector == connector and s.aws.resource == resource]


def metrics_lines() -> tuple[Metrics, list[str]]:
    lines: list[str] = []
    return Metrics(enabled=True, sink=lines.append), lines


def sqs(message_id: str, body: str = '{"n": 1}') -> dict[str, Any]:
    return SQS_RECORD | {"messageId": message_id, "body": body}


def test_one_bad_record_among_good_ones_is_named_alone() -> None:
    sink, (metrics, lines) = Sink(), metrics_lines()
    bad = sqs("bad") | {"attributes": {"SentTimestamp": "not a time"}}
    answer = SourceEvents(lookup, sink, metrics).handle({"Records": [sqs("m1"), bad, sqs("m2")]})
    assert answer == {"batchItemFailures": [{"itemIdentifier": "bad"}]}
    assert [event.id for _, _, event in sink.sent] == ["m1", "m2"]
    assert any("source_failure_count" in line and '"record"' in line for line in lines)


def test_an_unavailable_sink_names_that_record_alone_and_the_rest_are_sent() -> None:
    sink = Sink(unavailable=frozenset({"m2"}))
    answer = SourceEvents(lookup, sink, Metrics(enabled=False)).handle(
        {"Records": [sqs("m1"), sqs("m2"), sqs("m3")]}
    )
    assert answer == {"batchItemFailures": [{"itemIdentifier": "m2"}]}
    assert [event.id for _, _, event in sink.sent] == ["m1", "m3"]


def test_each_record_goes_to_its_sources_sink_with_the_source_identity() -> None:
    sink = Sink()
    events = SourceEvents(lookup, sink, Metrics(enabled=False))
    assert events.handle({"Records": [sqs("m1"), DDB_RECORD]}) == {"batchItemFailures": []}
    assert events.handle(S3_EVENT) == {"sent": True}
    sent = {event.type: (target, sender, event) for target, sender, event in sink.sent}
    assert sent.keys() == {
        "dev.knative.connector.event.aws-sqs",
        "dev.knative.connector.event.aws-ddb-streams",
        "dev.knative.connector.event.aws-s3",
    }
    target, sender, event = sent["dev.knative.connector.event.aws-ddb-streams"]
    assert (target.namespace, target.broker) == ("ns", "default")
    assert sender == "source:ns:IntegrationSource:t"
    assert json.dumps(event.json_data["keys"]) == '{"Id": {"N": "101"}}'


def test_a_bad_stream_record_is_named_by_its_sequence_number() -> None:
    bad = DDB_RECORD | {"eventName": None}
    answer = SourceEvents(lookup, Sink(), Metrics(enabled=False)).handle({"Records": [bad]})
    assert answer == {"batchItemFailures": [{"itemIdentifier": "4421584500000000017450439091"}]}


def test_an_unavailable_sink_fails_the_s3_event_so_eventbridge_retries() -> None:
    events = SourceEvents(lookup, Sink(unavailable=frozenset({S3_EVENT["id"]})), Metrics(False))
    with pytest.raises(UnavailableError):
        events.handle(S3_EVENT)


def test_records_of_no_source_are_done_and_sent_nowhere() -> None:
    sink = Sink()
    other = sqs("m1") | {"eventSourceARN": "arn:aws:sqs:us-east-2:123456789012:other"}
    answer = SourceEvents(lookup, sink, Metrics(enabled=False)).handle({"Records": [other]})
    assert (answer, sink.sent) == ({"batchItemFailures": []}, [])
