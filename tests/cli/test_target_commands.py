"""``brokerctl trigger create --sink arn:...`` (docs/targets.md): the ARN is the subscriber's uri,
and a dead-letter sink may be one too."""

from __future__ import annotations

from tests.cli.conftest import RecordingApi, Runner

QUEUE = "arn:aws:sqs:us-east-1:123456789012:orders"
TOPIC = "arn:aws:sns:us-east-1:123456789012:failed"


def test_trigger_create_with_an_arn_sink(api: RecordingApi, cli: Runner) -> None:
    r = cli("trigger", "create", "t", "-n", "shop", "--sink", QUEUE, "--dead-letter-sink", TOPIC)
    assert r.code == 0, r.err
    (seen,) = api.seen
    spec = seen.json()["spec"]
    assert spec["subscriber"] == {"uri": QUEUE}
    assert spec["delivery"]["deadLetterSink"] == {"uri": TOPIC}
