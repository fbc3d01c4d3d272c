"""Settings, read once from the environment. Nothing else in chalicelib reads ``os.environ``.

Fail closed (design.md §5, §6): local mode removes the control plane's IAM authorization and the
subscriber address guard, so the environment never implies it. It takes both
``BROKER_STAGE=local`` and ``BROKER_LOCAL_MODE=true`` (``brokerctl dev`` and the ``local`` Chalice
stage set both). An environment without ``BROKER_STAGE`` reads as a deployment that forgot its
stage: not local mode, and ``Settings.require_runnable`` refuses it before any handler runs.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field

from chalicelib.core.senders import ALLOW_SAME_NAMESPACE, MODES

APP_NAME = "serverless-broker"
# The carry spool's directory on Lambda (the shutdown extension's default is the same).
SPOOL_DIR = "/tmp/broker-archive-spool"
# Where Lambda puts layers' extensions, and the shutdown extension that writes what a container
# carried (infra/spool_layer.py EXTENSION_NAME). Without it a function never carries.
EXTENSIONS_DIR = "/opt/extensions"
SPOOL_EXTENSION = "broker-archive-spool"


_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"0", "false", "no", "off"})


class ConfigurationError(Exception):
    """The function's environment cannot be run safely; raised before any handler runs. Not a
    BrokerError: it is the operator's to fix, and callers get an opaque 500."""


def _listed(value: str) -> tuple[str, ...]:
    """A comma-separated setting's items, blanks dropped."""
    return tuple(item.strip() for item in value.split(",") if item.strip())


def _bool(value: str | None, default: bool) -> bool:
    if value is None or value == "":
        return default
    return value.strip().lower() in _TRUE


