"""The in-server report scheduler: one report per hour across replicas, and safe pruning."""

from __future__ import annotations

import os
import threading
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

from webhook.core.config import load_config
from webhook.reports.build import hour_directory
from webhook.reports.keys import ensure_key, public_key_path
from webhook.reports.schedule import LOOKBACK_HOURS, ReportScheduler, lock_path, prune

from helpers import POLICIES


def settings(tmp_path: Path) -> dict:
    document = load_config().document
    return {
        **document,
        "audit": {**document["audit"], "dir": str(tmp_path / "audit")},
        "reports": {**document["reports"], "dir": str(tmp_path / "reports"), "key": str(tmp_path / "keys" / "r.key")},
    }


def test_racing_replicas_write_each_hour_once(tmp_path):
    document = settings(tmp_path)
    now = datetime(2026, 12, 2, 12, 5, tzinfo=timezone.utc)
    results: list[list[Path]] = []
    replicas = [ReportScheduler(lambda: document, lambda: POLICIES) for _ in range(3)]
    threads = [threading.Thread(target=lambda s=s: results.append(s.tick(now))) for s in replicas]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    written = [path for result in results for path in result]
    assert len(written) == len(set(written)) == LOOKBACK_HOURS + 1  # and yesterday's daily report, once
    assert hour_directory(tmp_path / "reports", datetime(2026, 12, 2, 11, tzinfo=timezone.utc)) in written
    assert not list((tmp_path / "reports").rglob(".*.lock"))
    assert ReportScheduler(lambda: document, lambda: POLICIES).tick(now) == []  # nothing left to write


def test_an_hour_written_between_the_look_and_the_lock_is_not_written_again(tmp_path, monkeypatch):
    """Another replica finishes an hour (and drops its lock) after this one saw no report there."""
    from webhook.reports.build import build_report

    document = settings(tmp_path)
    now = datetime(2026, 12, 2, 12, 5, tzinfo=timezone.utc)
    raced = hour_directory(tmp_path / "reports", datetime(2026, 12, 2, 11, tzinfo=timezone.utc))
    take_lock = ReportScheduler._lock

    def other_replica_first(lock: Path) -> bool:
        if lock == lock_path(raced):
            ensure_key(Path(document["reports"]["key"]))
            build_report(
                datetime(2026, 12, 2, 11, tzinfo=timezone.utc),
                Path(document["audit"]["dir"]),
                tmp_path / "reports",
                POLICIES,
                Path(document["reports"]["key"]),
            )
        return take_lock(lock)

    monkeypatch.setattr(ReportScheduler, "_lock", staticmethod(other_replica_first))
    written = ReportScheduler(lambda: document, lambda: POLICIES).tick(now)
    assert raced not in written and len([p for p in written if p.name != "daily"]) == LOOKBACK_HOURS - 1
    assert not lock_path(raced).exists()


def test_a_stale_lock_is_taken_over(tmp_path):
    document = settings(tmp_path)
    now = datetime(2026, 12, 2, 12, 5, tzinfo=timezone.utc)
    directory = hour_directory(tmp_path / "reports", datetime(2026, 12, 2, 11, tzinfo=timezone.utc))
    directory.mkdir(parents=True)
    lock_path(directory).parent.mkdir(parents=True, exist_ok=True)
    lock_path(directory).write_text("dead-replica 1\n")
    old = time.time() - 3600
    os.utime(lock_path(directory), (old, old))
    assert directory in ReportScheduler(lambda: document, lambda: POLICIES).tick(now)


def test_pruning_keeps_segments_without_a_verified_report(tmp_path):
    document = settings(tmp_path)
    audit, reports, key = tmp_path / "audit", tmp_path / "reports", Path(document["reports"]["key"])
    ensure_key(key)
    now = datetime(2026, 12, 2, 12, 5, tzinfo=timezone.utc)
    old_hours = [now - timedelta(days=200, hours=n) for n in (1, 2, 3)]
    audit.mkdir()
    for hour in old_hours:
        (audit / f"decisions-r-1-{hour:%Y%m%dT%H}.jsonl").write_text("")
    recent = audit / f"decisions-r-1-{now - timedelta(days=1):%Y%m%dT%H}.jsonl"
    recent.write_text("")
    from webhook.reports.build import build_report

    for hour in old_hours[:2]:
        build_report(hour.replace(minute=0), audit, reports, POLICIES, key)
    tampered = hour_directory(reports, old_hours[1].replace(minute=0)) / "report.csv"
    tampered.write_text("edited\n")
    removed = prune(audit, reports, 180, public_key_path(key), now)
    assert [p.name for p in removed] == [f"decisions-r-1-{old_hours[0]:%Y%m%dT%H}.jsonl"]
    remaining = sorted(p.name for p in audit.iterdir())
    assert f"decisions-r-1-{old_hours[1]:%Y%m%dT%H}.jsonl" in remaining  # its report no longer verifies
    assert f"decisions-r-1-{old_hours[2]:%Y%m%dT%H}.jsonl" in remaining  # it has no report
    assert recent.name in remaining


