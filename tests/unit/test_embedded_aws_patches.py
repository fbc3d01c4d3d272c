"""The embedded endpoint's changes to moto keep SQS's answers: here the queue attributes computed
on demand against the dict moto builds, for every kind of queue and message state."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from moto.sqs import models

from brokerctl import embedded_aws


@pytest.fixture()
def patched() -> Iterator[None]:
    saved = models.Queue.attributes
    embedded_aws._compute_queue_attributes_on_demand()
    try:
        yield
    finally:
        models.Queue.attributes = saved  # type: ignore[method-assign]
        del models.Queue.attributes_as_moto_builds_them  # type: ignore[attr-defined]


@pytest.fixture()
def backend() -> Iterator[models.SQSBackend]:
    # moto finds a dead-letter queue through its registry of backends: an account of our own.
    backend = models.sqs_backends["000000000042"]["us-east-1"]
    yield backend
    backend.reset()


def _queues(backend: models.SQSBackend) -> list[models.Queue]:
    dlq = backend.create_queue("dlq")
    return [
        backend.create_queue("plain"),
        backend.create_queue("fifo.fifo", FifoQueue="true", ContentBasedDeduplication="true"),
        backend.create_queue("kms", KmsMasterKeyId="alias/k"),
        backend.create_queue(
            "redriven",
            RedrivePolicy=json.dumps({"deadLetterTargetArn": dlq.queue_arn, "maxReceiveCount": 3}),
            Policy=json.dumps({"Version": "2012-10-17", "Statement": []}),
            DelaySeconds="2",
        ),
        dlq,
    ]


def test_attributes_read_on_demand_equal_the_ones_moto_builds(
    patched: None, backend: models.SQSBackend
) -> None:
    for queue in _queues(backend):
        for i in range(5):
            group = {"group_id": "g", "deduplication_id": f"d{i}"} if queue.fifo_queue else {}
            backend.send_message(queue.name, f"m{i}", **group)
        backend.receive_message(queue.name, 2, 0, 30)  # two in flight
        built = queue.attributes_as_moto_builds_them
        lazy = queue.attributes
        assert dict(lazy) == built, queue.name
        assert lazy == built and len(lazy) == len(built)
        assert lazy.get("ContentBasedDeduplication") == built.get("ContentBasedDeduplication")
        assert "NoSuchAttribute" not in lazy and lazy.get("NoSuchAttribute") is None
    plain = backend.get_queue("plain")
    assert plain.attributes["ApproximateNumberOfMessagesNotVisible"] == 2


def test_moto_behaviour_that_reads_attributes_is_unchanged(
    patched: None, backend: models.SQSBackend
) -> None:
    fifo = backend.create_queue("f.fifo", FifoQueue="true", ContentBasedDeduplication="true")
    backend.send_message(fifo.name, "same", group_id="g")
    backend.send_message(fifo.name, "same", group_id="g")  # deduplicated by content
    assert fifo.attributes["ApproximateNumberOfMessages"] == 1
    backend.create_queue("q", VisibilityTimeout="30")
    backend.create_queue("q", VisibilityTimeout="30")  # same attributes: the same queue
    with pytest.raises(models.QueueAlreadyExists):
        backend.create_queue("q", VisibilityTimeout="60")
    got = backend.get_queue_attributes("q", ["All"])
    assert got["VisibilityTimeout"] == 30 and "QueueArn" in got
    assert backend.get_queue_attributes("q", ["DelaySeconds"]) == {"DelaySeconds": 0}