@dataclass(frozen=True)
class Settings:
    """Every knob the Lambda functions and the local runtime read.

    Names of AWS resources default from the stage so that a bare ``local`` stage needs no variables.
    The dataclass defaults are the local stage in local mode, for code that builds Settings on
    purpose (tests, tools); ``from_env`` never defaults to local mode.
    """

    stage: str = "local"
    region: str = "us-east-1"
    endpoint_url: str | None = None
    table_name: str = f"{APP_NAME}-local"
    queue_prefix: str = "sb-local-"
    archive_stream: str = f"{APP_NAME}-local-archive"
    archive_bucket: str = f"{APP_NAME}-local-archive"
    claim_bucket: str = f"{APP_NAME}-local-claims"
    delivery_function: str = f"{APP_NAME}-local-delivery"
    dead_letter_function: str = f"{APP_NAME}-local-dead_letter"
    kafka_function: str = f"{APP_NAME}-local-kafka_ingress"
    public_url: str = "http://127.0.0.1:8080"
    cache_ttl_seconds: float = 5.0
    metrics_enabled: bool = True
    local_mode: bool = True
    delivery_function_timeout_seconds: int = 60
    # Requests of one delivery batch in flight at once (docs/delivery.md): a batch of ten at once.
    delivery_in_flight: int = 10
    # ScalingConfig.MaximumConcurrency of each trigger's SQS event source mapping unless its
    # trigger or broker says otherwise (annotation serverless-broker/max-concurrency): one busy
    # trigger cannot take the account's concurrency from the others. Lambda allows 2 to 1000.
    max_concurrency: int = 5
    # Whether delivery can reach Kafka (kafka:// subscribers and sinks): always in local mode;
    # deployed only when the stage says so (BROKER_KAFKA_DELIVERY=true, with the delivery
    # functions in the cluster's VPC, docs/deploy.md). Otherwise such triggers are a 400.
    kafka_delivery: bool = True
    # The producer's security (kafka-python's names): PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL;
    # with SASL, PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 and a Secrets Manager secret holding
    # {"username": ..., "password": ...}.
    kafka_security_protocol: str = "PLAINTEXT"
    kafka_sasl_mechanism: str | None = None
    kafka_secret_arn: str | None = None
    # Local mode with a local Kafka: the bootstrap address that serves MSK clusters (the control
    # plane commits a KafkaSource's initial offsets there, as the local poller reads there).
    kafka_msk_bootstrap: str | None = None
    # Archive records gathered across requests for this long before one write (services/
    # archiver.py); 0, the default for deployed functions: written before the function answers.
    archive_batch_seconds: float = 0.0
    # On Lambda: a warm container carries archive records to a later invocation for up to this
    # long (services/archiver.py, docs/cost.md); 0: written before the function answers.
    archive_carry_seconds: float = 0.0
    # Where carried archive records are also spooled for the shutdown extension (services/
    # archiver.py, infra/spool_extension/); None: not spooled. Defaults on Lambda when carrying.
    archive_spool_dir: str | None = None
    # Why carrying was asked for but is off (a Lambda function without the shutdown extension:
    # what it carried when reclaimed would be lost); None when it is as asked. Logged once.
    archive_carry_off: str | None = field(default=None, compare=False)
    subscriber_allowlist: tuple[str, ...] = field(default_factory=tuple)
    # Replays (docs/replay.md) start this long after their spec.to, when the archive holds every
    # record of the range: Firehose's buffer interval plus a margin (the template's
    # ArchiveBufferSeconds is 300), or the local runtime's archive batching plus a margin.
    replay_settle_seconds: float = 2.0
    # False: SQS event source mappings are created disabled, because something else consumes the
    # trigger queues (the local runtime's pollers, against an emulator such as LocalStack whose own
    # pollers would otherwise compete and spend receive counts, i.e. attempts).
    mappings_enabled: bool = True
    # Where the metrics job writes its tables (s3://bucket/prefix/ or a local directory); the
    # registry reads the event types seen per broker from there. None: the ingress sample only.
    metrics_location: str | None = f"s3://{APP_NAME}-local-metrics/metrics/"
    # What was wrong with the environment it was read from (empty when built in code); see
    # require_runnable. Not compared: two Settings with the same values are the same settings.
    problems: tuple[str, ...] = field(default=(), compare=False)
    # Run by the Lambda runtime (it names the function in AWS_LAMBDA_FUNCTION_NAME): logs are JSON
    # and invocations traced (chalicelib/logs.py). False in the local runtime and in tests.
    on_lambda: bool = False
    # A Function URL in front of the API function serves only the ingress and /healthz
    # (chalicelib/function_url.py; per stage: function_url.routes in .chalice/config.json).
    function_url_ingress_only: bool = False
    # The ARNs a subscriber or sink may name (docs/targets.md; per stage: target_arn_patterns in
    # .chalice/config.json, BROKER_TARGET_ARN_PATTERNS, comma-separated, IAM wildcards). Local
    # mode allows every ARN: its endpoint is the emulator's.
    target_arn_patterns: tuple[str, ...] = ("arn:*",)
    # The queue, bucket and stream ARNs an IntegrationSource may read (docs/sources.md; per stage:
    # source_arn_patterns in .chalice/config.json, BROKER_SOURCE_ARN_PATTERNS, comma-separated,
    # IAM wildcards; a stream's ARN is its table's plus /stream/*). Local mode allows every ARN.
    source_arn_patterns: tuple[str, ...] = ("arn:*",)
    # The alias of the asymmetric KMS key (ECC_NIST_P256) that signs delivery tokens (design.md
    # §2.5), named from the stage as the template names it (no setting of its own): the stack
    # makes the key, local mode's bootstrap makes it on its endpoint.
    signing_key: str = f"alias/{APP_NAME}-local-signing"
    # Who may send to a broker that authenticates its senders (ingress-auth: token) when no
    # EventPolicy applies to it (docs/security.md): allow-same-namespace, allow-all or deny-all.
    authorization_default_mode: str = ALLOW_SAME_NAMESPACE
    # The Secrets Manager name prefix of the secrets Connections may name (docs/targets.md), named
    # from the stage as infra/connection_policy.py names it (no setting of its own): the delivery,
    # dead_letter and API roles may read those only.
    connection_secret_prefix: str = f"{APP_NAME}/local/connections/"

    @classmethod
    def from_env(
        cls, env: Mapping[str, str] | None = None, *, extensions_dir: str = EXTENSIONS_DIR
    ) -> Settings:
        """``extensions_dir``: where Lambda keeps the layers' extensions (tests name another)."""
        env = os.environ if env is None else env
        stage = (env.get("BROKER_STAGE") or "").strip()
        problems = _environment_problems(env, stage)
        # Names still follow a stage when it is missing (so tools can show them), but nothing
        # runs on them: require_runnable refuses these settings.
        base = f"{APP_NAME}-{stage or 'unset'}"

        def get(name: str, default: str) -> str:
            return env.get(name) or default

        def number(name: str, default: str, kind: type[float] | type[int]) -> float | int:
            try:
                return kind(get(name, default))
            except ValueError:
                return kind(default)  # reported in problems: require_runnable refuses it

        carry = min(300.0, max(0.0, float(number("BROKER_ARCHIVE_CARRY_SECONDS", "0", float))))
        carry_off = _carry_off(env, carry, extensions_dir)
        every_arn = "arn:*" if _local_mode(env, stage) else ""  # local mode allows every ARN
        return cls(
            stage=stage,
            region=get("AWS_REGION", env.get("AWS_DEFAULT_REGION", "us-east-1")),
            endpoint_url=env.get("AWS_ENDPOINT_URL") or None,
            table_name=get("BROKER_TABLE", base),
            queue_prefix=get("BROKER_QUEUE_PREFIX", f"sb-{stage or 'unset'}-"),
            archive_stream=get("BROKER_ARCHIVE_STREAM", f"{base}-archive"),
            archive_bucket=get("BROKER_ARCHIVE_BUCKET", f"{base}-archive"),
            claim_bucket=get("BROKER_CLAIM_BUCKET", f"{base}-claims"),
            delivery_function=get("BROKER_DELIVERY_FUNCTION", f"{base}-delivery"),
            dead_letter_function=get("BROKER_DEAD_LETTER_FUNCTION", f"{base}-dead_letter"),
            kafka_function=get("BROKER_KAFKA_FUNCTION", f"{base}-kafka_ingress"),
            public_url=get("BROKER_PUBLIC_URL", "http://127.0.0.1:8080").rstrip("/"),
            cache_ttl_seconds=float(number("BROKER_CACHE_TTL_SECONDS", "5", float)),
            metrics_enabled=_bool(env.get("BROKER_METRICS_ENABLED"), True),
            local_mode=_local_mode(env, stage) and not problems,
            delivery_function_timeout_seconds=int(
                number("BROKER_DELIVERY_TIMEOUT_SECONDS", "60", int)
            ),
            delivery_in_flight=min(
                100, max(1, int(number("BROKER_DELIVERY_IN_FLIGHT", "10", int)))
            ),
            kafka_delivery=_bool(env.get("BROKER_KAFKA_DELIVERY"), _local_mode(env, stage)),
            kafka_security_protocol=get("BROKER_KAFKA_SECURITY_PROTOCOL", "PLAINTEXT").upper(),
            kafka_sasl_mechanism=env.get("BROKER_KAFKA_SASL_MECHANISM") or None,
            kafka_secret_arn=env.get("BROKER_KAFKA_SECRET_ARN") or None,
            kafka_msk_bootstrap=env.get("BROKER_KAFKA_MSK_BOOTSTRAP") or None,
            max_concurrency=min(1000, max(2, int(number("BROKER_MAX_CONCURRENCY", "5", int)))),
            archive_batch_seconds=max(
                0.0, float(number("BROKER_ARCHIVE_BATCH_SECONDS", "0", float))
            ),
            archive_carry_seconds=0.0 if carry_off else carry,
            archive_carry_off=carry_off,
            archive_spool_dir=env.get("BROKER_ARCHIVE_SPOOL_DIR")
            or (SPOOL_DIR if env.get("AWS_LAMBDA_FUNCTION_NAME") else None),
            replay_settle_seconds=max(
                0.0,
                float(
                    number(
                        "BROKER_REPLAY_SETTLE_SECONDS",
                        "2" if _local_mode(env, stage) else "360",
                        float,
                    )
                ),
            ),
            metrics_location=env.get("BROKER_METRICS_LOCATION")
            or (f"s3://{base}-metrics/metrics/" if stage == "local" else None),
            mappings_enabled=_bool(env.get("BROKER_MAPPINGS_ENABLED"), True),
            subscriber_allowlist=_listed(env.get("BROKER_SUBSCRIBER_ALLOWLIST", "")),
            signing_key=f"alias/{base}-signing",
            authorization_default_mode=(
                env.get("BROKER_AUTHORIZATION_DEFAULT_MODE") or ALLOW_SAME_NAMESPACE
            ),
            connection_secret_prefix=f"{APP_NAME}/{stage}/connections/",
            problems=problems,
            on_lambda=bool(env.get("AWS_LAMBDA_FUNCTION_NAME")),
            function_url_ingress_only=_bool(env.get("BROKER_FUNCTION_URL_INGRESS_ONLY"), False),
            target_arn_patterns=_listed(env.get("BROKER_TARGET_ARN_PATTERNS", every_arn)),
            source_arn_patterns=_listed(env.get("BROKER_SOURCE_ARN_PATTERNS", every_arn)),
        )

    @property
    def metrics_refresh_seconds(self) -> float:
        """How long the registry keeps the metrics job's event types before reading them again:
        the job runs hourly on AWS (a minute); locally ``brokerctl metrics`` may have just written
        the file (5 s)."""
        return 5.0 if self.local_mode else 60.0

    @property
    def pings_function(self) -> str:
        """The function EventBridge Scheduler invokes for the sources' schedules (app.py
        ``pings``; docs/sources.md), named from the stage as the template names it (no setting
        of its own). Schedules are named with ``queue_prefix``."""
        return f"{APP_NAME}-{self.stage}-pings"

    @property
    def sources_function(self) -> str:
        """The function IntegrationSources' mappings and rules invoke (app.py ``sources``;
        docs/sources.md), named from the stage as the template names it. Rules are named with
        ``queue_prefix``."""
        return f"{APP_NAME}-{self.stage}-sources"

    @property
    def scheduler_role(self) -> str:
        """The role Scheduler assumes to invoke it (the template's SchedulerRole)."""
        return f"{APP_NAME}-{self.stage}-{self.region}-scheduler"

    def require_runnable(self) -> Settings:
        """These settings, or a ConfigurationError naming every problem of the environment they
        were read from. The container calls it before building anything a handler uses."""
        if self.problems:
            raise ConfigurationError(
                "refusing to start: " + "; ".join(self.problems) + ". Local mode is explicit: "
                "`brokerctl dev` sets BROKER_STAGE=local and BROKER_LOCAL_MODE=true"
            )
        return self


