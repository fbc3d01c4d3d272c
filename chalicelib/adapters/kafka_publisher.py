"""KafkaPublisher on kafka-python: one producer per bootstrap address per warm container, built on
first use, ``acks=all`` so a record counts as delivered only once every in-sync replica has it.
Every failure (no broker, timeout, a broker error) is a result, never an exception: delivery treats
it as a retryable transport error."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from chalicelib.adapters.addresses import refusal
from chalicelib.core.cloudevents.kafka_binding import KafkaRecord
from chalicelib.ports import PublishResult

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


def security_config(
    protocol: str, mechanism: str | None, credentials: Callable[[], Mapping[str, Any]] | None
) -> dict[str, Any]:
    """kafka-python's producer settings for the stage's Kafka security (``Settings.kafka_*``);
    ValueError naming what is wrong. ``credentials`` reads the SASL user and password (a Secrets
    Manager secret), called only when SASL is on."""
    if protocol not in SECURITY_PROTOCOLS:
        raise ValueError(f"BROKER_KAFKA_SECURITY_PROTOCOL must be one of {SECURITY_PROTOCOLS}")
    config: dict[str, Any] = {"security_protocol": protocol}
    if not protocol.startswith("SASL_"):
        return config
    if mechanism not in SASL_MECHANISMS or credentials is None:
        raise ValueError(
            f"{protocol} needs BROKER_KAFKA_SASL_MECHANISM (one of {SASL_MECHANISMS}) and "
            "BROKER_KAFKA_SECRET_ARN (a secret holding username and password)"
        )
    secret = credentials()
    if not isinstance(secret.get("username"), str) or not isinstance(secret.get("password"), str):
        raise ValueError("the Kafka secret must hold a JSON object with username and password")
    config.update(
        sasl_mechanism=mechanism,
        sasl_plain_username=secret["username"],
        sasl_plain_password=secret["password"],
    )
    return config


class KafkaProducerPublisher:
    def __init__(
        self,
        client_id: str = "serverless-broker",
        *,
        guard: bool = False,
        allowlist: tuple[str, ...] = (),
        security: Callable[[], Mapping[str, Any]] = dict,
        **producer_config: Any,
    ) -> None:
        self._client_id = client_id
        # The HTTP subscribers' address guard, for kafka:// subscribers and sinks: checked on
        # the bootstrap servers before any producer connects to them.
        self._guard = guard
        self._allowlist = allowlist
        self._config = producer_config
        # The producer's security settings, read when the first producer is built (a SASL
        # secret is fetched then, not at import or for deployments that never publish).
        self._security = security
        self._producers: dict[str, Any] = {}
        self._lock = threading.Lock()

    def publish(
        self, bootstrap_servers: str, topic: str, record: KafkaRecord, timeout: float
    ) -> PublishResult:
        started = time.perf_counter()
        if self._guard:
            for server in bootstrap_servers.split(","):
                host, _, port = server.strip().rpartition(":")
                why = refusal(
                    host or server, int(port) if port.isdigit() else 9092, self._allowlist
                )
                if why is not None:
                    return PublishResult(False, f"refused: {why}", 0.0)
        try:
            producer = self._producer(bootstrap_servers, timeout)
            key = record.key
            if key is None and record.value is None:
                # kafka-python refuses a record with neither key nor value, which is how the
                # binding writes an event without data and without a partitionkey: an empty
                # key keeps the value null (no data) at the cost of a fixed partition.
                key = b""
            future = producer.send(topic, value=record.value, key=key, headers=list(record.headers))
            future.get(timeout=timeout)
        except Exception as exc:  # kafka-python raises many types; all mean "not acknowledged"
            return PublishResult(
                False, f"{type(exc).__name__}: {exc}", (time.perf_counter() - started) * 1000
            )
        return PublishResult(True, None, (time.perf_counter() - started) * 1000)

    def _producer(self, bootstrap_servers: str, timeout: float) -> Any:
        with self._lock:
            producer = self._producers.get(bootstrap_servers)
            if producer is None:
                from kafka import KafkaProducer

                ms = max(1000, int(timeout * 1000))
                config: dict[str, Any] = {
                    "bootstrap_servers": bootstrap_servers.split(","),
                    "client_id": self._client_id,
                    "acks": "all",
                    "linger_ms": 0,
                    "max_block_ms": ms,
                    "reconnect_backoff_max_ms": 1000,
                    # Known up front, kafka-python does not connect in the constructor, which
                    # would leak its sockets when the cluster is unreachable (it raises before
                    # the producer exists to be closed). Every supported MSK version has 2.8.
                    "api_version": (2, 8),
                    "request_timeout_ms": ms,
                    "delivery_timeout_ms": ms + 1000,  # must exceed linger + request timeout
                    **self._security(),
                    **self._config,
                }
                producer = KafkaProducer(**config)
                self._producers[bootstrap_servers] = producer
            return producer

    def close(self) -> None:
        with self._lock:
            producers, self._producers = list(self._producers.values()), {}
        for producer in producers:
            producer.close(timeout=5)
