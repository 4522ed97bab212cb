"""Delivering the decision log to the audit system, from the log itself.

One server process per audit volume delivers (it holds ``.forward/lock``; every worker of every
replica tries, so one that dies is replaced within seconds, and segments of replicas long gone
are still delivered). Each pass reads what the segments hold past the cursor, only whole lines,
makes them durable (``fdatasync`` on the segment: a record is forwarded only once it is on disk,
whatever the writer was doing), and sends them in batches. The cursor moves once the collector
has a batch (``transport``: at once for RELP, after ``settle_seconds`` for syslog over TLS) and is
saved before the next one; any failure drops the connection and rewinds to the saved cursor, so
what the collector may not have is sent again: at least once, every duplicate recognisable by its
segment and line number. Memory stays bounded (one batch), whatever the backlog.
"""

from __future__ import annotations

import fcntl
import logging
import os
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import orjson

from ..audit.delivery import FORWARD_DIR, Cursor, Delivered
from ..audit.log import SEGMENT
from ..audit.regular_files import NotRegular, open_regular, read_regular
from ..core.config import ForwardSettings
from .message import record_message
from .transport import Link, connect

log = logging.getLogger("vgate")
BATCH_RECORDS = 256
BATCH_BYTES = 1 << 20
MAX_LINE_BYTES = 8 << 20
RETRY_SECONDS = (1.0, 30.0)  # the first wait after a failure, and the longest
_TIME = re.compile(rb'^\{"time":"([^"]+)"')  # a record's time: decision records begin with it


STATUS = "status.json"  # in .forward/: what the delivering process last saw, for every worker's /readyz


@dataclass
class Counters:
    """What the forwarder did, for metrics and /readyz."""

    delivered: int = 0
    oversize: int = 0
    failures: int = 0
    last_error: str | None = None
    backlog_records: int = 0
    backlog_bytes: int = 0
    oldest_undelivered: float = 0.0  # the time of the oldest record the collector does not have (0: none)


@dataclass
class _Batch:
    """Messages sent together, and where each segment stands once the collector has them."""

    accepted_at: float
    positions: dict[str, Delivered] = field(default_factory=dict)
    records: int = 0


