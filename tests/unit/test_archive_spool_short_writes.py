"""The carry spool writes every byte of an append however short the writes (issue 31, item 10):
before, one ``os.write`` was made and a short write left the rest of the records out of the spool
the shutdown extension reads."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from chalicelib.adapters.archive_spool import FileSpool
from chalicelib.core.errors import UnavailableError

RECORDS = [b'{"n":%d,"pad":"%s"}\n' % (i, b"x" * 500) for i in range(20)]


def _short(most: int) -> tuple[list[int], Callable[[int, memoryview], int]]:
    calls: list[int] = []

    def write(fd: int, data: memoryview) -> int:  # as write(2) may: fewer bytes than asked
        calls.append(len(data))
        return os.write(fd, data[:most])

    return calls, write


def _carried(directory: Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(directory.iterdir()))


def test_short_writes_are_repeated_until_every_byte_is_written(tmp_path: Path) -> None:
    calls, write = _short(333)
    spool = FileSpool(str(tmp_path), "ingress", write=write)
    spool.append(RECORDS[:10])
    spool.append(RECORDS[10:])
    assert _carried(tmp_path) == b"".join(RECORDS)
    assert len(calls) > 2  # it took many writes


def test_a_write_that_fails_part_way_leaves_no_torn_line(tmp_path: Path) -> None:
    written = [0]

    def failing(fd: int, data: memoryview) -> int:
        if written[0] >= 1000:
            raise OSError(28, "No space left on device")
        n = os.write(fd, data[:400])
        written[0] += n
        return n

    spool = FileSpool(str(tmp_path), "ingress", write=failing)
    with pytest.raises(UnavailableError, match="No space left"):
        spool.append(RECORDS[:5])
    assert _carried(tmp_path) == b""  # the part written is taken off again
    written[0] = -(10**9)  # space again
    spool.append(RECORDS[5:7])
    assert _carried(tmp_path) == b"".join(RECORDS[5:7])  # whole lines only


def test_a_write_of_nothing_is_an_error_not_a_loop(tmp_path: Path) -> None:
    spool = FileSpool(str(tmp_path), "ingress", write=lambda fd, data: 0)
    with pytest.raises(UnavailableError, match="short write"):
        spool.append(RECORDS[:1])
