"""Hourly reports from inside the server (or the report writer's job), one writer at a time.

Every worker of every replica runs a ReportScheduler. Each tick (every minute, and once at start)
takes the writers' lock, ``reports/.writer.lock`` (an ``flock`` on a regular file: the kernel drops
it when its holder dies, so a stale owner never blocks, and a symlink or anything else planted
under that name is removed, never followed). Whoever holds it writes, in hour order, every closed
hour of the last day that has no report yet, from the first hour vgate ran (never before), so
each report links the one before it; then the daily reports, then prunes old decision log
segments whose hour has a report that verifies, recording the prune in the anchor first. The
others move on. ``vgate report --hour`` takes the same lock.
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

from ..audit.delivery import Cursor
from ..audit.log import SEGMENT
from ..audit.regular_files import open_regular
from ..core import hours
from ..core.config import Config, PolicyReportSettings
from ..core.errors import NotReportable
from ..forward.anchor_copy import forward_anchor
from .anchor import Anchor, anchor_of
from .build import build_report
from .closed_hours import last_closed_hour
from .daily import build_daily, daily_directory, day_closed
from .history import genesis_hour, hour_directory, hours_between, logged_hours
from .keys import ensure_key, load_private_key, public_key_path
from .publication import complete_anchored
from .sums import SUMS
from .verify import fingerprint, verify_reports
from .writer_lock import WRITER_LOCK, WriterLock, writer_lock

log = logging.getLogger("vgate")
LOOKBACK_HOURS = 24
FIRST_HOUR = ".first-hour"  # the hour the first writer found no history: reports start there


Snapshot = Callable[[], dict[str, Any]]  # the state now (background.snapshot), given by the CLI


def snapshot_for(hour: datetime, now: datetime, take: Snapshot | None) -> dict[str, Any] | None:
    """The state at ``hour``'s close, taken now if ``hour`` is the last one closed; once a later hour
    has closed, that moment is gone, and the report says so."""
    if take is None:
        return None
    last = last_closed_hour(now)
    if hour != last:
        return {"taken": False, "reason": f"written after a later hour ({hours.label(last)}) had closed: the state "
                                          "at this hour's close can no longer be seen"}
    return take()


def write_hour(config: Config, policy_dir: str | Path, hour: datetime, now: datetime,
               reissue_reason: str | None = None, snapshot: Snapshot | None = None) -> Path:
    """`vgate report --hour`: one hour's report under the writers' lock; NotReportable if refused."""
    settings = config.reports
    reports_dir = Path(settings.dir)
    with writer_lock(reports_dir) as lock:
        if lock is None:
            raise NotReportable(f"another writer holds {reports_dir}/{WRITER_LOCK}: one writer signs at a time; "
                                "try again when it is done", usage=False)
        anchor = anchor_of(config)
        _complete(reports_dir, anchor, Path(settings.key), lock)
        out = build_report(hour, config.audit.dir, reports_dir, policy_dir, settings.key, now=now,
                           reissue_reason=reissue_reason, language=settings.language, anchor=anchor,
                           snapshot=snapshot_for(hour, now, snapshot), lock=lock)
        _forward_anchor(config, anchor)  # a failure is logged; the next run sends what is missing
        return out


class ReportScheduler:
    def __init__(self, config: Callable[[], Config], policy_dir: Callable[[], Path],
                 snapshot: Snapshot | None = None) -> None:
        self._config = config      # the config in force (it may be reloaded)
        self._policy_dir = policy_dir
        self._snapshot = snapshot  # the state at the last closed hour's close (the CLI's writer takes it)
        self.refused: list[str] = []  # what the last tick would not sign, and why (the CLI exits 1 on it)

    def tick(self, now: datetime | None = None) -> list[Path]:
        """Write every missing report of the last day, in order, if this process holds the lock; prune."""
        now = now or datetime.now(timezone.utc)
        self.refused = []
        config = self._config()
        settings = config.reports
        reports_dir, audit_dir, key = Path(settings.dir), Path(config.audit.dir), Path(settings.key)
        with writer_lock(reports_dir) as lock:
            if lock is None:
                return []  # another writer is at it; its reports chain, ours would race
            anchor = anchor_of(config)
            written = _complete(reports_dir, anchor, key, lock)
            last_closed = last_closed_hour(now)
            window = hours_between(last_closed - timedelta(hours=LOOKBACK_HOURS - 1), last_closed)
            missing = [hour for hour in window if not (hour_directory(reports_dir, hour) / SUMS).exists()]
            if missing:  # only then look for the first hour vgate ran: a scan of the whole history
                start = first_hour(reports_dir, audit_dir, anchor, now)
                missing = [hour for hour in missing if hour >= start]
            for hour in missing:
                if ensure_key(key):
                    log.warning("created report key %s; give auditors %s", key, public_key_path(key))
                try:
                    written.append(build_report(hour, audit_dir, reports_dir, self._policy_dir(), key, now=now,
                                                language=settings.language, anchor=anchor,
                                                snapshot=snapshot_for(hour, now, self._snapshot), lock=lock))
                except NotReportable as refusal:
                    log.error("not reporting %s: %s", hours.label(hour), refusal)
                    self.refused.append(str(refusal))
                    continue
                log.info("wrote the compliance report of %s", hours.label(hour))
            hourly = [path for path in written if (path / "policyreports.yaml").is_file()]
            if hourly and settings.policy_reports.apply:
                _apply_to_cluster(settings.policy_reports, max(hourly))
            written += self._days(reports_dir, key, now, anchor, lock)
            prune(audit_dir, reports_dir, settings.retention_days, key, now, anchor, config.audit.forward.url)
            problem = _forward_anchor(config, anchor)
            if problem:
                self.refused.append(problem)
        return written

    def _days(self, reports_dir: Path, key: Path, now: datetime, anchor: Anchor | None,
              lock: WriterLock) -> list[Path]:
        """The daily report of each day of the look-back window that is over and has none yet."""
        written = []
        last_closed = last_closed_hour(now)
        days = sorted({(last_closed - timedelta(hours=back)).date() for back in range(LOOKBACK_HOURS)})
        due = [day for day in days if day_closed(day, now) and not (daily_directory(reports_dir, day) / SUMS).exists()]
        first = genesis_hour(reports_dir, anchor) if due else None  # a scan of the whole history: only when due
        for day in due:
            if first is None or day < first.date():
                continue
            try:
                written.append(build_daily(day, reports_dir, key, now, anchor, lock))
            except NotReportable as refusal:
                log.error("not reporting %s: %s", day, refusal)
                self.refused.append(str(refusal))
                continue
            log.info("wrote the daily compliance report of %s", day)
        return written

    def run_forever(self, interval: float = 60.0) -> threading.Thread:
        def loop() -> None:
            while True:
                try:
                    self.tick()
                except Exception:  # a failed tick is logged; the next one retries
                    log.exception("report scheduler tick failed")
                time.sleep(interval)

        thread = threading.Thread(target=loop, name="vgate-reports", daemon=True)
        thread.start()
        return thread


def _apply_to_cluster(settings: PolicyReportSettings, hour_dir: Path) -> None:
    """The newest hour's policy reports into the cluster; a failure is logged, the signed files stand."""
    from ..cluster.api import ApiServer
    from .cluster_reports import apply_policy_reports

    try:
        api = ApiServer.connect(settings.kubeconfig)
        with api:
            for line in apply_policy_reports(api, hour_dir):
                log.info("%s", line)
    except Exception as error:  # noqa: BLE001 - an API server away or a CRD missing must not stop the writer
        log.error("could not put the policy reports of %s into the cluster: %s", hour_dir, error)


