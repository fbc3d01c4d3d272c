"""The carry spool on local disk: a copy of the archive records a warm Lambda container carries
(services/archiver.py), one line each, where the shutdown extension (infra/spool_extension/) finds
them if the container is shut down before it writes them.

One directory per function (``BROKER_ARCHIVE_SPOOL_DIR``), one open file per archiver, named
``<role>.<pid>.<token>.<n>.carry``. Each append is a ``write(2)`` in O_APPEND mode, repeated
until every byte is written (a write may be short: a signal, a full disk), and no fsync: the
page cache outlives the runtime process (a crash, a timeout, SIGKILL), and the execution
environment's disk is gone anyway when the sandbox itself is. Sending rotates first:
``seal`` renames the file to ``.sending`` and the next append opens a new one; the archiver
removes the sealed file after its Firehose call. A crash between the call and the removal leaves
it for the extension: those records are archived twice, never lost. An append that fails part
way is cut off the file again (no torn line for the next one to be glued to) and raises: the
archiver then writes its records at once instead of carrying them.
"""

from __future__ import annotations

import errno
import os
import secrets
from collections.abc import Callable, Sequence

from chalicelib.core.errors import UnavailableError

CARRYING = ".carry"
SENDING = ".sending"
SUFFIXES = (CARRYING, SENDING)  # what the shutdown extension sends: every spooled file


class FileSpool:
    def __init__(
        self,
        directory: str,
        role: str,
        write: Callable[[int, memoryview], int] = os.write,
    ) -> None:
        self._directory = directory
        self._write = write
        self._size = 0  # of the current file: only this spool writes it
        # pid and a random token: archivers of one process, processes of one sandbox (a runtime
        # restarted after a crash), never share a file.
        self._stem = f"{role}.{os.getpid()}.{secrets.token_hex(4)}"
        self._n = 0
        self._fd: int | None = None
        self._path = ""

    def append(self, records: Sequence[bytes]) -> None:
        """One line per record (a record is a JSON line; one without its newline gets one)."""
        data = b"".join(r if r.endswith(b"\n") else r + b"\n" for r in records)
        try:
            if self._fd is None:
                self._open()
            assert self._fd is not None
            self._write_all(self._fd, memoryview(data))
        except OSError as exc:
            raise UnavailableError(f"archive spool {self._directory}: {exc}") from exc

    def _write_all(self, fd: int, data: memoryview) -> None:
        written = 0
        try:
            while written < len(data):
                n = self._write(fd, data[written:])
                if n <= 0:
                    raise OSError(errno.EIO, f"short write: {written} of {len(data)} bytes")
                written += n
        except OSError:
            if written:
                self._cut(fd)
            raise
        self._size += written

    def _cut(self, fd: int) -> None:
        """Take a failed append's bytes off the file; if even that fails, leave the file (its
        torn last line is sent as it is) and start a new one at the next append."""
        try:
            os.ftruncate(fd, self._size)
        except OSError:
            self._fd = None
            os.close(fd)

    def seal(self) -> str | None:
        """Ends the current file before its records are sent; returns its new name (None: the
        spool holds nothing)."""
        if self._fd is None:
            return None
        fd, self._fd = self._fd, None
        self._size = 0
        sealed = self._path[: -len(CARRYING)] + SENDING
        try:
            os.close(fd)
            os.rename(self._path, sealed)
        except OSError as exc:
            raise UnavailableError(f"archive spool {self._directory}: {exc}") from exc
        return sealed

    def discard(self, sealed: str) -> None:
        """Removes a sealed file once its records are written (or counted as failed)."""
        try:
            os.unlink(sealed)
        except FileNotFoundError:
            pass  # already gone: nothing is left to send twice
        except OSError as exc:
            raise UnavailableError(f"archive spool {self._directory}: {exc}") from exc

    def _open(self) -> None:
        self._n += 1
        self._size = 0
        self._path = os.path.join(self._directory, f"{self._stem}.{self._n}{CARRYING}")
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT
        try:
            self._fd = os.open(self._path, flags, 0o600)
        except FileNotFoundError:  # the first file (or the directory was removed): make it
            os.makedirs(self._directory, mode=0o700, exist_ok=True)
            self._fd = os.open(self._path, flags, 0o600)
