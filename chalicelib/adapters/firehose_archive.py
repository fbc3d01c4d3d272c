"""Archive on a Firehose delivery stream. Firehose's limits are kept here, since nothing else
(moto included) enforces them: a record ≤ 1,000 KiB, a PutRecordBatch ≤ 500 records and ≤ 4 MiB.
A record over the limit is not sent (it would fail the whole call, and with it the others).
Archive lines are packed into as few records as fit (``pack``: Firehose's 5 KiB rounding).

One attempt per call: a call that fails, and each record Firehose refuses in a call that succeeds
(FailedPutCount, a per-record ErrorCode), puts its lines in ``PartlyWrittenError.unwritten``, and
the archiver (services/archiver.py) tries again those lines only, never the ones written."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from chalicelib.adapters.aws_clients import AwsClients
from chalicelib.adapters.aws_errors import translated
from chalicelib.core.archive import MAX_RECORD_BYTES, PartlyWrittenError
from chalicelib.core.errors import BrokerError

MAX_RECORDS = 500
MAX_BATCH_BYTES = 4 * 1024 * 1024
PACK_BYTES = 256 * 1024  # a packed record's size: well under a record's 1,000 KiB
_MAX_BYTES = MAX_BATCH_BYTES - 64 * 1024  # room for the request's own JSON and base64 framing

__all__ = ["MAX_BATCH_BYTES", "MAX_RECORDS", "MAX_RECORD_BYTES", "FirehoseArchive", "pack"]


class FirehoseArchive:
    def __init__(self, clients: AwsClients, stream: str) -> None:
        self._clients = clients
        self._stream = stream

    @property
    def _firehose(self) -> Any:
        return self._clients.client("firehose")

    def put(self, records: Sequence[bytes]) -> None:
        unwritten = [r for r in records if len(r) > MAX_RECORD_BYTES]
        reasons: set[str] = {f"over {MAX_RECORD_BYTES} bytes"} if unwritten else set()
        groups = pack_groups([r for r in records if len(r) <= MAX_RECORD_BYTES])
        for chunk in _chunks(groups):
            try:
                with translated(f"archive to {self._stream}"):
                    out = self._firehose.put_record_batch(
                        DeliveryStreamName=self._stream,
                        Records=[{"Data": b"".join(group)} for group in chunk],
                    )
            except BrokerError as exc:
                unwritten.extend(line for group in chunk for line in group)
                reasons.add(exc.detail)
                continue
            if out.get("FailedPutCount"):
                for group, answer in zip(chunk, out["RequestResponses"], strict=True):
                    if answer.get("ErrorCode"):
                        unwritten.extend(group)
                        reasons.add(str(answer["ErrorCode"]))
        if unwritten:
            raise PartlyWrittenError(
                f"archive: {len(unwritten)} of {len(records)} records not written to "
                f"{self._stream} ({', '.join(sorted(reasons))[:200]})",
                unwritten,
            )


def pack(lines: Sequence[bytes], limit: int = PACK_BYTES) -> list[bytes]:
    """Newline-terminated lines joined into as few Firehose records as fit ``limit`` each, in
    order. Firehose bills each record rounded up to 5 KiB and writes records to S3 back to back,
    so ten 1 KiB lines cost one 10 KiB record instead of ten 5 KiB ones, and S3 holds the same
    bytes. A line without its newline ends its record (nothing is glued to it)."""
    return [b"".join(group) for group in pack_groups(lines, limit)]


def pack_groups(lines: Sequence[bytes], limit: int = PACK_BYTES) -> list[list[bytes]]:
    """The lines of each record ``pack`` makes."""
    groups: list[list[bytes]] = []
    current: list[bytes] = []
    size = 0
    for line in lines:
        if current and size + len(line) > limit:
            groups.append(current)
            current, size = [], 0
        current.append(line)
        size += len(line)
        if not line.endswith(b"\n"):
            groups.append(current)
            current, size = [], 0
    if current:
        groups.append(current)
    return groups


def _chunks(groups: Sequence[list[bytes]]) -> list[list[list[bytes]]]:
    """The records (as their lines) of each PutRecordBatch call."""
    chunks: list[list[list[bytes]]] = []
    current: list[list[bytes]] = []
    size = 0
    for group in groups:
        record_size = sum(map(len, group))
        if current and (len(current) == MAX_RECORDS or size + record_size > _MAX_BYTES):
            chunks.append(current)
            current, size = [], 0
        current.append(group)
        size += record_size
    if current:
        chunks.append(current)
    return chunks
