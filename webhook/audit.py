"""The decision log: one JSON line per admission decision, appended before the answer is sent.

Each process appends to its own hourly segment (``decisions-<replica>-<pid>-<YYYYMMDDTHH>.jsonl``,
mode 0600) with one ``write(2)`` per record on an O_APPEND descriptor, so records never
interleave and a crash can tear at most the last line.
"""

from __future__ import annotations

import os
import socket
import threading
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import orjson


class DecisionLog:
    """Append-only, hourly-rotated JSON Lines writer, safe to share between threads."""

    def __init__(self, directory: str | Path, replica: str | None = None) -> None:
        self.directory = Path(directory)
        self.replica = replica or os.environ.get("VGATE_REPLICA") or socket.gethostname()
        self._lock = threading.Lock()
        self._hour: str | None = None
        self._fd: int | None = None

    def record(self, entry: dict[str, Any]) -> None:
        """Stamp ``entry`` with time and replica and append it; raises OSError if it cannot."""
        now = datetime.now(timezone.utc)
        line = orjson.dumps({"time": now.isoformat(timespec="microseconds"), "replica": self.replica, **entry},
                            option=orjson.OPT_APPEND_NEWLINE)
        with self._lock:
            fd = self._segment(now.strftime("%Y%m%dT%H"))
            os.write(fd, line)

    def _segment(self, hour: str) -> int:
        if self._fd is not None and self._hour == hour:
            return self._fd
        self.close()
        self.directory.mkdir(parents=True, exist_ok=True)
        path = self.directory / f"decisions-{self.replica}-{os.getpid()}-{hour}.jsonl"
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        self._hour = hour
        return self._fd

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
