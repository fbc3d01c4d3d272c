"""Local mode's event-source pollers on the real moto endpoint: an idle queue stops polling until a
send through the process's client wakes it; a queue with a message in flight never goes idle; a
redrive into an idle dead-letter queue wakes its poller."""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from brokerctl import event_sources
from brokerctl.event_sources import SqsEventSources, _Mapping


class Recorder:
    def __init__(self, fail: bool = False) -> None:
        self.bodies: list[str] = []
        self.fail = fail
        self._lock = threading.Lock()

    def __call__(self, event: dict[str, Any], context: Any) -> Any:
        with self._lock:
            self.bodies.extend(r["body"] for r in event["Records"])
        if self.fail:
            raise RuntimeError("the subscriber is down")
        return None


class Sources(SqsEventSources):
    """The real supervisor, given its mappings instead of listing them from Lambda."""

    mappings: dict[str, _Mapping]

    def wanted(self) -> dict[str, Any]:
        return dict(self.mappings)


def _until(check: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


@pytest.fixture()
def quick(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(event_sources, "LONG_POLL_SECONDS", 1)
    monkeypatch.setattr(event_sources, "IDLE_AFTER_EMPTY_POLLS", 1)
    monkeypatch.setattr(event_sources, "IDLE_POLL_SECONDS", 300.0)


@pytest.fixture()
def make(aws_clients: Any, quick: None) -> Iterator[Callable[..., tuple[Sources, dict[str, str]]]]:
    started: list[Sources] = []
    sqs = aws_clients.client("sqs")

    def make(
        queues: dict[str, dict[str, str]], handlers: dict[str, Recorder]
    ) -> tuple[Sources, dict[str, str]]:
        urls = {}
        arns = {}
        for name, attributes in queues.items():
            urls[name] = sqs.create_queue(QueueName=name, Attributes=attributes)["QueueUrl"]
            arns[name] = sqs.get_queue_attributes(QueueUrl=urls[name], AttributeNames=["QueueArn"])[
                "Attributes"
            ]["QueueArn"]
        sources = Sources(
            aws_clients, {f"fn-{q}": h for q, h in handlers.items()}, "us-east-1", print
        )
        sources.mappings = {
            f"m-{q}": _Mapping(f"m-{q}", arns[q], f"fn-{q}", 10, False) for q in handlers
        }
        sources.watch_sends(sqs)
        sources.start()
        started.append(sources)
        return sources, urls

    yield make
    for sources in started:
        sources.stop()


def _poller(sources: Sources, queue: str) -> Any:
    return sources._by_queue[queue][0]


def _counting_receives(sources: Sources) -> list[str]:
    calls: list[str] = []
    sources.sqs_client.meta.events.register(
        "before-call.sqs.ReceiveMessage", lambda **kw: calls.append("receive")
    )
    return calls


def test_an_idle_queue_stops_polling_until_a_send_wakes_it(
    make: Callable[..., Any], aws_clients: Any
) -> None:
    q = f"idle-{uuid.uuid4().hex[:8]}"
    got = Recorder()
    sources, urls = make({q: {}}, {q: got})
    _until(_poller(sources, q).sleeping.is_set, 15, "the poller to go idle")
    receives = _counting_receives(sources)
    time.sleep(3)  # three long polls' worth of time: an idle poller makes no call at all
    assert receives == []
    aws_clients.client("sqs").send_message(QueueUrl=urls[q], MessageBody="hello")
    _until(lambda: got.bodies == ["hello"], 10, "the send to wake the idle poller")


def test_a_queue_with_a_message_in_flight_never_goes_idle(
    make: Callable[..., Any], aws_clients: Any
) -> None:
    q = f"busy-{uuid.uuid4().hex[:8]}"
    got = Recorder(fail=True)
    sources, urls = make({q: {"VisibilityTimeout": "2"}}, {q: got})
    _until(_poller(sources, q).sleeping.is_set, 15, "the poller to go idle")
    aws_clients.client("sqs").send_message(QueueUrl=urls[q], MessageBody="retry me")
    # Received, failed, invisible for 2 s: nothing wakes the poller when it shows again, so the
    # poller must still be polling (not asleep for IDLE_POLL_SECONDS) to receive it a second time.
    _until(lambda: len(got.bodies) >= 2, 20, "the redelivery after the visibility timeout")


def test_a_redrive_wakes_the_idle_dead_letter_queue(
    make: Callable[..., Any], aws_clients: Any
) -> None:
    q, dlq = f"src-{uuid.uuid4().hex[:8]}", f"dlq-{uuid.uuid4().hex[:8]}"
    sqs = aws_clients.client("sqs")
    dlq_arn = sqs.get_queue_attributes(
        QueueUrl=sqs.create_queue(QueueName=dlq)["QueueUrl"], AttributeNames=["QueueArn"]
    )["Attributes"]["QueueArn"]
    policy = json.dumps({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": 1})
    main, dead = Recorder(fail=True), Recorder()
    sources, urls = make(
        {dlq: {}, q: {"VisibilityTimeout": "1", "RedrivePolicy": policy}}, {q: main, dlq: dead}
    )
    _until(_poller(sources, dlq).sleeping.is_set, 15, "the DLQ poller to go idle")
    sqs.send_message(QueueUrl=urls[q], MessageBody="doomed")
    _until(lambda: dead.bodies == ["doomed"], 20, "the redriven message on the DLQ")
    assert main.bodies == ["doomed"]


def test_a_dlq_is_polled_only_while_its_trigger_has_a_dead_letter_sink(
    aws_settings: Any, aws_clients: Any, quick: None
) -> None:
    """Issue 32: a trigger's DLQ has an event source mapping only while the trigger has a
    dead-letter sink, and local mode's pollers follow the mappings that exist: the control plane
    provisions through the real Lambda and SQS APIs, and the supervisor lists them from Lambda."""
    from dataclasses import replace

    from brokerctl.bootstrap import bootstrap
    from chalicelib.container import Container

    settings = replace(aws_settings, queue_prefix=f"sb-{uuid.uuid4().hex[:6]}-")
    bootstrap(settings, aws_clients, say=lambda line: None)
    c = Container(settings)
    c.brokers.put("ns", "default", {"metadata": {"name": "default"}})

    def put_trigger(**delivery: Any) -> None:
        spec: dict[str, Any] = {"broker": "default", "subscriber": {"uri": "http://sub.example/"}}
        if delivery:
            spec["delivery"] = delivery
        c.triggers.put("ns", "tr", {"metadata": {"name": "tr"}, "spec": spec})

    handlers = {settings.delivery_function: Recorder(), settings.dead_letter_function: Recorder()}
    sources = SqsEventSources(aws_clients, handlers, settings.region, print)
    queue = c.provisioner.queue_names(("ns", "default", "tr"))[0]
    dlq = c.provisioner.dlq_of(("ns", "default", "tr"))

    def polled() -> set[str]:
        """The queues the supervisor polls (it keeps one poller per wanted mapping)."""
        wanted = sources.wanted().values()
        return {m.queue_arn.rsplit(":", 1)[-1] for m in wanted} & {queue, dlq}

    try:
        put_trigger()
        assert polled() == {queue}  # no sink: dead letters wait in the DLQ, unpolled
        put_trigger(deadLetterSink={"uri": "http://dls.example/"})
        assert polled() == {queue, dlq}
        put_trigger()  # the sink removed: its mapping goes, and so does the poller
        assert polled() == {queue}
    finally:
        c.triggers.delete("ns", "tr")
        c.brokers.delete("ns", "default")


def test_stopping_waits_for_the_batches_a_poller_is_running(
    make: Callable[..., tuple[Sources, dict[str, str]]], aws_clients: Any
) -> None:
    """In the embedded endpoint stopping does not wait out long polls, but a batch already being
    handled finishes before stop returns (its archive records and deletes go out while the
    endpoint still answers; before, they failed with 'could not connect' after it stopped)."""
    started, release, finished = threading.Event(), threading.Event(), threading.Event()

    class Slow(Recorder):
        def __call__(self, event: dict[str, Any], context: Any) -> Any:
            started.set()
            release.wait(10)
            finished.set()
            return super().__call__(event, context)

    queue = f"drain-{uuid.uuid4().hex[:8]}"
    sources, urls = make({queue: {}}, {queue: Slow()})
    sources.join_timeout = 0.0  # as in the embedded endpoint: long polls are not waited for
    aws_clients.client("sqs").send_message(QueueUrl=urls[queue], MessageBody="x")
    assert started.wait(10), "the batch never started"
    threading.Timer(0.3, release.set).start()
    sources.stop()
    assert finished.is_set(), "stop returned while a batch was still running"
