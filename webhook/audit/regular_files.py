"""Reading files on a volume someone else can write: only regular files, never followed, never blocking.

The decision log, the reports and the seals live where an insider may plant anything under a
name the writer or ``vgate audit verify`` will open: a symbolic link (to the anchor, to
``/dev/zero``), a FIFO (an open that never returns), a directory, or a file that never ends.
Every open here is ``O_NOFOLLOW | O_NONBLOCK``, checked with ``fstat`` to be a regular file, and
every read is bounded; anything else raises NotRegular, whose text is the finding
(``not a regular file: a FIFO, not read``), so one planted entry is named and the rest still
checked.
"""

from __future__ import annotations

import errno
import hashlib
import os
import stat
from pathlib import Path

from ..core.errors import NotRegular

__all__ = ["DOCUMENT", "SMALL", "NotRegular", "is_regular", "open_regular", "read_regular", "sha256_regular"]

SMALL = 1 << 20          # SHA256SUMS, signatures, seals, keys
DOCUMENT = 256 << 20     # a report.json, an anchor: far above any vgate writes, far below a planted endless file
_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


def open_regular(path: str | Path) -> int:
    """A read-only descriptor of ``path`` if it is a regular file; NotRegular otherwise."""
    try:
        fd = os.open(path, _FLAGS)
    except OSError as error:
        if error.errno == errno.ELOOP:
            raise NotRegular(error.errno, "not a regular file: a symbolic link, not followed") from None
        if error.errno == errno.ENOENT:
            raise
        raise NotRegular(error.errno or errno.EIO, f"not a regular file: cannot be read: {error.strerror}") from None
    mode = os.fstat(fd).st_mode
    if stat.S_ISREG(mode):
        return fd
    os.close(fd)
    what = "a directory" if stat.S_ISDIR(mode) else "a FIFO" if stat.S_ISFIFO(mode) else "a device or socket"
    raise NotRegular(errno.EINVAL, f"not a regular file: {what}, not read")


def is_regular(path: str | Path) -> bool:
    """Whether ``path`` itself (not what a link names) is a regular file."""
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False


def read_regular(path: str | Path, limit: int = SMALL) -> bytes:
    """The whole of a regular file of at most ``limit`` bytes; NotRegular if it is not one, or larger."""
    fd = open_regular(path)
    try:
        chunks, size = [], 0
        while chunk := os.read(fd, min(1 << 20, limit + 1 - size)):
            chunks.append(chunk)
            size += len(chunk)
            if size > limit:
                raise NotRegular(errno.EFBIG, f"larger than {limit} bytes: not a file vgate writes, not read")
        return b"".join(chunks)
    finally:
        os.close(fd)


def sha256_regular(path: str | Path, limit: int = 64 << 30) -> str:
    """The sha256 of a regular file, streamed (a report's CSV can be large); NotRegular otherwise."""
    fd = open_regular(path)
    digest, size = hashlib.sha256(), 0
    try:
        while block := os.read(fd, 1 << 20):
            size += len(block)
            if size > limit:
                raise NotRegular(errno.EFBIG, f"larger than {limit} bytes: not a file vgate writes, not read")
            digest.update(block)
    finally:
        os.close(fd)
    return digest.hexdigest()
