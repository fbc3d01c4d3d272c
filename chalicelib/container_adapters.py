"""The ports' AWS adapters, each built once per warm container and only when first used (no client
at import time, and an adapter's module imported only by the function that uses it). ``Container``
(container.py) builds the services on them; the tests' harness puts the in-memory fakes here."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from chalicelib import logs
from chalicelib.adapters.aws_clients import AwsClients
from chalicelib.config import Settings
from chalicelib.ports import (
    Archive,
    AwsTargets,
    BlobListing,
    Blobs,
    HttpSender,
    KafkaOffsets,
    KafkaPublisher,
    Mappings,
    Queues,
    RateLimiter,
    ResourceStore,
    Secrets,
    SeenEvents,
)
from chalicelib.services.routing import ROUTING_KINDS

log = logs.get("ingress")


@dataclass
class Adapters:
    settings: Settings
    # What every service writes the archive through (set by ``tap_archive``); None: the adapter.
    _archive_tap: Callable[[Archive], Archive] | None = field(default=None, init=False, repr=False)
    _archive_built: bool = field(default=False, init=False, repr=False)

    def tap_archive(self, tap: Callable[[Archive], Archive]) -> None:
        """Make the archive ``tap(archive)`` (the local console's live tail sees every record).
        Only before the archive is first used: each service keeps the one it was built with."""
        if self._archive_built:
            raise RuntimeError("the archive is in use already: tap it before building services")
        self._archive_tap = tap

    @cached_property
    def clients(self) -> AwsClients:
        return AwsClients(self.settings)

    @cached_property
    def store(self) -> ResourceStore:
        from chalicelib.adapters.dynamodb_store import DynamoResourceStore

        # Only what a broker's routes are read from moves a namespace's epoch (routing.py):
        # the event-type samples written every minute would reload every broker's routes.
        return DynamoResourceStore(self.clients, self.settings.table_name, ROUTING_KINDS)

    @cached_property
    def seen_events(self) -> SeenEvents:
        from chalicelib.adapters.dynamodb_seen import DynamoSeenEvents

        return DynamoSeenEvents(self.clients, self.settings.table_name)

    @cached_property
    def queues(self) -> Queues:
        from chalicelib.adapters.sqs_queues import SqsQueues

        return SqsQueues(self.clients)

    @cached_property
    def mappings(self) -> Mappings:
        from chalicelib.adapters.lambda_mappings import LambdaMappings

        return LambdaMappings(self.clients)

    @cached_property
    def blobs(self) -> Blobs:
        from chalicelib.adapters.s3_blobs import S3Blobs

        return S3Blobs(self.clients)

    @cached_property
    def archive(self) -> Archive:
        from chalicelib.adapters.firehose_archive import FirehoseArchive

        self._archive_built = True
        if self.settings.archive_carry_off:
            log.warning(self.settings.archive_carry_off)
        archive: Archive = FirehoseArchive(self.clients, self.settings.archive_stream)
        if self._archive_tap is not None:
            archive = self._archive_tap(archive)
        spool_dir = self.settings.archive_spool_dir
        if spool_dir is None or self.settings.archive_carry_seconds <= 0:
            return archive
        # Carried records are spooled where the shutdown extension finds them (docs/cost.md).
        from chalicelib.adapters.archive_spool import FileSpool
        from chalicelib.services.archiver import SpooledArchive
        from chalicelib.services.late_archive import LateArchive

        # Carried records written late go to S3 under their own hour, where replays look.
        late = LateArchive(self.blobs, self.settings.archive_bucket)
        return SpooledArchive(archive, lambda role: FileSpool(spool_dir, role), late=late)

    @cached_property
    def sender(self) -> HttpSender:
        from chalicelib.adapters.http_sender import Urllib3Sender

        return Urllib3Sender(
            guard=not self.settings.local_mode, allowlist=self.settings.subscriber_allowlist
        )

    @cached_property
    def rate_limiter(self) -> RateLimiter:
        from chalicelib.adapters.dynamodb_rate import DynamoRateLimiter

        return DynamoRateLimiter(self.clients, self.settings.table_name)

    @cached_property
    def aws_targets(self) -> AwsTargets:  # ARN subscribers and sinks (docs/targets.md)
        from chalicelib.adapters.aws_targets import Boto3Targets

        return Boto3Targets(self.settings)

    @cached_property
    def secrets(self) -> Secrets:
        from chalicelib.adapters.secretsmanager_secrets import SecretsManagerSecrets

        return SecretsManagerSecrets(self.clients)

    @cached_property
    def blob_listing(self) -> BlobListing:
        from chalicelib.adapters.s3_blobs import S3Blobs

        return S3Blobs(self.clients)

    @cached_property
    def kafka_publisher(self) -> KafkaPublisher:
        from chalicelib.adapters.kafka_publisher import KafkaProducerPublisher, security_config

        settings = self.settings

        def credentials() -> dict[str, Any]:
            assert settings.kafka_secret_arn is not None
            secrets = self.clients.client("secretsmanager")
            value = secrets.get_secret_value(SecretId=settings.kafka_secret_arn)["SecretString"]
            parsed: dict[str, Any] = json.loads(value)
            return parsed

        return KafkaProducerPublisher(
            guard=not settings.local_mode,
            allowlist=settings.subscriber_allowlist,
            security=lambda: security_config(
                settings.kafka_security_protocol,
                settings.kafka_sasl_mechanism,
                credentials if settings.kafka_secret_arn else None,
            ),
        )

    @cached_property
    def kafka_offsets(self) -> KafkaOffsets:
        from chalicelib.adapters.kafka_offsets import AdminKafkaOffsets

        return AdminKafkaOffsets(
            self.clients,
            local_mode=self.settings.local_mode,
            msk_bootstrap=self.settings.kafka_msk_bootstrap,
        )
