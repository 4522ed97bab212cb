"""The report scheduler: one writer at a time, every hour from the first vgate ran, chained; safe pruning."""

from __future__ import annotations

import json
import threading
from datetime import datetime, timedelta, timezone
from pathlib import Path

from webhook.core.config import Config
from webhook.files.config_file import load_config
from webhook.reports.build import hour_directory
from webhook.reports.closed_hours import last_closed_hour
from webhook.reports.keys import ensure_key, public_key_path
from webhook.reports.schedule import FIRST_HOUR, LOOKBACK_HOURS, ReportScheduler, prune, writer_lock

from helpers import POLICIES, anchor_beside


def settings(tmp_path: Path) -> dict:
    document = load_config().document
    return {
        **document,
        "audit": {**document["audit"], "dir": str(tmp_path / "audit")},
        "reports": {**document["reports"], "dir": str(tmp_path / "reports"), "key": str(tmp_path / "keys" / "r.key"),
                    "anchorFile": str(anchor_beside(tmp_path))},
    }


def ran_since(document: dict, hour: datetime) -> None:
    """vgate first ran in ``hour``: the record the first writer leaves (reports start there)."""
    reports = Path(document["reports"]["dir"])
    reports.mkdir(parents=True, exist_ok=True)
    (reports / FIRST_HOUR).write_text(f"{hour:%Y-%m-%dT%H}\n")


def linked_hours(reports: Path) -> dict[str, str | None]:
    """Each hourly report's hour -> the hour its previousReport names."""
    found = {}
    for path in reports.glob("*/*/*/*/report.json"):
        if path.parent.name != "daily":
            report = json.loads(path.read_text())
            found[report["hour"]] = (report["previousReport"] or {}).get("hour")
    return found


def test_racing_replicas_write_each_hour_once_and_chain_every_hour(tmp_path):
    """Three writers start together on a fresh volume: one holds the lock and writes the hours in
    order, so each links the hour before it (racing per-hour locks left most hours unlinked)."""
    document = settings(tmp_path)
    now = datetime(2026, 12, 2, 12, 5, tzinfo=timezone.utc)
    ran_since(document, now - timedelta(days=3))
    results: list[list[Path]] = []
    replicas = [ReportScheduler(lambda: Config("test", document), lambda: POLICIES) for _ in range(3)]
    threads = [threading.Thread(target=lambda s=s: results.append(s.tick(now))) for s in replicas]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    written = [path for result in results for path in result]
    assert len(written) == len(set(written)) == LOOKBACK_HOURS + 1  # and yesterday's daily report, once
    assert hour_directory(tmp_path / "reports", datetime(2026, 12, 2, 11, tzinfo=timezone.utc)) in written
    links = linked_hours(tmp_path / "reports")
    hours = sorted(links)
    assert links[hours[0]] is None  # the first one the window holds: the genesis
    assert all(links[later] == earlier for earlier, later in zip(hours, hours[1:], strict=False)), links
    assert ReportScheduler(lambda: Config("test", document), lambda: POLICIES).tick(now) == []  # nothing left to write


def test_a_writer_holding_the_lock_keeps_the_others_out(tmp_path):
    document = settings(tmp_path)
    now = datetime(2026, 12, 2, 12, 5, tzinfo=timezone.utc)
    ran_since(document, now - timedelta(hours=3))
    with writer_lock(tmp_path / "reports") as held:
        assert held
        assert ReportScheduler(lambda: Config("test", document), lambda: POLICIES).tick(now) == []
    assert len(ReportScheduler(lambda: Config("test", document), lambda: POLICIES).tick(now)) == 3