def test_a_running_server_reports_the_previous_hour(start_server):
    server = start_server(workers=1, hourly_reports=True)
    previous = datetime.now(timezone.utc).replace(minute=0, second=0, microsecond=0) - timedelta(hours=1)
    if datetime.now(timezone.utc).minute == 0:
        previous -= timedelta(hours=1)  # inside the grace minute the hour before is the last closed one
    target = hour_directory(server.workdir / "reports", previous) / "SHA256SUMS.sig"
    deadline = time.monotonic() + 120  # it backfills the day oldest first, so the chain links
    while not target.exists() and time.monotonic() < deadline:
        time.sleep(0.5)
    assert target.exists(), server.output()
    assert "wrote the compliance report of" in server.output()


def test_the_report_writer_job_catches_up_every_closed_hour_once(tmp_path):
    """`vgate report --catch-up`, what deploy/'s CronJob runs: the scheduler's logic, once."""
    import subprocess

    import yaml

    from helpers import VGATE

    config = tmp_path / "vgate.yaml"
    key = tmp_path / "keys" / "r.key"
    config.write_text(yaml.safe_dump({"audit": {"dir": str(tmp_path / "audit")},
                                      "reports": {"dir": str(tmp_path / "reports"), "key": str(key)}}))
    run = [*VGATE, "report", "--catch-up", "--config", str(config), "--policies", str(POLICIES)]
    missing = subprocess.run(run, capture_output=True, text=True, timeout=120)
    assert missing.returncode == 1 and "no report key" in missing.stderr  # nothing written without the key
    assert not (tmp_path / "reports").exists()
    first = subprocess.run([*run, "--new-key"], capture_output=True, text=True, timeout=120)
    assert first.returncode == 0, first.stderr
    assert len([line for line in first.stdout.split() if not line.endswith("/daily")]) == LOOKBACK_HOURS
    again = subprocess.run(run, capture_output=True, text=True, timeout=120)
    assert again.returncode == 0 and "every closed hour of the last day has its report" in again.stdout


def test_published_reports_are_readable_by_the_writer_and_its_group_only(tmp_path):
    """The CSV names every user, namespace and object: hourly and daily reports are 0640 in 0750 directories."""
    document = settings(tmp_path)
    now = datetime(2026, 12, 2, 12, 5, tzinfo=timezone.utc)
    written = ReportScheduler(lambda: document, lambda: POLICIES).tick(now)
    daily = [path for path in written if path.name == "daily"]
    assert daily and len(written) > 1
    for directory in written:
        assert directory.stat().st_mode & 0o777 == 0o750, directory
        files = [path for path in directory.iterdir() if path.is_file()]
        assert files and {path.stat().st_mode & 0o777 for path in files} == {0o640}, directory


def test_daily_reports_sit_in_their_own_day(tmp_path):
    """A genuine history verifies clean, and a daily report copied over another day's is found."""
    import shutil

    from webhook.reports.verify import verify_reports

    document = settings(tmp_path)
    written = ReportScheduler(lambda: document, lambda: POLICIES).tick(datetime(2026, 12, 3, 0, 5, tzinfo=timezone.utc))
    daily = sorted(path for path in written if path.name == "daily")
    key = public_key_path(document["reports"]["key"])
    assert len(daily) >= 1 and not [f for f in verify_reports(tmp_path / "reports", key) if "sits in" in str(f)]
    other_day = daily[-1].parent.parent / f"{int(daily[-1].parent.name) - 1:02d}" / "daily"
    if other_day.exists():
        shutil.rmtree(other_day)
    shutil.copytree(daily[-1], other_day)
    problems = [str(f) for f in verify_reports(tmp_path / "reports", key)]
    assert any("the report of day" in p and "sits in the directory of" in p for p in problems), problems
