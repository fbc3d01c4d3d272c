"""Patterns anchored with ``^…$`` and used with ``re.match`` let a trailing newline through
(``$`` matches before a final ``\\n``): names, SQS group ids, durations, topics and ids are
checked whole (issue 31, item 10)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from chalicelib.core import names
from chalicelib.core.delivery import ordering, policy
from chalicelib.core.errors import Problem
from chalicelib.core.resources import delivery_spec, durations, kafka_net
from chalicelib.services import tracing


@pytest.mark.parametrize("value", ["default\n", "a\n", "my-broker\n"])
def test_a_name_with_a_trailing_newline_is_refused(value: str) -> None:
    assert not names.is_dns1123_label(value)
    [problem] = names.name_problems(value, "metadata.name")
    assert "DNS-1123" in problem.message
    assert names.name_problems(value.rstrip("\n"), "metadata.name") == []


def test_a_prefix_and_an_owned_queue_are_matched_whole() -> None:
    with pytest.raises(ValueError):
        names.check_prefix("sb-\n")
    queue = names.queue_name("sb-", "ns", "b", "t")
    assert names.is_owned_queue("sb-", queue)
    assert not names.is_owned_queue("sb-", queue + "\n")


def test_a_partition_key_with_a_trailing_newline_is_hashed_not_used_as_a_group() -> None:
    assert ordering.message_group("key") == "key"
    assert ordering.message_group("key\n").startswith("sha256:")  # SQS would refuse "key\n"
    assert ordering.moved_dedup_id("id\n") == ordering.body_dedup_id("id\n")


def test_other_anchored_patterns_are_matched_whole() -> None:
    assert durations.parse_duration("PT5M") == 300.0
    with pytest.raises(ValueError):
        durations.parse_duration("PT5M\n")
    assert policy.parse_retry_after("5", _now()) == 5.0
    assert tracing.trace_id("00-" + "a" * 32 + "-" + "b" * 16 + "-01") == "a" * 32
    assert tracing.trace_id("00-" + "a" * 32 + "-" + "b" * 16 + "-01\n\n") is not None  # stripped
    assert delivery_spec.kafka_uri_problems("kafka://k:9092/topic", "uri") == []
    problems: list[Problem] = []
    kafka_net._ids(["subnet-0123abcd\n"], kafka_net._SUBNET, "spec.subnets", problems)
    assert problems


def _now() -> datetime:
    return datetime(2030, 1, 1, tzinfo=UTC)
