"""``core/limits.py``: numbers and JSON from outside give a value or a ValidationError naming the
field — never ValueError, OverflowError or RecursionError (issue 16, defect 2)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from chalicelib.core import limits
from chalicelib.core.delivery import policy as delivery_policy
from chalicelib.core.errors import ValidationError


@pytest.mark.parametrize(
    "text", ["1" * 5000, "0" * 5000 + "1" + "0" * 5000, "-" + "9" * 400, "1e5", "", "½", "0x10"]
)
def test_read_int_refuses_with_a_problem(text: str) -> None:
    with pytest.raises(ValidationError) as err:
        limits.read_int(text, "limit")
    assert [p.field for p in err.value.problems] == ["limit"]


def test_read_int_reads_and_bounds() -> None:
    assert limits.read_int(" 0042 ", "n") == 42
    assert limits.read_int("0" * 50 + "7", "n") == 7
    with pytest.raises(ValidationError):
        limits.read_int("1001", "n", low=1, high=1000)


@pytest.mark.parametrize(
    "body",
    [
        b"[" * 100_000 + b"]" * 100_000,  # RecursionError in json.loads
        b"[" * 990 + b"]" * 990,
        b'{"a": ' * 65 + b"1" + b"}" * 65,
        b'{"spec": {"delivery": {"retry": ' + b"1" * 5000 + b"}}}",  # int() refuses 4300+
        b'{"n": 1e999}',
        b'{"n": NaN}',
        b'{"n": -Infinity}',
        b"\xff\xfe",
        b'{"a": "' + b"x" * (limits.MAX_JSON_BYTES + 1) + b'"}',
    ],
)
def test_read_json_refuses_with_a_problem(body: bytes) -> None:
    with pytest.raises(ValidationError) as err:
        limits.read_json(body)
    assert [p.field for p in err.value.problems] == ["body"]


def test_read_json_counts_depth_outside_strings_only() -> None:
    text = '{"a": "' + "[" * 500 + '\\"' + "{" * 500 + '", "b": [[1]]}'
    assert limits.json_depth(text) == 3
    assert limits.read_json(text.encode())["b"] == [[1]]


@pytest.mark.parametrize("value", ["9" * 400, "1" * 5000, "0" * 4000 + "5"])
def test_retry_after_of_any_length_is_a_bounded_wait(value: str) -> None:
    now = datetime(2026, 1, 1, tzinfo=UTC)
    seconds = delivery_policy.parse_retry_after(value, now)
    assert seconds is not None and 0 <= seconds <= delivery_policy.MAX_BACKOFF_SECONDS
