"""``spec.net`` of a KafkaSource (design.md §10): SASL, TLS and VPC settings, parsed with every
problem reported at once, and the Lambda access configurations they become."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from chalicelib.core.errors import Problem
from chalicelib.core.names import quote
from chalicelib.core.resources.fields import json_object as _object
from chalicelib.core.resources.fields import unknown_fields as _unknown

SASL_TYPES = {
    "PLAIN": "BASIC_AUTH",
    "SCRAM-SHA-256": "SASL_SCRAM_256_AUTH",
    "SCRAM-SHA-512": "SASL_SCRAM_512_AUTH",
}
MSK_SASL_TYPES = ("SCRAM-SHA-512",)  # MSK: SCRAM-512 or IAM (no access configuration)
CLIENT_CERTIFICATE = "CLIENT_CERTIFICATE_TLS_AUTH"
SERVER_ROOT_CA = "SERVER_ROOT_CA_CERTIFICATE"

_SECRET_ARN = re.compile(r"^arn:aws[a-z-]*:secretsmanager:[a-z0-9-]+:[0-9]{12}:secret:[\w/+=.@-]+$")
_SUBNET = re.compile(r"^subnet-[0-9a-f]{8,17}$")
_SECURITY_GROUP = re.compile(r"^sg-[0-9a-f]{8,17}$")


@dataclass(frozen=True, slots=True)
class Sasl:
    type: str  # a key of SASL_TYPES
    secret_arn: str


@dataclass(frozen=True, slots=True)
class Tls:
    ca_cert_secret_arn: str | None = None
    cert_secret_arn: str | None = None


def parse_net(
    raw: object, msk: bool, problems: list[Problem]
) -> tuple[Sasl | None, Tls | None, tuple[str, ...], tuple[str, ...]]:
    net = _object(raw, "spec.net", problems)
    _unknown(net, ("sasl", "tls", "vpc"), "spec.net", problems)
    sasl: Sasl | None = None
    raw_sasl = _object(net.get("sasl"), "spec.net.sasl", problems)
    _unknown(raw_sasl, ("enable", "type", "secretArn"), "spec.net.sasl", problems)
    if _enabled(raw_sasl, "spec.net.sasl", problems):
        allowed = MSK_SASL_TYPES if msk else tuple(SASL_TYPES)
        kind = raw_sasl.get("type")
        if kind not in allowed:
            problems.append(
                Problem(
                    "spec.net.sasl.type",
                    f"must be one of {', '.join(allowed)}"
                    + (" for MSK (IAM needs no setting)" if msk else "")
                    + f", got {quote(kind)}",
                )
            )
        secret = _secret(raw_sasl.get("secretArn"), "spec.net.sasl.secretArn", problems, True)
        if kind in allowed and secret is not None:
            sasl = Sasl(str(kind), secret)
    tls: Tls | None = None
    raw_tls = _object(net.get("tls"), "spec.net.tls", problems)
    _unknown(raw_tls, ("enable", "caCertSecretArn", "certSecretArn"), "spec.net.tls", problems)
    if _enabled(raw_tls, "spec.net.tls", problems):
        ca = _secret(raw_tls.get("caCertSecretArn"), "spec.net.tls.caCertSecretArn", problems)
        if ca is not None and msk:
            problems.append(
                Problem("spec.net.tls.caCertSecretArn", "MSK brokers use a CA Lambda trusts")
            )
        cert = _secret(raw_tls.get("certSecretArn"), "spec.net.tls.certSecretArn", problems)
        tls = Tls(ca, cert)
    raw_vpc = _object(net.get("vpc"), "spec.net.vpc", problems)
    _unknown(raw_vpc, ("subnets", "securityGroups"), "spec.net.vpc", problems)
    subnets = _ids(raw_vpc.get("subnets"), _SUBNET, "spec.net.vpc.subnets", problems)
    groups = _ids(raw_vpc.get("securityGroups"), _SECURITY_GROUP, "spec.net.vpc.securityGroups",
                  problems)  # fmt: skip
    if raw_vpc and msk:
        problems.append(Problem("spec.net.vpc", "MSK mappings take the cluster's own network"))
    elif bool(subnets) != bool(groups):
        problems.append(Problem("spec.net.vpc", "give both subnets and securityGroups"))
    return sasl, tls, subnets, groups


def _enabled(raw: Mapping[str, Any], path: str, problems: list[Problem]) -> bool:
    enable = raw.get("enable", bool(raw))
    if not isinstance(enable, bool):
        problems.append(Problem(f"{path}.enable", "must be true or false"))
        return False
    return enable


def _secret(
    value: object, path: str, problems: list[Problem], required: bool = False
) -> str | None:
    if value is None:
        if required:
            problems.append(Problem(path, "is required: the Secrets Manager ARN of the secret"))
        return None
    if not isinstance(value, str) or not _SECRET_ARN.fullmatch(value):
        problems.append(Problem(path, f"{quote(value)} is not a Secrets Manager secret ARN"))
        return None
    return value


def _ids(
    raw: object, pattern: re.Pattern[str], path: str, problems: list[Problem]
) -> tuple[str, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        problems.append(Problem(path, "must be a list"))
        return ()
    bad = [v for v in raw if not isinstance(v, str) or not pattern.fullmatch(v)]
    for value in bad:
        problems.append(Problem(path, f"{quote(value)} is not a valid id"))
    return () if bad else tuple(sorted(set(raw)))


def access_configurations(
    sasl: Sasl | None, tls: Tls | None, subnets: tuple[str, ...], security_groups: tuple[str, ...]
) -> tuple[tuple[str, str], ...]:
    """The mapping's SourceAccessConfigurations (Type, URI), sorted."""
    access: list[tuple[str, str]] = []
    if sasl is not None:
        access.append((SASL_TYPES[sasl.type], sasl.secret_arn))
    if tls is not None and tls.cert_secret_arn:
        access.append((CLIENT_CERTIFICATE, tls.cert_secret_arn))
    if tls is not None and tls.ca_cert_secret_arn:
        access.append((SERVER_ROOT_CA, tls.ca_cert_secret_arn))
    access += [("VPC_SUBNET", f"subnet:{s}") for s in subnets]
    access += [("VPC_SECURITY_GROUP", f"security_group:{g}") for g in security_groups]
    return tuple(sorted(access))