def _forward_anchor(config: Config, anchor: Anchor | None) -> str | None:
    """Send the audit system the anchor lines it does not have yet (``audit.forward``); why not, if not."""
    if anchor is None or not config.audit.forward.url:
        return None
    try:
        key_id = fingerprint(load_private_key(Path(config.reports.key)).public_key())[len("SHA256:"):][:16]
        sent = forward_anchor(config.audit.forward, anchor.path, key_id)
    except OSError as error:
        problem = (f"the anchor's new lines did not reach the audit system ({config.audit.forward.url}): "
                   f"{error.strerror or error}; the next run sends them")
        log.error("%s", problem)
        return problem
    if sent:
        log.info("sent %d anchor lines to the audit system", sent)
    return None


def _complete(reports_dir: Path, anchor: Anchor | None, key: Path, lock: WriterLock) -> list[Path]:
    """First, what a writer anchored and did not get to publish (it died, or something was in the way)."""
    if anchor is None or not key.is_file():
        return []
    return complete_anchored(reports_dir, anchor, load_private_key(key).public_key(), lock)


def first_hour(reports_dir: Path, audit_dir: Path, anchor: Anchor | None, now: datetime) -> datetime:
    """The first hour vgate ran: the oldest report or segment, else the hour the first writer
    started (recorded in ``reports/.first-hour``). Hours before it are not vgate's to report."""
    marker = reports_dir / FIRST_HOUR
    known = [hour for hour in (genesis_hour(reports_dir, anchor), min(logged_hours(audit_dir), default=None))
             if hour is not None]
    if marker.is_file() and not marker.is_symlink():
        try:
            known.append(hours.from_label(marker.read_text().strip()))
        except ValueError:
            log.warning("%s does not hold an hour: ignored", marker)
    if known:
        return min(known)
    started = now.replace(minute=0, second=0, microsecond=0)
    marker.write_text(hours.label(started) + "\n")
    return started


def prune(audit_dir: Path, reports_dir: Path, retention_days: int, key: Path, now: datetime,
          anchor: Anchor | None = None, forward_url: str = "") -> list[Path]:
    """Delete segments older than the retention whose hour has a report that verifies and, with
    ``forward_url``, that the audit system has whole (``audit.delivery``); with an anchor, what is
    pruned is recorded there first (verify tells pruned from deleted by it)."""
    public_key = public_key_path(key)
    cutoff = now - timedelta(days=retention_days)
    removed: list[Path] = []
    verified: dict[datetime, bool] = {}  # an hour has a segment per writer: verify its report once
    delivery = Cursor.load(audit_dir, forward_url) if forward_url else None  # read once, not per segment
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
            verified[hour] = not verify_reports(reports_dir, public_key, hour, hour, audit_dir=audit_dir)
        if not verified[hour]:
            log.warning("keeping %s past retention: its report does not verify", segment.name)
            continue
        if delivery is not None and delivery.behind(segment):
            log.warning("keeping %s past retention: the audit system (%s) does not have all of it yet",
                        segment.name, forward_url)
            continue
        removed.append(segment)
    if removed and anchor is not None:
        anchor.append({"kind": "prune", "before": cutoff.isoformat(timespec="seconds"),
                       "segments": [_pruned(segment) for segment in removed]}, load_private_key(key), now)
    for segment in removed:
        segment.unlink()
    return removed


def _pruned(segment: Path) -> dict[str, Any]:
    """What the anchor keeps of a pruned segment: enough to tell it from one deleted or cut short."""
    records = size = 0
    with os.fdopen(open_regular(segment), "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            records += block.count(b"\n")
            size += len(block)
    return {"file": segment.name, "records": records, "bytes": size}