def test_planted_symlinks_and_a_dead_owners_lock_do_not_stop_the_writer(tmp_path):
    """Dangling symlinks at the lock's name (and at the per-hour names writers once used), and a lock
    file a dead writer left: the writer still writes every hour, and follows no symlink."""
    document = settings(tmp_path)
    now = datetime(2026, 12, 2, 12, 5, tzinfo=timezone.utc)
    ran_since(document, now - timedelta(hours=3))
    reports = tmp_path / "reports"
    target = tmp_path / "elsewhere" / "not-a-lock"
    (reports / ".writer.lock").symlink_to(target)
    for back in (2, 3):
        hour = datetime(2026, 12, 2, 12 - back, tzinfo=timezone.utc)
        directory = hour_directory(reports, hour)
        directory.parent.mkdir(parents=True, exist_ok=True)
        (directory.parent / f".{directory.name}.lock").symlink_to(target)
    written = ReportScheduler(lambda: Config("test", document), lambda: POLICIES).tick(now)
    assert len(written) == 3 and not target.exists()
    assert (reports / ".writer.lock").is_file() and not (reports / ".writer.lock").is_symlink()
    (reports / ".writer.lock").write_text("dead-replica 1 2026-12-02T09:00:00+00:00\n")  # its owner died
    assert len(ReportScheduler(lambda: Config("test", document), lambda: POLICIES).tick(now + timedelta(hours=1))) == 1


def test_reports_begin_with_the_first_hour_vgate_ran(tmp_path):
    """A first start signs no hour before it: the first report is the hour it started, the genesis."""
    document = settings(tmp_path)
    started = datetime(2026, 12, 2, 12, 5, tzinfo=timezone.utc)
    assert ReportScheduler(lambda: Config("test", document), lambda: POLICIES).tick(started) == []
    written = ReportScheduler(lambda: Config("test", document), lambda: POLICIES).tick(started + timedelta(hours=3))
    assert [p.relative_to(tmp_path / "reports").as_posix() for p in written] == ["2026/12/02/12", "2026/12/02/13",
                                                                             "2026/12/02/14"]
    first = json.loads((written[0] / "report.json").read_text())
    assert first["genesis"] is True and first["previousReport"] is None and first["integrity"]["ok"]


def test_pruning_keeps_segments_without_a_verified_report(tmp_path):
    document = settings(tmp_path)
    audit, reports, key = tmp_path / "audit", tmp_path / "reports", Path(document["reports"]["key"])
    ensure_key(key)
    now = datetime(2026, 12, 2, 12, 5, tzinfo=timezone.utc)
    old_hours = [now - timedelta(days=200, hours=n) for n in (3, 2, 1)]
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
    removed = prune(audit, reports, 180, key, now)
    assert [p.name for p in removed] == [f"decisions-r-1-{old_hours[0]:%Y%m%dT%H}.jsonl"]
    remaining = sorted(p.name for p in audit.iterdir())
    assert f"decisions-r-1-{old_hours[1]:%Y%m%dT%H}.jsonl" in remaining  # its report no longer verifies
    assert f"decisions-r-1-{old_hours[2]:%Y%m%dT%H}.jsonl" in remaining  # it has no report
    assert recent.name in remaining


def test_the_report_writer_job_catches_up_every_closed_hour_once(tmp_path):
    """`vgate report --catch-up`, what deploy/'s CronJob runs: the scheduler's logic, once."""
    import subprocess

    import yaml

    from helpers import VGATE

    config = tmp_path / "vgate.yaml"
    key = tmp_path / "keys" / "r.key"
    config.write_text(yaml.safe_dump({"audit": {"dir": str(tmp_path / "audit")},
                                      "reports": {"dir": str(tmp_path / "reports"), "key": str(key),
                                                  "anchorFile": str(anchor_beside(tmp_path))}}))
    run = [*VGATE, "report", "--catch-up", "--config", str(config), "--policies", str(POLICIES)]
    missing = subprocess.run(run, capture_output=True, text=True, timeout=120)
    assert missing.returncode == 1 and "no report key" in missing.stderr  # nothing written without the key
    assert not (tmp_path / "reports").exists()
    (tmp_path / "reports").mkdir()
    started = datetime.now(timezone.utc) - timedelta(days=2)
    (tmp_path / "reports" / FIRST_HOUR).write_text(f"{started:%Y-%m-%dT%H}\n")
    before = datetime.now(timezone.utc)
    first = subprocess.run([*run, "--new-key"], capture_output=True, text=True, timeout=120)
    assert first.returncode == 0, first.stderr
    assert len([line for line in first.stdout.split() if not line.endswith("/daily")]) == LOOKBACK_HOURS
    again = subprocess.run(run, capture_output=True, text=True, timeout=120)
    assert again.returncode == 0, again.stderr
    said = again.stdout.strip()
    if said != "every closed hour of the last day has its report":
        # The runs crossed the moment an hour becomes reportable (hh:01, one GRACE after it ends; a CI
        # run did): that hour may be the second's to write, and nothing the first wrote is written again.
        closed = hours_reportable_between(before, datetime.now(timezone.utc))
        may_write = {str(hour_directory(tmp_path / "reports", hour)) for hour in closed}
        written = {line for line in said.split() if not line.endswith("/daily")}
        assert written and written <= may_write, said


