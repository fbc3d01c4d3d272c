"""Archive on a Firehose delivery stream (PutRecordBatch: ≤ 500 records, ≤ 4 MiB per call)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from chalicelib.adapters.aws_clients import AwsClients
from chalicelib.adapters.aws_errors import translated
from chalicelib.core.errors import UnavailableError

_MAX_RECORDS = 500
_MAX_BYTES = 4 * 1024 * 1024 - 64 * 1024


class FirehoseArchive:
    def __init__(self, clients: AwsClients, stream: str) -> None:
        self._clients = clients
        self._stream = stream

    @property
    def _firehose(self) -> Any:
        return self._clients.client("firehose")

    def put(self, records: Sequence[bytes]) -> None:
        for chunk in _chunks(records):
            pending = list(chunk)
            for _ in range(3):
                with translated(f"archive to {self._stream}"):
                    out = self._firehose.put_record_batch(
                        DeliveryStreamName=self._stream, Records=[{"Data": r} for r in pending]
                    )
                if not out.get("FailedPutCount"):
                    break
                pending = [
                    r
                    for r, res in zip(pending, out["RequestResponses"], strict=True)
                    if res.get("ErrorCode")
                ]
            else:
                raise UnavailableError(f"archive: {len(pending)} records not accepted by Firehose")


def _chunks(records: Sequence[bytes]) -> list[list[bytes]]:
    chunks: list[list[bytes]] = []
    current: list[bytes] = []
    size = 0
    for record in records:
        if current and (len(current) == _MAX_RECORDS or size + len(record) > _MAX_BYTES):
            chunks.append(current)
            current, size = [], 0
        current.append(record)
        size += len(record)
    if current:
        chunks.append(current)
    return chunks
