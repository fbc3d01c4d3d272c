"""AWS targets end to end on the local runtime (docs/targets.md): a trigger per target kind
delivers to a queue, a topic (read through its subscribed queue), a state machine (the
execution's input), an event bus (its rule's target queue), a Kinesis stream and a Firehose
delivery stream (its S3 objects) on the embedded endpoint; ``--function`` answers for a Lambda
ARN and its CloudEvent result is a reply; a missing target is not Ready (SubscriberNotFound) and
its events are dead-lettered at once with knativeerrorcode 404 to an ARN sink; IntegrationSinks
a trigger names by ref write to a queue, a bucket (one object per event) and the runtime's log."""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from chalicelib.adapters.aws_clients import AwsClients
from chalicelib.config import Settings
from tests.contract.test_aws_targets import AwsWorld
from tests.e2e.conftest import LocalBroker, start_local_broker, stop_local_broker, wait_until

pytestmark = pytest.mark.e2e

KINDS = ("sqs", "sqs-fifo", "sns", "states", "events", "kinesis", "firehose")
FUNCTION = "arn:aws:lambda:us-east-1:123456789012:function:replier"


@pytest.fixture(scope="module")
def runtime() -> Iterator[LocalBroker]:
    broker = start_local_broker(args=("--function", "replier=tests.e2e.aws_target_handlers:reply"))
    yield broker
    stop_local_broker(broker)
    print("\n--- local runtime output (last 200 lines) ---\n" + "\n".join(broker.lines[-200:]))


@pytest.fixture(scope="module")
def world(runtime: LocalBroker) -> AwsWorld:
    settings = Settings(endpoint_url=runtime.aws_url, region="us-east-1")
    return AwsWorld(settings, AwsClients(settings))


def _setup(runtime: LocalBroker) -> str:
    ns = f"t{uuid.uuid4().hex[:8]}"
    r = runtime.put(ns, "brokers", "default", {"metadata": {"name": "default"}})
    assert r.status_code in (200, 201), r.text
    runtime.wait_ready(ns, "brokers", "default")
    return ns


def _trigger(runtime: LocalBroker, ns: str, name: str, uri: str, type_: str, **spec: Any) -> None:
    body = {
        "metadata": {"name": name},
        "spec": {
            "broker": "default",
            "filter": {"attributes": {"type": type_}},
            "subscriber": {"uri": uri},
            **spec,
        },
    }
    r = runtime.put(ns, "triggers", name, body)
    assert r.status_code in (200, 201), r.text


def _send(runtime: LocalBroker, ns: str, type_: str, id_: str, data: Any) -> None:
    event = {"specversion": "1.0", "id": id_, "source": "/e2e", "type": type_, "data": data}
    r = httpx.post(
        f"{runtime.url}/{ns}/default",
        content=json.dumps(event),
        headers={"content-type": "application/cloudevents+json"},
        timeout=30,
    )
    assert r.status_code == 202, r.text


def test_every_target_kind_gets_its_event(runtime: LocalBroker, world: AwsWorld) -> None:
    ns = _setup(runtime)
    arns = {kind: world.create(kind) for kind in KINDS}
    for kind, arn in arns.items():
        _trigger(runtime, ns, kind.replace("-", ""), arn, f"to.{kind}")
    for kind in KINDS:
        runtime.wait_ready(ns, "triggers", kind.replace("-", ""))
    for kind in KINDS:
        _send(runtime, ns, f"to.{kind}", f"id-{kind}", {"kind": kind})
    for kind, arn in arns.items():
        got: list[dict[str, Any]] = []

        def arrived(arn: str = arn, got: list[dict[str, Any]] = got) -> bool:
            got.extend(world.arrived(arn))  # a queue's read hides what it read: kept here
            return bool(got)

        wait_until(arrived, 30, f"the event at {arn}")
        [event] = got
        assert event["id"] == f"id-{kind}" and event["data"] == {"kind": kind}, (kind, event)
        assert event["type"] == f"to.{kind}" and "knativebrokerttl" not in event


