"""EventTransforms end to end on the local runtime (docs/transforms.md): a trigger whose subscriber
refers to a transform delivers the transformed event to a real HTTP sink; a transform without a
sink replies into the broker; a failing expression dead-letters the event with the reason."""

from __future__ import annotations

import base64
import json
import uuid
from typing import Any

import httpx
import pytest

from brokerctl.event_display import EventDisplay
from tests.e2e.conftest import LocalBroker, wait_until

pytestmark = pytest.mark.e2e

ET = "/apis/eventing.knative.dev/v1alpha1/namespaces"


def put_transform(broker: LocalBroker, ns: str, name: str, spec: dict[str, Any]) -> None:
    body = {"metadata": {"name": name}, "spec": spec}
    r = httpx.put(f"{broker.url}{ET}/{ns}/eventtransforms/{name}", json=body, timeout=30)
    assert r.status_code == 201, r.text


def ref_trigger(broker: LocalBroker, ns: str, name: str, type_: str, transform: str) -> None:
    ref = {"apiVersion": "eventing.knative.dev/v1alpha1", "kind": "EventTransform"}
    body = {
        "metadata": {"name": name},
        "spec": {
            "broker": "default",
            "filter": {"attributes": {"type": type_}},
            "subscriber": {"ref": {**ref, "name": transform}},
            "delivery": {"retry": 3},
        },
    }
    assert broker.put(ns, "triggers", name, body).status_code == 201


def test_transform_to_a_sink_as_a_reply_and_a_dead_letter(local_broker: LocalBroker) -> None:
    ns = f"tx-{uuid.uuid4().hex[:8]}"
    assert local_broker.put(ns, "brokers", "default", {"metadata": {"name": "default"}}).status_code
    with EventDisplay() as sink:
        summary = '{"type": "order.summary", "data": {"who": data.user, "twice": data.total * 2}}'
        put_transform(local_broker, ns, "to-sink", {"jsonata": {"expression": summary}})
        put_transform(
            local_broker,
            ns,
            "shout",
            {
                "jsonata": {
                    "expression": '{"type": "order.shouted", "data": $uppercase(data.user)}'
                },
            },
        )
        put_transform(local_broker, ns, "broken", {"jsonata": {"expression": '$error("no way")'}})
        # to-sink is created without a sink, then given one: delivery uses the update.
        put_sink = {"jsonata": {"expression": summary}, "sink": {"uri": sink.url}}
        r = httpx.put(
            f"{local_broker.url}{ET}/{ns}/eventtransforms/to-sink",
            json={"metadata": {"name": "to-sink"}, "spec": put_sink},
            timeout=30,
        )
        assert r.status_code == 200, r.text
        ref_trigger(local_broker, ns, "orders", "order", "to-sink")
        ref_trigger(local_broker, ns, "shouting", "shout", "shout")
        ref_trigger(local_broker, ns, "failing", "fail", "broken")
        plain = {
            "metadata": {"name": "shouted"},
            "spec": {
                "broker": "default",
                "filter": {"attributes": {"type": "order.shouted"}},
                "subscriber": {"uri": sink.url},
            },
        }
        assert local_broker.put(ns, "triggers", "shouted", plain).status_code == 201
        for name in ("orders", "shouting", "failing", "shouted"):
            local_broker.wait_ready(ns, "triggers", name)

        for type_ in ("order", "shout", "fail"):
            r = httpx.post(
                f"{local_broker.url}/{ns}/default",
                content=json.dumps({"user": "ana", "total": 21}),
                headers={
                    "ce-specversion": "1.0",
                    "ce-id": f"{type_}-1",
                    "ce-source": "/shop",
                    "ce-type": type_,
                    "content-type": "application/json",
                },
                timeout=30,
            )
            assert r.status_code == 202, r.text

        def types() -> set[str]:
            return {g.headers.get("ce-type", "") for g in sink.received}

        wait_until(lambda: {"order.summary", "order.shouted"} <= types(), 20, "both deliveries")
        by_type = {g.headers["ce-type"]: g for g in sink.received}
        summary_got = by_type["order.summary"]
        assert summary_got.headers["ce-id"] == "order-1"  # the merge rule
        assert json.loads(summary_got.body) == {"who": "ana", "twice": 42}
        shouted = by_type["order.shouted"]
        assert json.loads(shouted.body) == "ANA" and shouted.headers["ce-source"] == "/shop"

        def dead() -> list[dict[str, Any]]:
            url = f"{local_broker.cp(ns)}/triggers/failing/deadletters?limit=10"
            return list(httpx.get(url, timeout=30).json()["items"])

        [item] = wait_until(dead, 20, "the dead letter")
        reason = base64.b64decode(item["event"]["knativeerrordata"]).decode()
        assert "no way" in reason and item["event"]["type"] == "fail"
