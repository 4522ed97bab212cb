"""Making evidence survive a crash: a file or directory fsync'd by path, and a small file replaced whole.

The report writer publishes with these; the forwarder keeps its cursors with them.
"""

from __future__ import annotations

import os
from pathlib import Path


def fsync_path(path: Path) -> None:
    """fsync a file, or a directory (so a rename or a new entry in it is durable)."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)  # never a planted link or FIFO
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def replace_durably(path: Path, data: bytes, mode: int = 0o600) -> None:
    """``path`` holds ``data`` whole or keeps what it held, after a crash too: written to a new file
    beside it (``mode``; created exclusively, never through a planted link), fsync'd, renamed over it,
    the directory fsync'd."""
    temporary = path.with_name(f".{path.name}.{os.getpid()}.{os.urandom(4).hex()}")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(temporary, path)
    fsync_path(path.parent)
