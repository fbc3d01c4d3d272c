"""Archive on a Firehose delivery stream. Firehose's limits are kept here, since nothing else
(moto included) enforces them: a record ≤ 1,000 KiB, a PutRecordBatch ≤ 500 records and ≤ 4 MiB.
A record over the limit is not sent (it would fail the whole call, and with it the others).
Archive lines are packed into as few records as fit (``pack``: Firehose's 5 KiB rounding)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from chalicelib.adapters.aws_clients import AwsClients
from chalicelib.adapters.aws_errors import translated
from chalicelib.core.errors import UnavailableError

MAX_RECORDS = 500
MAX_BATCH_BYTES = 4 * 1024 * 1024
MAX_RECORD_BYTES = 1000 * 1024
PACK_BYTES = 256 * 1024  # a packed record's size: well under a record's 1,000 KiB
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
        packed = pack([r for r in records if len(r) <= MAX_RECORD_BYTES])
        for chunk in _chunks(packed):
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


def pack(lines: Sequence[bytes], limit: int = PACK_BYTES) -> list[bytes]:
    """Newline-terminated lines joined into as few Firehose records as fit ``limit`` each, in
    order. Firehose bills each record rounded up to 5 KiB and writes records to S3 back to back,
    so ten 1 KiB lines cost one 10 KiB record instead of ten 5 KiB ones, and S3 holds the same
    bytes. A line without its newline ends its record (nothing is glued to it)."""
    records: list[bytes] = []
    current: list[bytes] = []
    size = 0
    for line in lines:
        if current and size + len(line) > limit:
            records.append(b"".join(current))
            current, size = [], 0
        current.append(line)
        size += len(line)
        if not line.endswith(b"\n"):
            records.append(b"".join(current))
            current, size = [], 0
    if current:
        records.append(b"".join(current))
    return records


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
