import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from chalicelib.core.names import (
    MAX_QUEUE_NAME_LENGTH,
    dlq_name,
    is_dns1123_label,
    is_owned_queue,
    name_problems,
    namespace_problems,
    queue_name,
    quote,
    trigger_hash,
)

SQS_NAME = re.compile(r"^[A-Za-z0-9_-]{1,80}$")
labels = st.from_regex(r"\A[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?\Z")


@pytest.mark.parametrize("name", ["a", "default", "my-broker", "0", "a1-b2", "a" * 63])
def test_valid_labels(name: str) -> None:
    assert is_dns1123_label(name)
    assert name_problems(name, "metadata.name") == []


@pytest.mark.parametrize(
    ("name", "fragment"),
    [
        ("", "is required"),
        (None, "is required"),
        (3, "is required"),
        ("a" * 64, "longer than 63"),
        ("My-Broker", "DNS-1123"),
        ("-a", "DNS-1123"),
        ("a-", "DNS-1123"),
        ("a_b", "DNS-1123"),
        ("a.b", "DNS-1123"),
        ("ä", "DNS-1123"),
    ],
)
def test_invalid_labels(name: object, fragment: str) -> None:
    (problem,) = name_problems(name, "metadata.name")
    assert problem.field == "metadata.name"
    assert fragment in problem.message
    if isinstance(name, str) and name:
        assert not is_dns1123_label(name)


@pytest.mark.parametrize("namespace", ["apis", "registry", "healthz", "metrics"])
def test_reserved_namespaces(namespace: str) -> None:
    (problem,) = namespace_problems(namespace)
    assert problem.field == "metadata.namespace"
    assert f'namespace "{namespace}" is reserved' in problem.message


def test_ordinary_namespace() -> None:
    assert namespace_problems("default") == []
    assert namespace_problems("Bad")[0].field == "metadata.namespace"


def test_queue_names_are_readable_and_stable() -> None:
    name = queue_name("sb-local-", "default", "default", "orders")
    assert name == f"sb-local-orders-{trigger_hash('default', 'default', 'orders')}"
    assert re.fullmatch(r"sb-local-orders-[0-9a-f]{16}", name)
    assert dlq_name("sb-local-", "default", "default", "orders") == name + "-dlq"
    assert queue_name("sb-local-", "default", "default", "orders") == name


def test_hash_covers_namespace_broker_and_trigger() -> None:
    names = {
        queue_name("sb-", "a", "b", "c"),
        queue_name("sb-", "x", "b", "c"),
        queue_name("sb-", "a", "x", "c"),
        queue_name("sb-", "a", "b-c", ""),  # "/" keeps the parts apart
    }
    assert len(names) == 4


def test_long_names_are_truncated_without_a_trailing_dash() -> None:
    trigger = "a" * 45 + "-" + "b" * 17
    name = dlq_name("sb-production-eu-west-1-", "ns", "broker", trigger)
    assert len(name) <= MAX_QUEUE_NAME_LENGTH
    assert "--" not in name


@given(prefix=st.from_regex(r"\A[A-Za-z0-9_-]{0,40}\Z"), ns=labels, broker=labels, trigger=labels)
def test_names_always_fit_sqs(prefix: str, ns: str, broker: str, trigger: str) -> None:
    queue = queue_name(prefix, ns, broker, trigger)
    dlq = dlq_name(prefix, ns, broker, trigger)
    for name in (queue, dlq):
        assert SQS_NAME.match(name)
        assert name.startswith(prefix)
    assert trigger[:10].rstrip("-") in queue
    assert is_owned_queue(prefix, queue) and is_owned_queue(prefix, dlq)


@pytest.mark.parametrize("prefix", ["sb local", "sb.local-", "x" * 41])
def test_bad_prefix(prefix: str) -> None:
    with pytest.raises(ValueError, match="queue prefix"):
        queue_name(prefix, "a", "b", "c")


@pytest.mark.parametrize(
    ("name", "owned"),
    [
        ("sb-local-orders-0123456789abcdef", True),
        ("sb-local-orders-0123456789abcdef-dlq", True),
        ("sb-local-orders", False),  # made by hand, not by us
        ("sb-local-orders-0123456789abcdeg", False),
        ("other-orders-0123456789abcdef", False),
    ],
)
def test_owned_queue(name: str, owned: bool) -> None:
    assert is_owned_queue("sb-local-", name) is owned


@pytest.mark.parametrize(
    ("value", "text"),
    [("B", '"B"'), (3, "3"), (None, "null"), ("é", '"é"'), ("x" * 200, '"' + "x" * 78 + "…")],
)
def test_quote(value: object, text: str) -> None:
    assert quote(value) == text