class Forwarder:
    def __init__(self, settings: ForwardSettings, audit_dir: str | Path,
                 link_factory: Callable[[ForwardSettings], Link] = connect,
                 observe: Callable[[Counters], None] | None = None) -> None:
        self.settings = settings
        self.audit_dir = Path(audit_dir)
        self._connect = link_factory
        self._observe = observe  # the server's metrics, after every pass
        # per segment behind the cursor: where counting started (the cursor's offset), how far it got, the lines
        self._lines: dict[str, tuple[int, int, int]] = {}
        self._link: Link | None = None
        self._cursor = Cursor.load(self.audit_dir, settings.url)
        self._position: dict[str, Delivered] = dict(self._cursor.segments)
        self._unsettled: list[_Batch] = []
        self._unsaved = False  # the collector has more than the saved cursor says (its save failed)
        self.counters = Counters()
        self._stopped = threading.Event()

    def deliver(self) -> int:
        """One pass: every whole, durable record past the cursor sent; returns how many were sent.
        Raises OSError (the collector away, refusing, too slow): the next pass starts from the cursor."""
        present = self._segments()  # listed once a pass: what is sent, saved and measured
        try:
            return self._deliver(present)
        except OSError as error:
            self._drop(error)
            raise
        finally:
            self._measure(present)
            self._publish()

    def _deliver(self, present: dict[Path, int]) -> int:
        if self._link is None:
            self._link = self._connect(self.settings)
        self._settle(present)
        sent = 0
        for path, size in present.items():
            if self._position.get(path.name, Delivered()).offset >= size:
                continue  # the collector has all it held when listed: not even opened
            while batch := self._read(path):
                sent += self._send(path, *batch)
                self._settle(present)
        self._settle(present)
        return sent

    def _segments(self) -> dict[Path, int]:
        """The decision log's segments, oldest hour first, with their sizes when listed."""
        found = []
        for path in self.audit_dir.glob("decisions-*.jsonl"):
            match = SEGMENT.match(path.name)
            try:
                size = os.lstat(path).st_size
            except FileNotFoundError:
                continue  # pruned meanwhile
            if match:
                found.append((match["hour"], path.name, path, size))
        return {path: size for _, _, path, size in sorted(found)}

    def _read(self, path: Path) -> tuple[list[bytes], int] | None:
        """The next whole lines of ``path`` past its position (at most a batch), durable; and the
        offset after them. None when there are none."""
        at = self._position.get(path.name, Delivered())
        try:
            fd = open_regular(path)
        except (NotRegular, FileNotFoundError) as error:
            log.error("not forwarding %s: %s", path.name, error)
            return None
        try:
            data = os.pread(fd, BATCH_BYTES, at.offset)
            if data and b"\n" not in data:
                data = os.pread(fd, MAX_LINE_BYTES, at.offset)
            whole = data[:data.rfind(b"\n") + 1]
            if not whole:
                return None
            os.fdatasync(fd)  # on disk before it leaves: the collector never has what the volume may lose
        finally:
            os.close(fd)
        lines = whole.split(b"\n")[:-1][:BATCH_RECORDS]
        return lines, at.offset + sum(len(line) + 1 for line in lines)

    def _send(self, path: Path, lines: list[bytes], end: int) -> int:
        assert self._link is not None
        at = self._position.get(path.name, Delivered())
        writer = SEGMENT.match(path.name)
        pid = writer["writer"].rsplit("-", 1)[-1] if writer else "-"
        messages = []
        for number, line in enumerate(lines, start=at.records + 1):
            message, oversize = record_message(line, path.name, number, pid, self.settings.max_message_bytes)
            if oversize:
                self.counters.oversize += 1
                log.error("%s:%d: the record is %d bytes, more than the collector takes (maxMessageBytes %d): "
                          "sent as an oversize placeholder with its sha256", path.name, number, len(line),
                          self.settings.max_message_bytes)
            messages.append(message)
        self._link.send(messages)
        position = Delivered(end, at.records + len(lines))
        self._position[path.name] = position
        self._unsettled.append(_Batch(time.monotonic(), {path.name: position}, len(lines)))
        self.counters.delivered += len(lines)
        return len(lines)

    def _settle(self, present: dict[Path, int]) -> None:
        """Move the saved cursor past every batch the collector has had for ``settle_seconds``; it keeps
        only the ``present`` segments."""
        assert self._link is not None
        now = time.monotonic()
        settled = [batch for batch in self._unsettled if now - batch.accepted_at >= self._link.settle_seconds]
        if settled and not self._link.alive():
            raise ConnectionResetError("the collector closed the connection before the last messages settled")
        for batch in settled:
            self._cursor.segments.update(batch.positions)
        self._unsettled = self._unsettled[len(settled):]
        if settled or self._unsaved:
            self._unsaved = True  # until it is on disk: a full volume fails the save, the next pass retries
            self._cursor.save(path.name for path in present)
            self._unsaved = False

    def _drop(self, error: OSError) -> None:
        """Forget the connection and what was not settled: it is sent again from the saved cursor."""
        self.counters.failures += 1
        self.counters.last_error = f"{self.settings.url}: {error.strerror or error}"
        if self._link is not None:
            self._link.close()
        self._link = None
        resent = sum(batch.records for batch in self._unsettled)
        self.counters.delivered -= resent
        self._unsettled = []
        self._position = dict(self._cursor.segments)

    def _measure(self, present: dict[Path, int]) -> None:
        """The backlog: records and bytes the saved cursor does not cover, and the oldest one's time.
        Only undelivered bytes are read, each once while the cursor stays put (a segment the collector
        has whole is not opened; what the cursor moves past is not counted again)."""
        records = size = 0
        oldest = 0.0
        counts: dict[str, tuple[int, int, int]] = {}
        for path, length in present.items():
            at = self._cursor.get(path.name)
            if at.offset >= length:
                continue
            size += length - at.offset
            start, counted, lines = self._lines.get(path.name, (at.offset, at.offset, 0))
            if start != at.offset:  # the cursor moved: count from it again
                start, counted, lines = at.offset, at.offset, 0
            try:
                fd = open_regular(path)
            except (NotRegular, FileNotFoundError):
                continue
            try:
                while counted < length:
                    chunk = os.pread(fd, min(BATCH_BYTES, length - counted), counted)
                    if not chunk:
                        break
                    counted, lines = counted + len(chunk), lines + chunk.count(b"\n")
                if not oldest:
                    oldest = _time_of(os.pread(fd, 256, at.offset))
            finally:
                os.close(fd)
            counts[path.name] = (start, counted, lines)
            records += lines
        self._lines = counts
        self.counters.backlog_records, self.counters.backlog_bytes = records, size
        self.counters.oldest_undelivered = oldest

    def _publish(self) -> None:
        """The counters to the server's metrics, and to .forward/status.json for every worker's /readyz."""
        if self._observe is not None:
            self._observe(self.counters)
        counters = self.counters
        status = {"url": self.settings.url, "pid": os.getpid(), "at": time.time(),
                  "backlogRecords": counters.backlog_records, "backlogBytes": counters.backlog_bytes,
                  "oldestUndelivered": counters.oldest_undelivered or None, "delivered": counters.delivered,
                  "oversize": counters.oversize, "failures": counters.failures, "lastError": counters.last_error}
        try:
            directory = self.audit_dir / FORWARD_DIR
            directory.mkdir(mode=0o700, exist_ok=True)
            scratch = directory / f".{STATUS}.{os.getpid()}"
            scratch.write_bytes(orjson.dumps(status))
            os.replace(scratch, directory / STATUS)
        except OSError as error:  # the volume is full or gone: the decision log says so, louder
            log.debug("cannot write the forwarding status: %s", error)

    def _wait_measuring(self, seconds: float) -> None:
        """Wait before the next try, the backlog still measured each second (the metrics show it growing)."""
        until = time.monotonic() + seconds
        while not self._stopped.wait(min(1.0, max(until - time.monotonic(), 0))) and time.monotonic() < until:
            self._measure(self._segments())
            self._publish()

    def stop(self) -> None:
        """End ``run_forever``'s loop after its current pass (tests; a server just exits)."""
        self._stopped.set()

    def close(self) -> None:
        if self._link is not None:
            self._link.close()
            self._link = None

    def run_forever(self, interval: float = 0.5) -> threading.Thread:
        """Deliver in a daemon thread while this process holds the volume's forwarding lock."""

        def loop() -> None:
            wait = RETRY_SECONDS[0]
            lock_fd: int | None = None
            while not self._stopped.is_set():
                if lock_fd is None:
                    lock_fd = _try_lock(self.audit_dir)
                if lock_fd is None:
                    self._stopped.wait(5.0)  # another process delivers; take over if it dies
                    continue
                try:
                    self.deliver()
                    wait = RETRY_SECONDS[0]
                    self._stopped.wait(interval)
                except OSError as error:
                    log.error("forwarding to %s failed: %s; retrying in %.0f s", self.settings.url,
                              error.strerror or error, wait)
                    self._wait_measuring(wait)
                    wait = min(wait * 2, RETRY_SECONDS[1])
            self.close()
            if lock_fd is not None:
                os.close(lock_fd)

        thread = threading.Thread(target=loop, name="vgate-forward", daemon=True)
        thread.start()
        return thread


def _try_lock(audit_dir: Path) -> int | None:
    """The forwarding lock's descriptor if this process got it (kept open for its lifetime), else None."""
    directory = audit_dir / FORWARD_DIR
    try:
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(directory / "lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    return fd


def read_status(audit_dir: str | Path) -> dict[str, object]:
    """What the delivering process last wrote of its work (for /readyz), with how old that is; a
    note when no process has written one yet."""
    try:
        status = orjson.loads(read_regular(Path(audit_dir) / FORWARD_DIR / STATUS))
    except (OSError, orjson.JSONDecodeError):
        return {"error": "no process has reported delivering yet"}
    if not isinstance(status, dict):
        return {"error": "the forwarding status is not an object"}
    at = status.get("at")
    return {**status, "ageSeconds": round(time.time() - at, 1) if isinstance(at, (int, float)) else None}


def _time_of(head: bytes) -> float:
    """The Unix time of the record that starts ``head`` (its ``time`` field), or now if it has none."""
    match = _TIME.search(head)
    if match:
        try:
            return datetime.fromisoformat(match[1].decode()).timestamp()
        except ValueError:
            pass
    return time.time()