def hours_reportable_between(start: datetime, end: datetime) -> list[datetime]:
    """The hours that became reportable (closed_hours.last_closed_hour) after ``start`` and by ``end``."""
    hour, newest, found = last_closed_hour(start) + timedelta(hours=1), last_closed_hour(end), []
    while hour <= newest:
        found.append(hour)
        hour += timedelta(hours=1)
    return found


def test_published_reports_are_readable_by_the_writer_and_its_group_only(tmp_path):
    """The CSV names every user, namespace and object: hourly and daily reports are 0640 in 0750 directories."""
    document = settings(tmp_path)
    now = datetime(2026, 12, 2, 12, 5, tzinfo=timezone.utc)
    ran_since(document, now - timedelta(days=1))
    written = ReportScheduler(lambda: Config("test", document), lambda: POLICIES).tick(now)
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
    ran_since(document, datetime(2026, 12, 2, 1, tzinfo=timezone.utc))
    scheduler = ReportScheduler(lambda: Config("test", document), lambda: POLICIES)
    written = scheduler.tick(datetime(2026, 12, 3, 0, 5, tzinfo=timezone.utc))
    daily = sorted(path for path in written if path.name == "daily")
    key = public_key_path(document["reports"]["key"])
    assert len(daily) >= 1 and not [f for f in verify_reports(tmp_path / "reports", key) if "sits in" in str(f)]
    other_day = daily[-1].parent.parent / f"{int(daily[-1].parent.name) - 1:02d}" / "daily"
    if other_day.exists():
        shutil.rmtree(other_day)
    shutil.copytree(daily[-1], other_day)
    problems = [str(f) for f in verify_reports(tmp_path / "reports", key)]
    assert any("the report of day" in p and "sits in the directory of" in p for p in problems), problems


def test_an_api_server_out_of_reach_does_not_stop_the_writer(tmp_path, caplog, monkeypatch):
    """policyReports.apply with no API server to take them: the hours are signed, the failure logged,
    and the kubeconfig's inline key written out for the attempt is removed."""
    import tempfile

    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    document = settings(tmp_path)
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text("apiVersion: v1\nkind: Config\ncurrent-context: c\ncontexts: [{name: c, context: "
                          "{cluster: c, user: u}}]\nclusters: [{name: c, cluster: {server: 'https://127.0.0.1:1', "
                          "certificate-authority-data: Y2E=}}]\n"
                          "users: [{name: u, user: {client-certificate-data: Y2VydA==, client-key-data: a2V5}}]\n")
    document["reports"] = {**document["reports"], "policyReports": {"apply": True, "kubeconfig": str(kubeconfig)}}
    now = datetime(2026, 12, 2, 12, 5, tzinfo=timezone.utc)
    ran_since(document, now - timedelta(hours=2))
    assert len(ReportScheduler(lambda: Config("test", document), lambda: POLICIES).tick(now)) == 2
    assert "could not put the policy reports of" in caplog.text and "2026/12/02/11" in caplog.text
    assert list(scratch.iterdir()) == []  # no key material left in the temporary directory
