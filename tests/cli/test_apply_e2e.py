"""``python -m brokerctl apply -f`` as a user runs it, against the local runtime (``brokerctl dev``
and its embedded AWS endpoint): the manifest corpus applies, applies again unchanged, and
``get -o yaml`` of every kind applies back unchanged through stdin (docs/manifests.md). One runtime
for the module."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cli.conftest import Result, run_brokerctl
from tests.e2e.conftest import start_local_broker, stop_local_broker

pytestmark = pytest.mark.e2e

CORPUS = Path(__file__).parents[1] / "fixtures" / "manifests"
# Every kind but the KafkaSource, which needs a Kafka cluster (brokerctl dev --kafka).
FILES = [
    "01-triggers-first.yaml",
    "02-broker.yaml",
    "03-subscriptions-api.yaml",
    "05-event-transform.json",
    "06-replay.yaml",
    "07-ping-source.yaml",
    "08-integration-sink.yaml",
    "09-connection.yaml",
    "10-event-policy.yaml",
    "11-integration-source.yaml",
]


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    broker = start_local_broker()
    yield broker.url
    stop_local_broker(broker)


def ctl(url: str, *argv: str, stdin: bytes | None = None) -> Result:
    env = {"BROKERCTL_URL": url, "BROKERCTL_NAMESPACE": "manifests"}
    return run_brokerctl(*argv, env=env, stdin=stdin)


def test_the_corpus_applies_unchanged_again_and_round_trips_through_get(url: str):
    files = [a for f in FILES for a in ("-f", str(CORPUS / f))]
    first = ctl(url, "apply", *files)
    assert first.code == 0, first.err
    assert all(line.endswith(" created") for line in first.out.splitlines()), first.out
    assert len(first.out.splitlines()) == 15

    again = ctl(url, "apply", *files)
    assert again.code == 0, again.err
    assert again.out.replace("unchanged", "created") == first.out

    kinds = ("brokers", "triggers", "eventtransforms", "replays", "pingsources")
    for kind in (*kinds, "integrationsinks", "connections", "eventpolicies", "integrationsources"):
        exported = ctl(url, "get", kind, "-o", "yaml")
        assert exported.code == 0, exported.err
        back = ctl(url, "apply", "-f", "-", stdin=exported.out.encode())
        assert back.code == 0, back.err
        assert back.out and all(line.endswith(" unchanged") for line in back.out.splitlines())
    assert ctl(url, "diff", *files).code == 0