def test_a_local_function_answers_and_its_cloudevent_is_a_reply(
    runtime: LocalBroker, world: AwsWorld
) -> None:
    ns = _setup(runtime)
    replies = world.create("sqs")
    _trigger(runtime, ns, "fn", FUNCTION, "ask")
    _trigger(runtime, ns, "replies", replies, "reply.t")
    runtime.wait_ready(ns, "triggers", "fn")
    runtime.wait_ready(ns, "triggers", "replies")
    _send(runtime, ns, "ask", "q-1", "hello")
    [reply] = wait_until(lambda: world.arrived(replies), 30, "the function's reply")
    assert reply["id"] == "reply-q-1" and reply["source"] == "/lambda/replier"
    assert reply["data"] == {"seen": "hello", "remaining_ms": True}


def test_a_missing_target_is_not_ready_and_dead_letters_with_404(
    runtime: LocalBroker, world: AwsWorld
) -> None:
    ns = _setup(runtime)
    missing = "arn:aws:sqs:us-east-1:123456789012:does-not-exist"
    sink = world.create("sqs")
    delivery = {"deadLetterSink": {"uri": sink}, "retry": 5}
    _trigger(runtime, ns, "gone", missing, "lost", delivery=delivery)

    def reason() -> str | None:
        doc = httpx.get(f"{runtime.cp(ns)}/triggers/gone", timeout=10).json()
        found = {c["type"]: c for c in doc["status"]["conditions"]}
        return found["SubscriberResolved"].get("reason")

    assert wait_until(reason, 30, "the trigger's reason") == "SubscriberNotFound"
    # Not Ready, yet routed: its events go to its dead-letter sink at once.
    _send(runtime, ns, "lost", "l-1", "x")
    [dead] = wait_until(lambda: world.arrived(sink), 60, "the dead letter")
    assert dead["id"] == "l-1" and dead["knativeerrordest"] == missing
    assert dead["knativeerrorcode"] == 404
    data = json.loads(base64.b64decode(dead["knativeerrordata"]))
    assert data["code"] in ("AWS.SimpleQueueService.NonExistentQueue", "QueueDoesNotExist")


def test_integration_sinks_deliver_to_sqs_s3_and_the_log(
    runtime: LocalBroker, world: AwsWorld
) -> None:
    ns = _setup(runtime)
    queue, bucket = world.create("sqs"), world.create("s3")
    sinks = {
        "queue": {"aws": {"sqs": {"arn": queue, "region": "us-east-1"}}},
        "bucket": {"aws": {"s3": {"arn": bucket, "region": "us-east-1"}}},
        "log": {"log": {"loggerName": "e2e-orders", "level": "WARN", "showHeaders": True}},
    }
    base = f"{runtime.url}/apis/sinks.knative.dev/v1alpha1/namespaces/{ns}/integrationsinks"
    for name, spec in sinks.items():
        r = httpx.put(f"{base}/{name}", json={"metadata": {"name": name}, "spec": spec}, timeout=30)
        assert r.status_code == 201, r.text
        ref = {"apiVersion": "sinks.knative.dev/v1alpha1", "kind": "IntegrationSink", "name": name}
        body = {
            "metadata": {"name": name},
            "spec": {"filter": {"attributes": {"type": f"to.{name}"}}, "subscriber": {"ref": ref}},
        }
        assert runtime.put(ns, "triggers", name, body).status_code == 201
    for name in sinks:
        runtime.wait_ready(ns, "triggers", name)
        _send(runtime, ns, f"to.{name}", f"id-{name}", {"sink": name})
    [queued] = wait_until(lambda: world.arrived(queue), 30, "the queue sink's event")
    [stored] = wait_until(lambda: world.arrived(bucket), 30, "the bucket sink's object")
    assert queued["id"] == "id-queue" and stored["id"] == "id-bucket"
    assert stored["data"] == {"sink": "bucket"}
    said = "event id-log of type to.log from /e2e"
    wait_until(lambda: any(said in line for line in runtime.lines), 30, "the log sink's line")
