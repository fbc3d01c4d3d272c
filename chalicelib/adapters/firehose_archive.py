"""Archive on a Firehose delivery stream. Firehose's limits are kept here, since nothing else
(moto included) enforces them: a record ≤ 1,000 KiB, a PutRecordBatch ≤ 500 records and ≤ 4 MiB.
A record over the limit is not sent (it would fail the whole call, and with it the others)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from chalicelib.adapters.aws_clients import AwsClients
from chalicelib.adapters.aws_errors import translated
from chalicelib.core.errors import UnavailableError

MAX_RECORDS = 500
MAX_BATCH_BYTES = 4 * 1024 * 1024
MAX_RECORD_BYTES = 1000 * 1024
_MAX_BYTES = MAX_BATCH_BYTES - 64 * 1024  # room for the request's own JSON and base64 framing


class FirehoseArchive:
    def __init__(self, clients: AwsClients, stream: str) -> None:
        self._clients = clients
        self._stream = stream

    @property
    def _firehose(self) -> Any:
        return self._clients.client("firehose")

    def put(self, records: Sequence[bytes]) -> None:
        oversize = [r for r in records if len(r) > MAX_RECORD_BYTES]
        for chunk in _chunks([r for r in records if len(r) <= MAX_RECORD_BYTES]):
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
        if oversize:
            raise UnavailableError(
                f"archive: {len(oversize)} records over Firehose's {MAX_RECORD_BYTES} bytes"
                " not sent"
            )


def _chunks(records: Sequence[bytes]) -> list[list[bytes]]:
    chunks: list[list[bytes]] = []
    current: list[bytes] = []
    size = 0
    for record in records:
        if current and (len(current) == MAX_RECORDS or size + len(record) > _MAX_BYTES):
            chunks.append(current)
            current, size = [], 0
        current.append(record)
        size += len(record)
    if current:
        chunks.append(current)
    return chunks
