"""A report's files as the writer writes them: hashed on the way out, so it signs what it computed.

The staging directory sits on the reports volume, which an insider may write. A writer that
re-read its staged files to checksum them would sign whatever was swapped in meanwhile (a busy
hour was signed as an hour without traffic that way). Here each file is created new
(``O_CREAT | O_EXCL | O_NOFOLLOW``, mode 0640: the CSV names every user), hashed as each byte is
written, fsync'd and closed by the writer; ``SHA256SUMS`` is made from those digests and nothing
is read back. A file changed after it was written no longer matches the signed sums, and
``vgate audit verify`` says so.
"""

from __future__ import annotations

import hashlib
import io
import os
from pathlib import Path
from typing import IO, Any

from ..audit.durable import fsync_path

FILE_MODE = 0o640  # readable by the writer and its group (auditors), no one else


class _HashedFile(io.RawIOBase):
    """A new file's descriptor that hashes every byte written through it."""

    def __init__(self, staged: Staged, name: str) -> None:
        super().__init__()
        self._staged, self._name = staged, name
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        self._fd = os.open(staged.directory / name, flags, FILE_MODE)
        os.fchmod(self._fd, FILE_MODE)  # whatever the umask
        self._digest = hashlib.sha256()

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        view = memoryview(data).cast("B")
        written = 0
        while written < len(view):
            written += os.write(self._fd, view[written:])
        self._digest.update(view)
        return written

    def close(self) -> None:
        if not self.closed:
            try:
                os.fsync(self._fd)
            finally:
                os.close(self._fd)
            self._staged.digests[self._name] = self._digest.hexdigest()
        super().close()


class Staged:
    """The files of one report being built in ``directory``, and the sha256 of each as written."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.digests: dict[str, str] = {}

    def open(self, name: str, *, text: bool = False) -> IO[Any]:
        """A new file to write (binary, or UTF-8 text with newlines as written); close it to record its digest."""
        raw = io.BufferedWriter(_HashedFile(self, name))
        return io.TextIOWrapper(raw, encoding="utf-8", newline="") if text else raw

    def write(self, name: str, data: bytes) -> str:
        """Write a whole file; its digest."""
        with self.open(name) as out:
            out.write(data)
        return self.digests[name]

    def sync(self) -> None:
        """Make the directory's entries durable (each file was fsync'd as it closed)."""
        fsync_path(self.directory)
