"""The producer's Kafka security settings (chalicelib/adapters/kafka_publisher.py)."""

from __future__ import annotations

import pytest

from chalicelib.adapters.kafka_publisher import security_config


def test_plaintext_and_tls_need_no_secret() -> None:
    assert security_config("PLAINTEXT", None, None) == {"security_protocol": "PLAINTEXT"}
    assert security_config("SSL", None, None) == {"security_protocol": "SSL"}


def test_sasl_reads_the_secret_once_and_passes_the_mechanism() -> None:
    reads: list[int] = []

    def secret() -> dict[str, str]:
        reads.append(1)
        return {"username": "broker", "password": "s3cret"}

    config = security_config("SASL_SSL", "SCRAM-SHA-512", secret)
    assert config == {
        "security_protocol": "SASL_SSL",
        "sasl_mechanism": "SCRAM-SHA-512",
        "sasl_plain_username": "broker",
        "sasl_plain_password": "s3cret",
    }
    assert reads == [1]


@pytest.mark.parametrize(
    ("protocol", "mechanism", "secret", "message"),
    [
        ("TLS", None, None, "SECURITY_PROTOCOL"),
        ("SASL_SSL", None, lambda: {}, "SASL_MECHANISM"),
        ("SASL_SSL", "SCRAM-SHA-512", None, "SECRET_ARN"),
        ("SASL_SSL", "GSSAPI", lambda: {}, "SASL_MECHANISM"),
        ("SASL_SSL", "PLAIN", lambda: {"username": "u"}, "username and password"),
    ],
)
def test_what_is_missing_is_named(
    protocol: str, mechanism: str | None, secret, message: str
) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ValueError, match=message):
        security_config(protocol, mechanism, secret)
