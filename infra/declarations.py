"""What the shared stack declares, in the form the local bootstrap applies with boto3.

FIRST VERSION, hand-written: to be derived from ``infra/template.yaml`` so that local mode and
AWS cannot drift (the deploy issue). The API (``Declarations`` and ``local_declarations``) stays.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from chalicelib.config import Settings


@dataclass(frozen=True)
class Declarations:
    table: dict[str, Any]  # CreateTable kwargs
    table_ttl_attribute: str | None
    buckets: list[str]
    stream: dict[str, Any]  # CreateDeliveryStream kwargs
    role_name: str
    functions: list[str] = field(default_factory=list)  # Lambda functions mappings may target


def local_declarations(settings: Settings, account_id: str = "123456789012") -> Declarations:
    role_name = f"{settings.table_name}-firehose"
    return Declarations(
        table={
            "TableName": settings.table_name,
            "KeySchema": [
                {"AttributeName": "pk", "KeyType": "HASH"},
                {"AttributeName": "sk", "KeyType": "RANGE"},
            ],
            "AttributeDefinitions": [
                {"AttributeName": "pk", "AttributeType": "S"},
                {"AttributeName": "sk", "AttributeType": "S"},
            ],
            "BillingMode": "PAY_PER_REQUEST",
        },
        table_ttl_attribute="expires_at",
        buckets=[settings.archive_bucket, settings.claim_bucket],
        stream={
            "DeliveryStreamName": settings.archive_stream,
            "DeliveryStreamType": "DirectPut",
            "ExtendedS3DestinationConfiguration": {
                "RoleARN": f"arn:aws:iam::{account_id}:role/{role_name}",
                "BucketARN": f"arn:aws:s3:::{settings.archive_bucket}",
                "Prefix": "archive/!{timestamp:yyyy/MM/dd/HH}/",
                "ErrorOutputPrefix": "archive-errors/!{firehose:error-output-type}/",
                "BufferingHints": {"SizeInMBs": 5, "IntervalInSeconds": 60},
                "CompressionFormat": "UNCOMPRESSED",
            },
        },
        role_name=role_name,
        functions=[
            settings.delivery_function,
            settings.dead_letter_function,
            settings.kafka_function,
        ],
    )