def _carry_off(env: Mapping[str, str], carry: float, extensions_dir: str) -> str | None:
    """Why a carry of ``carry`` seconds cannot be honoured here, or None. On Lambda carrying needs
    the shutdown extension (docs/cost.md): a stage deployed without its layer (a bare ``chalice
    deploy``) answers every request after writing its archive records, as with a carry of 0."""
    if carry <= 0 or not env.get("AWS_LAMBDA_FUNCTION_NAME"):
        return None
    extension = os.path.join(extensions_dir, SPOOL_EXTENSION)
    if os.path.exists(extension):
        return None
    return (
        f"BROKER_ARCHIVE_CARRY_SECONDS={carry:g} ignored: no {extension} (the archive spool "
        "layer is not attached: infra/deploy.py attaches it), so archive records are written "
        "before each answer"
    )


def _local_mode(env: Mapping[str, str], stage: str) -> bool:
    return stage == "local" and (env.get("BROKER_LOCAL_MODE") or "").strip().lower() in _TRUE


def _environment_problems(env: Mapping[str, str], stage: str) -> tuple[str, ...]:
    problems: list[str] = []
    if not stage:
        problems.append("BROKER_STAGE is not set (every deployed function has its stage)")
    local = (env.get("BROKER_LOCAL_MODE") or "").strip().lower()
    if local and local not in _TRUE | _FALSE:
        problems.append(f"BROKER_LOCAL_MODE={local!r} is neither true nor false")
    if local in _TRUE and stage and stage != "local":
        # Local mode opens the control plane: never on a stage that may be deployed.
        problems.append(f"BROKER_LOCAL_MODE=true needs BROKER_STAGE=local, not {stage!r}")
    if not _bool(env.get("BROKER_MAPPINGS_ENABLED"), True) and not _local_mode(env, stage):
        # Disabled mappings deliver nothing unless a local runtime polls the queues itself.
        problems.append(
            "BROKER_MAPPINGS_ENABLED=false is for local mode only (nothing would deliver)"
        )
    mode = env.get("BROKER_AUTHORIZATION_DEFAULT_MODE")
    if mode and mode not in MODES:
        problems.append(
            f"BROKER_AUTHORIZATION_DEFAULT_MODE={mode[:40]!r} is not one of {', '.join(MODES)}"
        )
    for name, kind in (
        ("BROKER_CACHE_TTL_SECONDS", float),
        ("BROKER_DELIVERY_TIMEOUT_SECONDS", int),
        ("BROKER_ARCHIVE_BATCH_SECONDS", float),
        ("BROKER_REPLAY_SETTLE_SECONDS", float),
    ):
        value = env.get(name)
        if value:
            try:
                kind(value)
            except ValueError:
                problems.append(f"{name}={value[:40]!r} is not a number")
    return tuple(problems)
