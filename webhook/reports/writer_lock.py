"""The writers' lock: one report writer at a time, held on a descriptor the writer keeps and checks.

``reports/.writer.lock`` is ``flock``'d: the kernel drops it when its holder dies, however it dies,
so no stale owner ever blocks. But the lock is a name on a volume an insider may write: renamed or
unlinked, it lets a second writer lock a new file of that name while the first still works; hard
linked to a segment, a writer that truncates "its" lock truncates the segment. So the writer opens
it without following links, takes it only if it is a regular file with one link (anything else at
the name is removed, never written), and checks before and after each publication that the name
still leads to the very inode it locked, with one link (``WriterLock.check``): if not, it stops.
"""

from __future__ import annotations

import errno
import fcntl
import logging
import os
import shutil
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path

from ..core.errors import LockLost

log = logging.getLogger("vgate")
WRITER_LOCK = ".writer.lock"


class WriterLock:
    """The lock this writer holds: its descriptor, and the name it must still be reachable by."""

    def __init__(self, path: Path, fd: int) -> None:
        self.path, self.fd = path, fd

    def check(self) -> None:
        """LockLost unless ``path`` is still the locked file (same inode) and it has one link."""
        held = os.fstat(self.fd)
        try:
            named = os.lstat(self.path)
        except FileNotFoundError:
            named = None
        if named is None or (named.st_dev, named.st_ino) != (held.st_dev, held.st_ino) or held.st_nlink != 1:
            what = "unlinked" if named is None else "hard-linked" if held.st_nlink != 1 else "replaced or renamed"
            raise LockLost(f"{self.path} was {what} while this writer held it: another writer may be running; "
                           "this one stops before publishing anything more (the next run completes what the anchor "
                           "records)", usage=False)


@contextmanager
def writer_lock(reports_dir: Path) -> Iterator[WriterLock | None]:
    """Hold the writers' lock while the block runs; yields None if another writer holds it."""
    reports_dir.mkdir(parents=True, exist_ok=True)
    path = reports_dir / WRITER_LOCK
    for _ in range(5):
        fd = _open_lock(path)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            yield None
            return
        lock = WriterLock(path, fd)
        try:
            lock.check()  # the name may have been swapped between the open and the flock
        except LockLost:
            os.close(fd)
            continue
        try:
            os.ftruncate(fd, 0)  # safe: a regular file with one link, the one at the name
            os.write(fd, f"{os.uname().nodename} {os.getpid()} {datetime.now(timezone.utc).isoformat()}\n".encode())
            yield lock
        finally:
            os.close(fd)
        return
    raise OSError(errno.EAGAIN, f"{path}: its name keeps changing: the writers' lock cannot be taken")


def _open_lock(path: Path) -> int:
    """The lock file's descriptor: a regular file with one link, made anew if anything else is there."""
    for _ in range(3):
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, 0o600)
        except OSError as error:
            if error.errno not in (errno.ELOOP, errno.EISDIR, errno.ENXIO):
                raise
        else:
            held = os.fstat(fd)
            if stat.S_ISREG(held.st_mode) and held.st_nlink == 1:
                return fd
            os.close(fd)
        log.warning("%s is not a regular file with one link (a planted symlink, directory, FIFO or hard link?): "
                    "removing that name, leaving what it led to untouched", path)
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink(missing_ok=True)
    raise OSError(errno.EEXIST, f"{path}: cannot make the writers' lock a regular file")
