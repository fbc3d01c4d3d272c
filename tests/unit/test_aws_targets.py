"""AWS targets' pure parts (chalicelib/core/delivery/aws_targets.py): ARNs, the stage's patterns,
the error table, and Step Functions execution names."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from chalicelib.core.delivery.aws_targets import (
    allowed,
    arn_problems,
    classify_error,
    execution_name,
    parse_arn,
)
from chalicelib.core.delivery.outcomes import Outcome
from chalicelib.core.resources.delivery_spec import uri_problems

A = "arn:aws:{}:eu-west-1:123456789012:{}"


@pytest.mark.parametrize(
    ("arn", "service", "name"),
    [
        (A.format("lambda", "function:orders"), "lambda", "orders"),
        (A.format("lambda", "function:orders:live"), "lambda", "orders"),
        (A.format("lambda", "function:orders:$LATEST"), "lambda", "orders"),
        (A.format("sqs", "orders"), "sqs", "orders"),
        (A.format("sqs", "orders.fifo"), "sqs", "orders.fifo"),
        (A.format("sns", "alerts"), "sns", "alerts"),
        (A.format("states", "stateMachine:flow"), "states", "flow"),
        (A.format("events", "event-bus/default"), "events", "default"),
        (A.format("kinesis", "stream/clicks"), "kinesis", "clicks"),
        (A.format("firehose", "deliverystream/to-s3"), "firehose", "to-s3"),
        ("arn:aws-cn:sqs:cn-north-1:123456789012:q", "sqs", "q"),
    ],
)
def test_target_arns_are_read(arn: str, service: str, name: str) -> None:
    target = parse_arn(arn)
    assert target is not None
    assert (target.service, target.name) == (service, name)
    assert uri_problems(arn, "spec.subscriber.uri") == []


@pytest.mark.parametrize(
    ("arn", "says"),
    [
        (A.format("s3", "bucket"), "arn:aws:s3:::BUCKET"),  # a bucket's ARN names neither
        ("arn:aws:s3:::Bad_Bucket", "BUCKET (arn:aws:s3:::BUCKET)"),
        (A.format("lambda", "orders"), "function:NAME"),
        (A.format("lambda", "function:a:b:c"), "function:NAME"),
        (A.format("states", "execution:flow:x"), "stateMachine:NAME"),
        (A.format("sqs", "a/b"), "QUEUE"),
        ("arn:aws:sqs:eu-west-1:12345:q", "SERVICE one of"),  # an account has 12 digits
        ("arn:aws:sqs::123456789012:q", "SERVICE one of"),  # a region is required
        (A.format("sqs", "q") + "\n", "control characters"),
        ("arn:aws:sqs:eu-west-1:123456789012:" + "q" * 600, "SERVICE one of"),
    ],
)
def test_invalid_target_arns_name_the_problem(arn: str, says: str) -> None:
    problems = uri_problems(arn, "spec.subscriber.uri")
    assert len(problems) == 1 and problems[0].field == "spec.subscriber.uri"
    assert says in problems[0].message
    assert parse_arn(arn) is None


def test_arn_problems_only_for_arns() -> None:
    assert arn_problems(A.format("sqs", "q"), "p") == []


@pytest.mark.parametrize(
    ("arn", "patterns", "ok"),
    [
        (A.format("sqs", "orders-1"), ["arn:aws:sqs:eu-west-1:123456789012:orders-*"], True),
        (A.format("sqs", "billing"), ["arn:aws:sqs:eu-west-1:123456789012:orders-*"], False),
        (A.format("sqs", "orders-1"), ["arn:aws:sqs:*:123456789012:orders-?"], True),
        (A.format("sqs", "orders-12"), ["arn:aws:sqs:*:123456789012:orders-?"], False),
        (A.format("sns", "t"), ["arn:aws:sqs:*"], False),
        (A.format("lambda", "function:f"), ["arn:*"], True),
        (A.format("sqs", "q"), [], False),
        (A.format("sqs", "q"), ["arn:aws:sqs:eu-west-1:123456789012:[q]"], False),  # literal [
    ],
)
def test_stage_patterns_use_iam_wildcards(arn: str, patterns: list[str], ok: bool) -> None:
    assert allowed(arn, patterns) is ok


@pytest.mark.parametrize(
    ("code", "status", "outcome", "recorded"),
    [
        ("AccessDeniedException", 400, Outcome.DEAD_LETTER, 403),
        ("AuthorizationError", 403, Outcome.DEAD_LETTER, 403),  # SNS
        ("KMSAccessDeniedException", 400, Outcome.DEAD_LETTER, 403),
        ("ResourceNotFoundException", 404, Outcome.DEAD_LETTER, 404),
        ("AWS.SimpleQueueService.NonExistentQueue", 400, Outcome.DEAD_LETTER, 404),
        ("StateMachineDoesNotExist", 400, Outcome.DEAD_LETTER, 404),
        ("NotFound", 404, Outcome.DEAD_LETTER, 404),
        ("ValidationException", 400, Outcome.DEAD_LETTER, 400),
        ("InvalidParameterValue", 400, Outcome.DEAD_LETTER, 400),
        ("MalformedDetail", 400, Outcome.DEAD_LETTER, 400),
        ("ThrottlingException", 400, Outcome.RETRY, 429),
        ("TooManyRequestsException", 429, Outcome.RETRY, 429),
        ("ProvisionedThroughputExceededException", 400, Outcome.RETRY, 429),
        ("ServiceUnavailable", 503, Outcome.RETRY, 429),
        ("InternalFailure", 500, Outcome.RETRY, 500),
        ("ServiceException", 502, Outcome.RETRY, 502),
        ("Timeout", None, Outcome.RETRY, None),
        ("ConnectionError", None, Outcome.RETRY, None),
        ("FunctionError", 200, Outcome.RETRY, 502),
    ],
)
def test_error_table(code: str, status: int | None, outcome: Outcome, recorded: int) -> None:
    verdict = classify_error(code, status)
    assert (verdict.outcome, verdict.status) == (outcome, recorded)


_NAME = re.compile(r"[A-Za-z0-9_-]{1,80}")


@given(st.text(min_size=1, max_size=300), st.text(min_size=1, max_size=300))
def test_execution_names_are_valid_and_stable(source: str, event_id: str) -> None:
    name = execution_name(source, event_id)
    assert _NAME.fullmatch(name)
    assert name == execution_name(source, event_id)


def test_execution_names_tell_events_apart() -> None:
    names = {
        execution_name("s", "1"),
        execution_name("s", "2"),
        execution_name("t", "1"),
        execution_name("s1", ""),
        execution_name("s", "1" * 200),
        execution_name("s", "1" * 201),
    }
    assert len(names) == 6
    assert execution_name("/orders", "abc-1").startswith("abc-1-")
