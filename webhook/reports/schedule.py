"""Hourly reports from inside the server, written once per hour however many replicas run.

Every worker of every replica runs a ReportScheduler. Each tick (every minute, and once at start)
looks at the closed hours of the last day that have no report yet, and for each one tries to
create ``reports/YYYY/MM/DD/HH/.lock`` exclusively (O_EXCL works on one shared volume); whoever
creates it writes the report, everyone else moves on. A lock older than ten minutes belongs to a
writer that died and is taken over. The same tick prunes old decision log segments, but only
those whose hour has a report that verifies. ``vgate report --hour`` remains for a CronJob or a
rebuild.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from ..audit.log import SEGMENT
from ..core import hours
from .build import build_report, hour_directory
from .closed_hours import last_closed_hour
from .daily import build_daily, daily_directory, day_closed
from .keys import ensure_key, public_key_path
from .sums import SUMS
from .verify import verify_reports

log = logging.getLogger("vgate")
STALE_LOCK_SECONDS = 600
LOOKBACK_HOURS = 24


class ReportScheduler:
    def __init__(self, settings: Callable[[], dict[str, Any]], policy_dir: Callable[[], Path]) -> None:
        self._settings = settings      # the config document in force (it may be reloaded)
        self._policy_dir = policy_dir

    def tick(self, now: datetime | None = None) -> list[Path]:
        """Write every missing report of the last day this process wins the lock for; prune."""
        now = now or datetime.now(timezone.utc)
        document = self._settings()
        reports_dir, audit_dir = Path(document["reports"]["dir"]), Path(document["audit"]["dir"])
        key = Path(document["reports"]["key"])
        written = []
        last_closed = last_closed_hour(now)
        for back in range(LOOKBACK_HOURS - 1, -1, -1):
            hour = last_closed - timedelta(hours=back)
            directory = hour_directory(reports_dir, hour)
            lock = lock_path(directory)
            if (directory / SUMS).exists() or not self._lock(lock):
                continue
            try:
                if (directory / SUMS).exists():
                    continue  # another replica wrote it between our look and our lock
                if ensure_key(key):
                    log.warning("created report key %s; give auditors %s", key, public_key_path(key))
                written.append(build_report(hour, audit_dir, reports_dir, self._policy_dir(), key, now=now,
                                            language=document["reports"]["language"]))
                log.info("wrote the compliance report of %s", hours.label(hour))
            finally:
                lock.unlink(missing_ok=True)
        written += self._days(reports_dir, key, now)
        prune(audit_dir, reports_dir, document["reports"]["retentionDays"], public_key_path(key), now)
        return written

    def _days(self, reports_dir: Path, key: Path, now: datetime) -> list[Path]:
        """The daily report of each day of the look-back window that is over and has none yet."""
        written = []
        last_closed = last_closed_hour(now)
        for day in sorted({(last_closed - timedelta(hours=back)).date() for back in range(LOOKBACK_HOURS)}):
            directory = daily_directory(reports_dir, day)
            lock = lock_path(directory)
            if not day_closed(day, now) or (directory / SUMS).exists() or not self._lock(lock):
                continue
            try:
                if not (directory / SUMS).exists():
                    written.append(build_daily(day, reports_dir, key, now))
                    log.info("wrote the daily compliance report of %s", day)
            finally:
                lock.unlink(missing_ok=True)
        return written

    def run_forever(self, interval: float = 60.0) -> threading.Thread:
        def loop() -> None:
            while True:
                try:
                    self.tick()
                except Exception:  # noqa: BLE001 - a failed tick is logged; the next one retries
                    log.exception("report scheduler tick failed")
                time.sleep(interval)

        thread = threading.Thread(target=loop, name="vgate-reports", daemon=True)
        thread.start()
        return thread

    @staticmethod
    def _lock(lock: Path) -> bool:
        lock.parent.mkdir(parents=True, exist_ok=True)
        try:
            if time.time() - lock.stat().st_mtime > STALE_LOCK_SECONDS:
                lock.unlink(missing_ok=True)  # its writer died
        except FileNotFoundError:
            pass
        try:
            fd = os.open(lock, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            return False
        os.write(fd, f"{os.uname().nodename} {os.getpid()}\n".encode())
        os.close(fd)
        return True


def lock_path(directory: Path) -> Path:
    """The writers' lock of an hour: beside its directory, which appears only when published."""
    return directory.parent / f".{directory.name}.lock"


def prune(audit_dir: Path, reports_dir: Path, retention_days: int, public_key: Path, now: datetime) -> list[Path]:
    """Delete segments older than the retention whose hour has a report that verifies."""
    cutoff = now - timedelta(days=retention_days)
    removed: list[Path] = []
    verified: dict[datetime, bool] = {}  # an hour has a segment per writer: verify its report once
    if not audit_dir.is_dir():
        return removed
    for segment in sorted(audit_dir.glob("decisions-*.jsonl")):
        match = SEGMENT.match(segment.name)
        if not match:
            continue
        hour = hours.from_tag(match["hour"])
        if hour >= cutoff.replace(minute=0, second=0, microsecond=0):
            continue
        if not public_key.is_file() or not (hour_directory(reports_dir, hour) / SUMS).is_file():
            continue
        if hour not in verified:
            verified[hour] = not verify_reports(reports_dir, public_key, hour, hour)
        if not verified[hour]:
            log.warning("keeping %s past retention: its report does not verify", segment.name)
            continue
        segment.unlink()
        removed.append(segment)
    return removed
