"""The pricing arithmetic of benchmarks/cost.py, on hand-counted shapes."""

from __future__ import annotations

from collections import Counter

import pytest

from benchmarks.cost import (
    ASSUMPTIONS,
    Shape,
    firehose_usd,
    idle_usd_per_trigger_month,
    lambda_usd,
    load_prices,
    memory_mb,
    price_eventbridge,
    price_shape,
)

PRICES = load_prices()


def test_the_price_table_is_dated_and_names_its_sources() -> None:
    assert PRICES["as_of"] >= "2026-01-01"
    for part in ("lambda", "sqs", "dynamodb", "firehose", "s3", "eventbridge", "api_gateway"):
        assert PRICES["sources"][part].startswith("https://")


def test_lambda_cost_is_requests_plus_gb_seconds() -> None:
    # a million 100 ms invocations at 1024 MB: $0.20 + 100,000 GB-s
    assert lambda_usd(1e6, 100, 1024, PRICES) == pytest.approx(0.20 + 1e5 * 0.0000166667)
    assert lambda_usd(1e6, 100, 512, PRICES) == pytest.approx(0.20 + 0.5e5 * 0.0000166667)


def test_firehose_rounds_each_record_up_to_5_kib() -> None:
    one_gb_of_5k = 1024**3 // 5120
    assert firehose_usd([1] * one_gb_of_5k, PRICES) == pytest.approx(0.029)
    assert firehose_usd([5121], PRICES) == pytest.approx(2 * firehose_usd([5120], PRICES))
    # ten 1 KiB lines in one record cost half of one 5 KiB record each, not one each
    assert firehose_usd([10 * 1024], PRICES) == pytest.approx(firehose_usd([1024] * 2, PRICES))


def test_memory_comes_from_the_chalice_config() -> None:
    assert memory_mb("api_handler") == 1024
    assert memory_mb("delivery") == 512


def _shape(**kw: object) -> Shape:
    calls: Counter[tuple[str, str, str]] = Counter(
        {("ingress", "sqs", "SendMessageBatch"): 1_000_000}
    )
    base: dict[str, object] = dict(
        name="s", events=1_000_000, requests=1_000_000, triggers=1, event_bytes=1024,
        delivered=1_000_000, calls=calls, sqs_chunks=1_000_000, firehose_records=[],
        delivery_invocations=0,
    )  # fmt: skip
    base.update(kw)
    return Shape(**base)  # type: ignore[arg-type]


def test_a_hand_priced_shape() -> None:
    a = dict(ASSUMPTIONS, ingress_base_ms=9.8, ingress_ms_per_event=0.2, aws_call_ms=0.0)
    got = price_shape(_shape(), PRICES, "function_url", a, ingress_mb=1024, delivery_mb=512)
    # ingress: 1M x (0.20/M + 10 ms x 1 GB); SQS: 1M requests; no delivery invocations counted
    assert got["front"] == 0
    assert got["ingress_lambda"] == pytest.approx(0.20 + 1e4 * 0.0000166667)
    assert got["sqs"] == pytest.approx(0.40)
    assert got["delivery_lambda"] == 0
    assert got["total"] == pytest.approx(sum(v for k, v in got.items() if k != "total"))
    rest = price_shape(_shape(), PRICES, "api_gateway_rest", a, ingress_mb=1024, delivery_mb=512)
    assert rest["total"] - got["total"] == pytest.approx(3.50)


def test_costs_are_per_million_delivered_so_more_triggers_share_the_request() -> None:
    front = "api_gateway_rest"
    one = price_shape(_shape(), PRICES, front, ingress_mb=1024, delivery_mb=512)
    five = price_shape(
        _shape(triggers=5, delivered=5_000_000), PRICES, front, ingress_mb=1024, delivery_mb=512
    )
    assert one["front"] == pytest.approx(3.50)
    assert five["front"] == pytest.approx(3.50 / 5)


def test_eventbridge_charges_per_64_kib_chunk_and_per_destination() -> None:
    assert price_eventbridge(1024, 1, PRICES) == pytest.approx(1.20)
    assert price_eventbridge(1024, 5, PRICES) == pytest.approx((1.00 + 5 * 0.20) / 5)
    assert price_eventbridge(65537, 1, PRICES) == pytest.approx(2.20)


def test_idle_trigger_cost_is_its_mappings_long_polls() -> None:
    # 1 mapping x 5 pollers x (30 days / 20 s) = 648,000 ReceiveMessage at $0.40/M; a trigger
    # with a dead-letter sink has its DLQ's mapping too
    assert idle_usd_per_trigger_month(PRICES) == pytest.approx(0.648 * 0.40)
    assert idle_usd_per_trigger_month(PRICES, sink=True) == pytest.approx(1.296 * 0.40)


def test_sends_are_priced_at_one_per_request_and_trigger_as_on_lambda() -> None:
    """Local mode coalesces concurrent requests' sends; a Lambda container cannot."""
    coalesced = Counter({("ingress", "sqs", "SendMessageBatch"): 200_000})
    one_per_request = price_shape(_shape(), PRICES, ingress_mb=1024, delivery_mb=512)
    got = price_shape(
        _shape(calls=coalesced, sqs_chunks=200_000), PRICES, ingress_mb=1024, delivery_mb=512
    )
    assert got["sqs"] == pytest.approx(one_per_request["sqs"])
    assert got["ingress_lambda"] == pytest.approx(one_per_request["ingress_lambda"])
