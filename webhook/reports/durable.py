"""Making what the report writer publishes survive a crash: a file or directory fsync'd by path."""

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
