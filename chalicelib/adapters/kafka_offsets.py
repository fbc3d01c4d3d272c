"""The committed offsets of a KafkaSource's consumer group, through kafka-python's admin client
(design.md §10).

Knative's KafkaSource commits its consumer group's initial offsets before it reports Ready, so
that a record produced once the source is Ready is read whenever the consumers join. Lambda does
the same for a group that has committed offsets: it then ignores the mapping's StartingPosition
and resumes from them. ``initialize`` commits, for each partition of the topic the group has no
offset for, the partition's log end (``latest``); partitions with an offset keep it, so a source
created again, or a group that already read, resumes where it was.

The connection is the one the mapping's poller makes: the source's bootstrap servers, or an MSK
cluster's (GetBootstrapBrokers; IAM when the cluster offers it), with the source's SASL or TLS
secrets. In local mode, as the local poller does, SASL and TLS are not used, and MSK clusters are
the local Kafka (``BROKER_KAFKA_MSK_BOOTSTRAP``).
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable, Mapping
from typing import Any

from chalicelib.adapters.aws_clients import AwsClients
from chalicelib.core.errors import UnavailableError
from chalicelib.core.resources.kafka_source import KafkaSource

CONNECT_TIMEOUT_MS = 5000  # the API's request must answer well within its 29 s


class AdminKafkaOffsets:
    def __init__(
        self, clients: AwsClients, *, local_mode: bool, msk_bootstrap: str | None = None
    ) -> None:
        self._clients = clients
        self._local = local_mode
        self._msk_bootstrap = msk_bootstrap

    def initialize(self, source: KafkaSource) -> int:
        from kafka import KafkaAdminClient

        where = f"topic {source.topic!r} of {source.cluster_id}"
        try:
            admin = KafkaAdminClient(
                **self._connection(source),
                client_id="serverless-broker-offsets",
                request_timeout_ms=CONNECT_TIMEOUT_MS,
                bootstrap_timeout_ms=CONNECT_TIMEOUT_MS,
            )
        except UnavailableError:
            raise
        except Exception as exc:  # kafka-python raises its own tree and OSErrors
            raise UnavailableError(f"cannot connect to {where}: {_what(exc)}") from exc
        try:
            return commit_log_end(admin, source.topic, source.consumer_group)
        except UnavailableError:
            raise
        except Exception as exc:
            detail = f"cannot commit the initial offsets of {where}: {_what(exc)}"
            raise UnavailableError(detail) from exc
        finally:
            admin.close()

    def _connection(self, source: KafkaSource) -> dict[str, Any]:
        if source.msk_cluster_arn is not None:
            if self._local:
                if self._msk_bootstrap is None:
                    raise UnavailableError(
                        "no local Kafka serves MSK clusters (brokerctl dev --kafka)"
                    )
                return {"bootstrap_servers": self._msk_bootstrap}
            return self._msk(source.msk_cluster_arn)
        config: dict[str, Any] = {"bootstrap_servers": list(source.bootstrap_servers)}
        if not self._local:
            config.update(security_config(source, self._secret))
        return config

    def _msk(self, arn: str) -> dict[str, Any]:
        try:
            found = self._clients.client("kafka").get_bootstrap_brokers(ClusterArn=arn)
        except Exception as exc:  # botocore's ClientError or a connection error
            raise UnavailableError(f"cannot read the bootstrap brokers of {arn}: {exc}") from exc
        if found.get("BootstrapBrokerStringSaslIam"):
            return {
                "bootstrap_servers": found["BootstrapBrokerStringSaslIam"].split(","),
                "security_protocol": "SASL_SSL",
                "sasl_mechanism": "AWS_MSK_IAM",
            }
        if found.get("BootstrapBrokerStringTls"):
            return {
                "bootstrap_servers": found["BootstrapBrokerStringTls"].split(","),
                "security_protocol": "SSL",
            }
        return {"bootstrap_servers": str(found.get("BootstrapBrokerString", "")).split(",")}

    def _secret(self, arn: str) -> Mapping[str, Any]:
        try:
            value = self._clients.client("secretsmanager").get_secret_value(SecretId=arn)
            doc = json.loads(value["SecretString"])
        except Exception as exc:
            raise UnavailableError(f"cannot read the secret {arn}: {type(exc).__name__}") from exc
        if not isinstance(doc, dict):
            raise UnavailableError(f"the secret {arn} is not a JSON object")
        return doc


def security_config(
    source: KafkaSource, secret: Callable[[str], Mapping[str, Any]]
) -> dict[str, Any]:
    """kafka-python's settings for a self-managed cluster, as Lambda connects with the source's
    access configurations: SASL (PLAIN or SCRAM) over TLS with the secret's username and password,
    TLS with the secret's client certificate (``certificate``, ``privateKey``) and root CA."""
    config: dict[str, Any] = {}
    if source.tls is not None:
        config["security_protocol"] = "SSL"
        if source.tls.ca_cert_secret_arn:
            config["ssl_cafile"] = _pem_file(secret(source.tls.ca_cert_secret_arn)["certificate"])
        if source.tls.cert_secret_arn:
            cert = secret(source.tls.cert_secret_arn)
            config["ssl_certfile"] = _pem_file(cert["certificate"])
            config["ssl_keyfile"] = _pem_file(cert["privateKey"])
            if cert.get("privateKeyPassword"):
                config["ssl_password"] = cert["privateKeyPassword"]
    if source.sasl is not None:
        credentials = secret(source.sasl.secret_arn)
        config.update(
            security_protocol="SASL_SSL",
            sasl_mechanism=source.sasl.type,
            sasl_plain_username=str(credentials.get("username", "")),
            sasl_plain_password=str(credentials.get("password", "")),
        )
    return config


def _pem_file(text: str) -> str:
    """kafka-python reads certificates from files: one private temporary file per PEM text."""
    with tempfile.NamedTemporaryFile("w", suffix=".pem", delete=False) as f:
        f.write(text)
    return f.name


def commit_log_end(admin: Any, topic: str, group: str) -> int:
    """Commit the log-end offset of every partition of ``topic`` that ``group`` has no committed
    offset for; how many were committed. UnavailableError when the topic has no partitions or a
    commit is refused (a group with active members refuses it)."""
    from kafka import TopicPartition
    from kafka.admin import OffsetSpec
    from kafka.errors import NoError
    from kafka.structs import OffsetAndMetadata

    [described] = admin.describe_topics([topic])
    partitions = [p["partition_index"] for p in described.get("partitions") or []]
    if described.get("error_code") or not partitions:
        raise UnavailableError(f"topic {topic!r} does not exist (or has no partitions) yet")
    tps = [TopicPartition(topic, p) for p in partitions]
    committed = admin.list_group_offsets({group: tps}).get(group, {})
    missing = [tp for tp in tps if tp not in committed or committed[tp].offset < 0]
    if not missing:
        return 0
    ends = admin.list_partition_offsets({tp: OffsetSpec.LATEST for tp in missing})
    offsets = {tp: OffsetAndMetadata(ends[tp].offset, "", -1) for tp in missing}
    refused = {tp: err for tp, err in admin.alter_group_offsets(group, offsets).items()
               if err is not NoError}  # fmt: skip
    if refused:
        errors = ", ".join(sorted({e.__name__ for e in refused.values()}))
        raise UnavailableError(f"group {group!r} refused the initial offsets: {errors}")
    return len(missing)


def _what(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"
