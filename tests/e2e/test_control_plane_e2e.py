"""Control-plane lifecycles on the local runtime: trigger before broker, delete and recreate,
drift repaired by the reconciler, dead letters listed and redriven."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import boto3
import httpx
import pytest

from brokerctl.event_display import EventDisplay, Reply
from chalicelib.core import names
from tests.e2e.conftest import LocalBroker, start_local_broker, stop_local_broker, wait_until

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def broker() -> Iterator[LocalBroker]:
    b = start_local_broker({"BROKER_RECONCILE_SECONDS": "1"})
    yield b
    stop_local_broker(b)


def conditions(doc: dict[str, Any]) -> dict[str, str]:
    return {c["type"]: c["status"] for c in doc["status"]["conditions"]}


def get(b: LocalBroker, ns: str, kind: str, name: str) -> dict[str, Any]:
    r = httpx.get(f"{b.cp(ns)}/{kind}/{name}", timeout=10)
    assert r.status_code == 200, r.text
    return dict(r.json())


def trigger_body(name: str, uri: str, **delivery: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {"broker": "default", "subscriber": {"uri": uri}}
    if delivery:
        spec["delivery"] = delivery
    return {"metadata": {"name": name}, "spec": spec}


def send(b: LocalBroker, ns: str, id_: str) -> None:
    r = httpx.post(
        f"{b.url}/{ns}/default",
        content=b"x",
        headers={
            "ce-specversion": "1.0",
            "ce-id": id_,
            "ce-source": "/e2e",
            "ce-type": "t",
            "content-type": "text/plain",
        },
    )
    assert r.status_code == 202, r.text


def sqs(b: LocalBroker) -> Any:
    return boto3.client("sqs", endpoint_url=b.aws_url, region_name="us-east-1")


def test_trigger_before_broker_then_delivery(broker: LocalBroker) -> None:
    ns = f"c-{uuid.uuid4().hex[:8]}"
    with EventDisplay() as sub:
        assert (
            broker.put(ns, "triggers", "early", trigger_body("early", sub.url)).status_code == 201
        )
        doc = get(broker, ns, "triggers", "early")
        assert conditions(doc)["BrokerReady"] == "False"
        assert conditions(doc)["Ready"] == "False"
        assert (
            broker.put(ns, "brokers", "default", {"metadata": {"name": "default"}}).status_code
            == 201
        )
        broker.wait_ready(ns, "triggers", "early")
        send(broker, ns, "after-broker")
        assert sub.wait_for(lambda got: len(got) == 1, 30)


def test_delete_and_recreate_broker(broker: LocalBroker) -> None:
    ns = f"c-{uuid.uuid4().hex[:8]}"
    with EventDisplay() as sub:
        broker.put(ns, "brokers", "default", {"metadata": {"name": "default"}})
        broker.put(ns, "triggers", "t", trigger_body("t", sub.url))
        broker.wait_ready(ns, "triggers", "t")
        queue = names.queue_name("sb-local-", ns, "default", "t")
        assert httpx.delete(f"{broker.cp(ns)}/brokers/default").status_code == 200
        doc = get(broker, ns, "triggers", "t")
        assert conditions(doc)["Ready"] == "False"
        # Gone at once; a reconciler run that read the broker just before the delete may plan its
        # queues back, and its next run (every second here) removes them again.
        wait_until(
            lambda: sqs(broker).list_queues(QueueNamePrefix=queue).get("QueueUrls", []) == [],
            10,
            "the trigger's queues to be removed with its broker",
        )
        wait_until(
            lambda: (
                httpx.post(
                    f"{broker.url}/{ns}/default",
                    content=b"x",
                    headers={
                        "ce-specversion": "1.0",
                        "ce-id": "gone",
                        "ce-source": "/s",
                        "ce-type": "t",
                    },
                ).status_code
                == 404
            ),
            10,
            "the ingress to forget the broker",
        )
        broker.put(ns, "brokers", "default", {"metadata": {"name": "default"}})
        broker.wait_ready(ns, "triggers", "t")
        send(broker, ns, "recreated")
        assert sub.wait_for(lambda got: [g.headers["ce-id"] for g in got] == ["recreated"], 30)


def test_reconciler_repairs_a_deleted_queue_and_mapping(broker: LocalBroker) -> None:
    ns = f"c-{uuid.uuid4().hex[:8]}"
    with EventDisplay() as sub:
        broker.put(ns, "brokers", "default", {"metadata": {"name": "default"}})
        broker.put(ns, "triggers", "t", trigger_body("t", sub.url))
        broker.wait_ready(ns, "triggers", "t")
        queue = names.queue_name("sb-local-", ns, "default", "t")
        client = sqs(broker)
        lam = boto3.client("lambda", endpoint_url=broker.aws_url, region_name="us-east-1")
        url = client.get_queue_url(QueueName=queue)["QueueUrl"]
        for m in lam.list_event_source_mappings(FunctionName="serverless-broker-local-delivery")[
            "EventSourceMappings"
        ]:
            if m["EventSourceArn"].endswith(":" + queue):
                lam.delete_event_source_mapping(UUID=m["UUID"])
        client.delete_queue(QueueUrl=url)

        def repaired() -> bool:
            try:
                client.get_queue_url(QueueName=queue)
            except client.exceptions.QueueDoesNotExist:
                return False
            return conditions(get(broker, ns, "triggers", "t"))["Ready"] == "True"

        wait_until(repaired, 30, "the reconciler to recreate the queue")
        send(broker, ns, "after-repair")
        assert sub.wait_for(lambda got: len(got) == 1, 30)
        assert any("reconciler repaired drift" in line for line in broker.lines)


def test_dead_letters_list_and_redrive(broker: LocalBroker) -> None:
    ns = f"c-{uuid.uuid4().hex[:8]}"
    healthy = {"on": False}

    def answer(got: Any, n: int) -> Reply:
        return Reply(202 if healthy["on"] else 400)

    with EventDisplay(responder=answer) as sub:
        broker.put(ns, "brokers", "default", {"metadata": {"name": "default"}})
        broker.put(ns, "triggers", "t", trigger_body("t", sub.url, retry=0))
        broker.wait_ready(ns, "triggers", "t")
        for i in range(3):
            send(broker, ns, f"dl-{i}")
        base = f"{broker.cp(ns)}/triggers/t/deadletters"
        wait_until(lambda: httpx.get(base).json()["count"] == 3, 30, "3 dead letters")
        assert httpx.get(base).json()["count"] == 3  # listing did not consume them
        healthy["on"] = True
        r = httpx.post(f"{base}/redrive")
        assert r.status_code == 202 and r.json()["redriven"] == 3
        assert sub.wait_for(lambda got: len(got) == 6, 30)
        ids = sorted(g.headers["ce-id"] for g in sub.received[3:])
        assert ids == ["dl-0", "dl-1", "dl-2"]
        assert all("ce-knativeerrorcode" not in g.headers for g in sub.received[3:])
        assert httpx.get(base).json()["count"] == 0
