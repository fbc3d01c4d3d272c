"""The Firehose adapter keeps Firehose's limits itself (moto enforces none of them): no record
over 1,000 KiB and no PutRecordBatch over 500 records or 4 MiB is ever sent; an oversize record is
reported, and the records beside it still reach the archive (issue 16, defect 7)."""

from __future__ import annotations

from typing import Any

import pytest

from chalicelib.adapters.firehose_archive import (
    MAX_BATCH_BYTES,
    MAX_RECORD_BYTES,
    MAX_RECORDS,
    FirehoseArchive,
)
from chalicelib.core.errors import UnavailableError
from tests.backends import AWS_BACKENDS, aws_env
from tests.fakes import MemoryArchive


@pytest.mark.parametrize("backend", AWS_BACKENDS)
def test_adapter_never_sends_over_firehoses_limits(
    backend: str, request: pytest.FixtureRequest
) -> None:
    from brokerctl.bootstrap import bootstrap

    settings, clients = aws_env(request, backend)
    bootstrap(settings, clients, say=lambda line: None)
    calls: list[list[int]] = []

    def watch(params: dict[str, Any], **kwargs: Any) -> None:
        calls.append([len(r["Data"]) for r in params["Records"]])

    firehose = clients.client("firehose")
    firehose.meta.events.register("provide-client-params.firehose.PutRecordBatch", watch)
    try:
        # more records than one call takes (no newline: so not packed together, pack's rule)
        small = [b"s%06d" % i for i in range(1200)]
        mid = [b"m" * (600 * 1024) + b"\n" for _ in range(9)]  # more bytes than one call takes
        huge = b"h" * (MAX_RECORD_BYTES + 1)
        with pytest.raises(UnavailableError, match="over Firehose"):
            FirehoseArchive(clients, settings.archive_stream).put([*small, huge, *mid])
    finally:
        firehose.meta.events.unregister("provide-client-params.firehose.PutRecordBatch", watch)
    assert calls, "nothing was sent"
    for sizes in calls:
        assert len(sizes) <= MAX_RECORDS
        assert sum(sizes) <= MAX_BATCH_BYTES
        assert max(sizes) <= MAX_RECORD_BYTES
    assert sum(len(sizes) for sizes in calls) == len(small) + len(mid)  # all but the huge one


def test_fake_keeps_the_same_record_limit() -> None:
    fake = MemoryArchive()
    with pytest.raises(UnavailableError):
        fake.put([b"ok\n", b"h" * (MAX_RECORD_BYTES + 1)])
    assert fake.records == [b"ok\n"]
    assert MemoryArchive.MAX_RECORD_BYTES == MAX_RECORD_BYTES
