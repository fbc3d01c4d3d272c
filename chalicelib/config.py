"""Settings, read once from the environment. Nothing else in chalicelib reads ``os.environ``."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field

APP_NAME = "serverless-broker"


def _bool(value: str | None, default: bool) -> bool:
    if value is None or value == "":
        return default
    return value.strip().lower() in {"1", "true", "yes", "on"}


@dataclass(frozen=True)
class Settings:
    """Every knob the Lambda functions and the local runtime read.

    Names of AWS resources default from the stage so that a bare ``local`` stage needs no variables.
    """

    stage: str = "local"
    region: str = "us-east-1"
    endpoint_url: str | None = None
    table_name: str = f"{APP_NAME}-local"
    queue_prefix: str = "sb-local-"
    archive_stream: str = f"{APP_NAME}-local-archive"
    archive_bucket: str = f"{APP_NAME}-local-archive"
    claim_bucket: str = f"{APP_NAME}-local-claims"
    claim_prefix: str = "claims/"
    delivery_function: str = f"{APP_NAME}-local-delivery"
    dead_letter_function: str = f"{APP_NAME}-local-dead_letter"
    kafka_function: str = f"{APP_NAME}-local-kafka_ingress"
    public_url: str = "http://127.0.0.1:8080"
    cache_ttl_seconds: float = 5.0
    metrics_enabled: bool = True
    local_mode: bool = True
    delivery_function_timeout_seconds: int = 60
    subscriber_allowlist: tuple[str, ...] = field(default_factory=tuple)
    # Where the metrics job writes its tables (s3://bucket/prefix/ or a local directory); the
    # registry reads the event types seen per broker from there. None: the ingress sample only.
    metrics_location: str | None = f"s3://{APP_NAME}-local-metrics/metrics/"

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        env = os.environ if env is None else env
        stage = env.get("BROKER_STAGE", "local")
        base = f"{APP_NAME}-{stage}"

        def get(name: str, default: str) -> str:
            return env.get(name) or default

        return cls(
            stage=stage,
            region=get("AWS_REGION", env.get("AWS_DEFAULT_REGION", "us-east-1")),
            endpoint_url=env.get("AWS_ENDPOINT_URL") or None,
            table_name=get("BROKER_TABLE", base),
            queue_prefix=get("BROKER_QUEUE_PREFIX", f"sb-{stage}-"),
            archive_stream=get("BROKER_ARCHIVE_STREAM", f"{base}-archive"),
            archive_bucket=get("BROKER_ARCHIVE_BUCKET", f"{base}-archive"),
            claim_bucket=get("BROKER_CLAIM_BUCKET", f"{base}-claims"),
            claim_prefix=get("BROKER_CLAIM_PREFIX", "claims/"),
            delivery_function=get("BROKER_DELIVERY_FUNCTION", f"{base}-delivery"),
            dead_letter_function=get("BROKER_DEAD_LETTER_FUNCTION", f"{base}-dead_letter"),
            kafka_function=get("BROKER_KAFKA_FUNCTION", f"{base}-kafka_ingress"),
            public_url=get("BROKER_PUBLIC_URL", "http://127.0.0.1:8080").rstrip("/"),
            cache_ttl_seconds=float(get("BROKER_CACHE_TTL_SECONDS", "5")),
            metrics_enabled=_bool(env.get("BROKER_METRICS_ENABLED"), True),
            local_mode=_bool(env.get("BROKER_LOCAL_MODE"), stage == "local"),
            delivery_function_timeout_seconds=int(get("BROKER_DELIVERY_TIMEOUT_SECONDS", "60")),
            metrics_location=env.get("BROKER_METRICS_LOCATION")
            or (f"s3://{base}-metrics/metrics/" if stage == "local" else None),
            subscriber_allowlist=tuple(
                s.strip()
                for s in env.get("BROKER_SUBSCRIBER_ALLOWLIST", "").split(",")
                if s.strip()
            ),
        )
