"""Blobs on S3 (claim-checked events)."""

from __future__ import annotations

from typing import Any

from chalicelib.adapters.aws_clients import AwsClients
from chalicelib.adapters.aws_errors import translated


class S3Blobs:
    def __init__(self, clients: AwsClients) -> None:
        self._clients = clients

    @property
    def _s3(self) -> Any:
        return self._clients.client("s3")

    def put(self, bucket: str, key: str, data: bytes) -> None:
        with translated(f"put s3://{bucket}/{key}"):
            self._s3.put_object(Bucket=bucket, Key=key, Body=data)

    def get(self, bucket: str, key: str) -> bytes:
        with translated(f"get s3://{bucket}/{key}"):
            body: bytes = self._s3.get_object(Bucket=bucket, Key=key)["Body"].read()
        return body

    def delete(self, bucket: str, key: str) -> None:
        with translated(f"delete s3://{bucket}/{key}"):
            self._s3.delete_object(Bucket=bucket, Key=key)

    def list_keys(self, bucket: str, prefix: str, start_after: str, limit: int) -> list[str]:
        keys: list[str] = []
        token: str | None = None
        with translated(f"list s3://{bucket}/{prefix}"):
            while len(keys) < limit:
                kwargs: dict[str, Any] = {
                    "Bucket": bucket,
                    "Prefix": prefix,
                    "MaxKeys": min(1000, limit - len(keys)),
                }
                if token:
                    kwargs["ContinuationToken"] = token
                elif start_after:
                    kwargs["StartAfter"] = start_after
                page = self._s3.list_objects_v2(**kwargs)
                keys += [str(o["Key"]) for o in page.get("Contents", [])]
                token = page.get("NextContinuationToken")
                if not page.get("IsTruncated") or not token:
                    break
        return keys[:limit]
