"""The Firehose adapter keeps Firehose's limits itself (moto enforces none of them): no record
over 1,000 KiB and no PutRecordBatch over 500 records or 4 MiB is ever sent; an oversize record is
reported, and the records beside it still reach the archive (issue 16, defect 7). What Firehose
does not take (a failed call, a record's ErrorCode) is tried again alone: every line reaches the
archive once (issue 31, item 6)."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from chalicelib.adapters.firehose_archive import (
    MAX_BATCH_BYTES,
    MAX_RECORD_BYTES,
    MAX_RECORDS,
    FirehoseArchive,
)
from chalicelib.core.archive import PartlyWrittenError
from chalicelib.core.errors import UnavailableError
from chalicelib.services.archiver import Archiver
from chalicelib.services.metrics import Metrics
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
        with pytest.raises(PartlyWrittenError, match="over 1024000 bytes") as caught:
            FirehoseArchive(clients, settings.archive_stream).put([*small, huge, *mid])
    finally:
        firehose.meta.events.unregister("provide-client-params.firehose.PutRecordBatch", watch)
    assert calls, "nothing was sent"
    for sizes in calls:
        assert len(sizes) <= MAX_RECORDS
        assert sum(sizes) <= MAX_BATCH_BYTES
        assert max(sizes) <= MAX_RECORD_BYTES
    assert sum(len(sizes) for sizes in calls) == len(small) + len(mid)  # all but the huge one
    assert caught.value.unwritten == [huge]


def test_fake_keeps_the_same_record_limit() -> None:
    fake = MemoryArchive()
    with pytest.raises(UnavailableError):
        fake.put([b"ok\n", b"h" * (MAX_RECORD_BYTES + 1)])
    assert fake.records == [b"ok\n"]
    assert MemoryArchive.MAX_RECORD_BYTES == MAX_RECORD_BYTES


@pytest.mark.parametrize("backend", AWS_BACKENDS)
def test_only_what_firehose_did_not_take_is_sent_again(
    backend: str, request: pytest.FixtureRequest
) -> None:
    """Twenty 250 KiB lines (one record each, two calls). Firehose refuses one record of the
    first call (its ErrorCode) and fails the second call whole, once. The archiver sends again
    those lines only: every line is in the archive once. Before, the adapter raised for the
    second call and the archiver sent the whole list again (the first call's records twice)."""
    from brokerctl.bootstrap import bootstrap

    settings, clients = aws_env(request, backend)
    bootstrap(settings, clients, say=lambda line: None)
    marker = uuid.uuid4().hex
    lines = [f"{marker}-{i:02d}|".encode() + b"p" * (250 * 1024) + b"\n" for i in range(20)]
    firehose = clients.client("firehose")
    calls: list[list[bytes]] = []
    refused: dict[int, int] = {}  # call number -> index of the record refused in it

    def params(params: dict[str, Any], **kwargs: Any) -> None:
        calls.append([r["Data"] for r in params["Records"]])
        if len(calls) == 1:
            del params["Records"][3]  # Firehose drops it: answered with an ErrorCode below
            refused[1] = 3

    def before(**kwargs: Any) -> Any:
        if len(calls) == 2:  # the second call fails whole (after its retries, botocore's)
            from botocore.awsrequest import AWSResponse

            error = {"Code": "ServiceUnavailableException", "Message": "injected"}
            return AWSResponse("https://firehose", 500, {}, None), {"Error": error}
        return None

    def after(parsed: dict[str, Any], **kwargs: Any) -> None:
        if len(calls) in refused and "RequestResponses" in parsed:
            error = {"ErrorCode": "ServiceUnavailableException", "ErrorMessage": "injected"}
            parsed["RequestResponses"].insert(refused.pop(len(calls)), error)
            parsed["FailedPutCount"] = 1

    events = firehose.meta.events
    hooks = [
        ("provide-client-params.firehose.PutRecordBatch", params),
        ("before-call.firehose.PutRecordBatch", before),
        ("after-call.firehose.PutRecordBatch", after),
    ]
    for name, hook in hooks:
        events.register(name, hook)
    metrics = Metrics(enabled=False)
    try:
        archiver = Archiver(
            FirehoseArchive(clients, settings.archive_stream), metrics, "ingress", sleep=_no_wait
        )
        assert archiver.write(lines)
    finally:
        for name, hook in hooks:
            events.unregister(name, hook)
    sent = [line for call in calls for line in call]
    first, second = calls[0], calls[1]
    assert len(sent) == len(lines) + 1 + len(second)  # the refused one and the failed call, again
    assert sorted(calls[2]) == sorted([first[3], *second])
    s3 = clients.client("s3")
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket=settings.archive_bucket)["Contents"]]
    archived = b"".join(
        s3.get_object(Bucket=settings.archive_bucket, Key=k)["Body"].read() for k in keys
    )
    counts = [archived.count(f"{marker}-{i:02d}|".encode()) for i in range(len(lines))]
    assert counts == [1] * len(lines)


def _no_wait(seconds: float) -> None:
    pass
