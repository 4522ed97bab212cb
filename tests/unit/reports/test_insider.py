"""An insider who can write the decision-log and reports volume, but holds no key, against a real
history: two days of signed hours written by the scheduler, records in some, a reissue, two daily
reports, and the writer's anchor kept apart. Each way of rewriting that history must be found by
``vgate audit verify`` (or refused by the writer), and the untouched history must verify clean."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from datetime import datetime, timedelta, timezone
from pathlib import Path

import orjson
import pytest
import yaml

from webhook.audit.log import GENESIS
from webhook.core.config import Config
from webhook.core.errors import NotReportable
from webhook.files.config_file import load_config
from webhook.reports.anchor import Anchor
from webhook.reports.build import build_report, hour_directory
from webhook.reports.daily import daily_directory
from webhook.reports.keys import load_private_key, public_key_path
from webhook.reports.schedule import FIRST_HOUR, ReportScheduler, prune
from webhook.reports.verify import verify_reports

from helpers import POLICIES, VGATE, anchor_beside

UTC = timezone.utc
STARTED = datetime(2026, 12, 1, 22, tzinfo=UTC)     # vgate first ran
FIRST_TICK = datetime(2026, 12, 2, 0, 5, tzinfo=UTC)  # reports 12-01T22, 23 and the daily report of 12-01
SECOND_TICK = datetime(2026, 12, 3, 0, 5, tzinfo=UTC)  # the 24 hours of 12-02 and its daily report
LAST = datetime(2026, 12, 2, 23, tzinfo=UTC)
BUSY = (datetime(2026, 12, 2, 10, tzinfo=UTC), datetime(2026, 12, 2, 11, tzinfo=UTC))
REISSUED = BUSY[0]
RETAINED_UNTIL = BUSY[1] + timedelta(days=184, minutes=30)  # BUSY[0] past the 184 days' retention, BUSY[1] not


NOW = datetime(2026, 12, 2, 12, 30, tzinfo=timezone.utc)  # when the test appends to the anchor

def records(hour: datetime, count: int, writer: str) -> bytes:
    """A writer's chained records in ``hour``, as the decision log writes them."""
    lines, prev = [], GENESIS
    for n in range(count):
        line = orjson.dumps({"time": f"{hour:%Y-%m-%dT%H}:{n:02d}:00.000000+00:00", "replica": writer,
                             "endpoint": "validate", "uid": f"{writer}-{n}", "decision": "allowed", "prev": prev})
        prev = hashlib.sha256(line).hexdigest()
        lines.append(line + b"\n")
    return b"".join(lines)


def settings(root: Path) -> dict:
    document = load_config().document
    return {**document, "audit": {**document["audit"], "dir": str(root / "audit")},
            "reports": {**document["reports"], "dir": str(root / "reports"), "key": str(root / "keys" / "r.key"),
                        "anchorFile": str(anchor_beside(root))}}


@pytest.fixture(scope="module")
def signed_history(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("history")
    document = settings(root)
    (root / "audit").mkdir()
    for n, hour in enumerate(BUSY):
        (root / "audit" / f"decisions-replica-a-{n}-{hour:%Y%m%dT%H}.jsonl").write_bytes(records(hour, 5 + n, "a"))
    (root / "reports").mkdir()
    (root / "reports" / FIRST_HOUR).write_text(f"{STARTED:%Y-%m-%dT%H}\n")
    scheduler = ReportScheduler(lambda: Config("test", document), lambda: POLICIES)
    assert len(scheduler.tick(FIRST_TICK)) == 3
    assert len(scheduler.tick(SECOND_TICK)) == 25
    build_report(REISSUED, root / "audit", root / "reports", POLICIES, root / "keys" / "r.key",
                 reissue_reason="INC-9: a rule's control was remapped", anchor=Anchor(anchor_beside(root)))
    return root


@pytest.fixture
def history(signed_history, tmp_path) -> Path:
    """A copy of the signed history for one test to tamper with."""
    root = tmp_path / "copy"
    shutil.copytree(signed_history, root, symlinks=True)
    shutil.copytree(anchor_beside(signed_history).parent, anchor_beside(root).parent)  # the writer's, beside
    return root


def found(root: Path, anchored: bool = True, until: datetime = LAST) -> list[str]:
    anchor = Anchor(anchor_beside(root)) if anchored else None
    return [str(f) for f in verify_reports(root / "reports", public_key_path(root / "keys" / "r.key"),
                                           audit_dir=root / "audit", until=until, anchor=anchor)]


def hour_dir(root: Path, hour: datetime) -> Path:
    return hour_directory(root / "reports", hour)


def test_the_untouched_history_verifies_clean(history):
    assert found(history) == []
    assert found(history, anchored=False) == []


def test_a_signed_hour_of_traffic_replaced_by_another_hours_report(history):
    """Delete H's segments, move its report under superseded/, put another hour's signed report in
    its place, and the report that one links under H-1's superseded/."""
    victim, donor = BUSY[1], datetime(2026, 12, 2, 15, tzinfo=UTC)
    for segment in (history / "audit").glob(f"*{victim:%Y%m%dT%H}.jsonl"):
        segment.unlink()
    directory = hour_dir(history, victim)
    kept = history / "kept"
    shutil.move(directory, kept)
    shutil.copytree(hour_dir(history, donor), directory)
    shutil.move(kept, directory / "superseded" / "1")
    shutil.copytree(hour_dir(history, donor - timedelta(hours=1)),
                    hour_dir(history, victim - timedelta(hours=1)) / "superseded" / "7")
    problems = found(history, anchored=False)
    assert f"{directory}/report.json: the report of hour 2026-12-02T15 sits in the directory of 2026-12-02T11: " \
           "it was copied or moved there" in problems, problems
    assert f"{hour_dir(history, victim - timedelta(hours=1))}: superseded/7 is a version no reissue supersedes: " \
           "it does not count" in problems, problems
    assert any("is not the one the anchor records" in p for p in found(history))


@pytest.mark.parametrize("through_a_symlink", [False, True])
def test_the_newest_hour_replaced_by_the_first_ever_report(history, through_a_symlink):
    newest, genesis = hour_dir(history, LAST), hour_dir(history, STARTED)
    shutil.rmtree(newest)
    if through_a_symlink:
        newest.symlink_to(genesis, target_is_directory=True)
    else:
        shutil.copytree(genesis, newest)
    problems = found(history, anchored=False)
    assert f"{newest}/report.json: the report of hour 2026-12-01T22 sits in the directory of 2026-12-02T23: it was " \
           "copied or moved there" in problems, problems
    assert f"{newest}/report.json: it links no earlier report and there are older reports (a first report put in " \
           "a later place?)" in problems, problems


def test_a_reissue_undone_by_deleting_superseded(history):
    shutil.rmtree(hour_dir(history, REISSUED) / "superseded")
    problems = found(history, anchored=False)
    assert any("which is not under superseded/: the older version was removed" in p for p in problems), problems


def test_a_reissue_undone_by_moving_the_old_version_back(history):
    """The later hour and the daily report signed the first version: only the anchor knows it was reissued."""
    directory = hour_dir(history, REISSUED)
    for path in directory.iterdir():
        if path.is_file():
            path.unlink()
    for path in (directory / "superseded" / "1").iterdir():
        path.rename(directory / path.name)
    shutil.rmtree(directory / "superseded")
    assert found(history, anchored=False) == []  # a signed, well-linked hour: without the anchor it passes
    problems = found(history)
    assert any(p.startswith(f"{directory}: the report of 2026-12-02T10 is not the one the anchor records (version 2")
               for p in problems), problems


def test_a_daily_report_copied_over_another_days(history):
    first, second = daily_directory(history / "reports", STARTED.date()), daily_directory(history / "reports",
                                                                                        LAST.date())
    shutil.rmtree(second)
    shutil.copytree(first, second)
    problems = found(history, anchored=False)
    assert f"{second}/report.json: the report of day 2026-12-01 sits in the directory of 2026-12-02: it was " \
           "copied or moved there" in problems, problems


def test_the_oldest_hours_deleted_with_their_days_daily_report(history):
    for hour in (STARTED, STARTED + timedelta(hours=1)):
        shutil.rmtree(hour_dir(history, hour))
    shutil.rmtree(daily_directory(history / "reports", STARTED.date()))
    problems = found(history, anchored=False)
    first_left = hour_dir(history, datetime(2026, 12, 2, 0, tzinfo=UTC))
    assert f"{first_left}/report.json: its previousReport is the report of 2026-12-01T23, which is gone " \
           "(deleted)" in problems, problems
    assert f"{daily_directory(history / 'reports', LAST.date())}/report.json: its previousDay is the report of " \
           "2026-12-01, which is gone (deleted)" in problems, problems


def test_the_writer_does_not_sign_again_an_hour_that_was_erased(history, tmp_path):
    """Delete the newest signed hour and its log: the writer's catch-up must not sign it again as an
    hour without traffic, and `vgate report --hour` says it is gone (exit 1)."""
    shutil.rmtree(hour_dir(history, LAST))
    scheduler = ReportScheduler(lambda: Config("test", settings(history)), lambda: POLICIES)
    assert scheduler.tick(SECOND_TICK + timedelta(minutes=5)) == []
    assert not (hour_dir(history, LAST) / "SHA256SUMS").exists()
    config = tmp_path / "vgate.yaml"
    config.write_text(yaml.safe_dump(settings(history)))
    again = subprocess.run([*VGATE, "report", "--hour", "2026-12-02T23", "--config", str(config), "--policies",
                            str(POLICIES)], capture_output=True, text=True, timeout=60)
    assert again.returncode == 1 and "the report is gone, and is not signed again" in again.stderr, again.stderr
    assert "Traceback" not in again.stderr
    # The writer's catch-up as it ran just after that day (its window is the last day before now):
    # at the wall clock's today, 2026-12-02T23 would be outside it and the test would pass vacuously.
    at = (SECOND_TICK + timedelta(minutes=5)).strftime("@%Y-%m-%d %H:%M:%S")
    catch_up = subprocess.run(["faketime", "-f", at, *VGATE, "report", "--catch-up", "--config", str(config),
                               "--policies", str(POLICIES)], capture_output=True, text=True, timeout=120,
                              env={**os.environ, "TZ": "UTC"})
    assert catch_up.returncode == 1 and "2026-12-02T23 as signed" in catch_up.stderr, catch_up.stderr
    problems = found(history)
    assert any(p.startswith(f"{hour_dir(history, LAST)}: the anchor records the report of 2026-12-02T23") and
               "it is gone" in p for p in problems), problems


def test_a_volume_rolled_back_is_not_signed_over(signed_history, tmp_path):
    """The volume restored to its state after the first day: the writer signs none of the later hours
    again, and verify with the anchor names every one of them."""
    root = tmp_path / "rolled-back"
    document = settings(root)
    (root / "reports").mkdir(parents=True)
    (root / "reports" / FIRST_HOUR).write_text(f"{STARTED:%Y-%m-%dT%H}\n")
    for name in ("keys", "audit"):
        shutil.copytree(signed_history / name, root / name)
    for hour in (STARTED, STARTED + timedelta(hours=1)):
        shutil.copytree(hour_dir(signed_history, hour), hour_dir(root, hour))
    shutil.copytree(daily_directory(signed_history / "reports", STARTED.date()),
                    daily_directory(root / "reports", STARTED.date()))
    # the anchor lives elsewhere: not rolled back
    shutil.copytree(anchor_beside(signed_history).parent, anchor_beside(root).parent)
    assert ReportScheduler(lambda: Config("test", document), lambda: POLICIES).tick(SECOND_TICK) == []
    gone = [p for p in found(root) if "the anchor records the report of" in p and "it is gone" in p]
    assert len(gone) == 25  # 24 hours and a day


def test_a_report_planted_in_a_future_hour_is_found_alone(history):
    future = hour_dir(history, datetime(2026, 12, 4, 5, tzinfo=UTC))
    future.mkdir(parents=True)
    shutil.copy(hour_dir(history, LAST) / "report.json", future / "report.json")
    problems = found(history, anchored=False)
    assert problems == [f"{future}: a report of hour 2026-12-04T05, after the last hour checked: no writer signs an "
                        "hour before it closes (planted)"], problems


def test_an_edited_or_shortened_anchor_is_found(history):
    anchor = anchor_beside(history)
    lines = anchor.read_bytes().splitlines(keepends=True)
    anchor.write_bytes(b"".join(lines[:3] + lines[4:]))  # a line taken out of the middle
    assert f"{anchor}:4: it does not follow the line before it: lines were removed, reordered or inserted" \
        in found(history)
    edited = lines[5].replace(b'"records":0', b'"records":7')
    anchor.write_bytes(b"".join(lines[:5] + [edited] + lines[6:]))
    assert f"{anchor}:6: its signature does not verify with the report public key: the line was forged or edited" \
        in found(history)


def test_pruned_segments_are_accounted_for_and_deleted_ones_are_not(history):
    key = history / "keys" / "r.key"
    anchor = Anchor(anchor_beside(history))
    removed = prune(history / "audit", history / "reports", 184, key, RETAINED_UNTIL, anchor)
    assert [p.name for p in removed] == ["decisions-replica-a-0-20261202T10.jsonl"]  # the later one is in retention
    assert found(history) == []  # pruned, as the anchor records
    assert any("decisions-replica-a-0-20261202T10.jsonl" in p and "gone (deleted)" in p
               for p in found(history, anchored=False))  # without the anchor a prune looks like a deletion
    (history / "audit" / "decisions-replica-a-1-20261202T11.jsonl").unlink()  # deleted within retention
    assert any("decisions-replica-a-1-20261202T11.jsonl" in p and "gone (deleted)" in p for p in found(history))
    anchor.append({"kind": "prune", "segments": [{"file": "decisions-replica-a-1-20261202T11.jsonl", "records": 2,
                                                  "bytes": 10}]}, load_private_key(key), NOW)  # the wrong size
    assert any("the pruned range does not match" in p for p in found(history))


def test_a_segment_cut_short_before_its_prune_is_kept(history):
    segment = history / "audit" / "decisions-replica-a-0-20261202T10.jsonl"
    segment.write_bytes(segment.read_bytes()[: -len(segment.read_bytes().splitlines(keepends=True)[-1])])
    anchor = Anchor(anchor_beside(history))
    assert prune(history / "audit", history / "reports", 184, history / "keys" / "r.key",
                 RETAINED_UNTIL, anchor) == []
    assert segment.exists() and not anchor.pruned()


def test_a_segment_the_audit_system_does_not_have_whole_is_kept_past_retention(history):
    """With audit.forward on, retention prunes a segment only once the forwarder's cursor covers it."""
    from webhook.audit.delivery import Cursor, Delivered

    url = "relp://collector.example:2514"
    audit = history / "audit"
    segment = audit / "decisions-replica-a-0-20261202T10.jsonl"
    size = segment.stat().st_size
    key, anchor = history / "keys" / "r.key", Anchor(anchor_beside(history))
    assert prune(audit, history / "reports", 184, key, RETAINED_UNTIL, anchor, url) == []  # nothing delivered
    Cursor(audit, url, {segment.name: Delivered(size - 1, 4)}).save([segment.name])
    assert prune(audit, history / "reports", 184, key, RETAINED_UNTIL, anchor, url) == []  # not whole
    Cursor(audit, "relp://another:2514", {segment.name: Delivered(size, 5)}).save([segment.name])
    assert prune(audit, history / "reports", 184, key, RETAINED_UNTIL, anchor, url) == []  # another collector's
    assert segment.exists() and not anchor.pruned()
    Cursor(audit, url, {segment.name: Delivered(size, 5)}).save([segment.name])
    assert prune(audit, history / "reports", 184, key, RETAINED_UNTIL, anchor, url) == [segment]


def test_a_torn_line_in_a_reported_hour_can_be_sealed(history, tmp_path):
    segment = history / "audit" / "decisions-replica-a-1-20261202T11.jsonl"
    with open(segment, "ab") as handle:
        handle.write(b'{"time": "2026-12-02T11:59:59')  # a crash cut the last write
    config = tmp_path / "vgate.yaml"
    config.write_text(yaml.safe_dump(settings(history)))
    verify = [*VGATE, "audit", "verify", "--config", str(config), "--to", "2026-12-02T23"]
    torn = subprocess.run(verify, capture_output=True, text=True, timeout=60)
    assert torn.returncode == 1 and "torn" in torn.stdout, torn.stdout
    sealed = subprocess.run([*VGATE, "audit", "seal", str(segment), "--reason", "node lost power, INC-12",
                             "--config", str(config)], capture_output=True, text=True, timeout=60)
    assert sealed.returncode == 0, sealed.stderr
    clean = subprocess.run(verify, capture_output=True, text=True, timeout=60)
    assert clean.returncode == 0 and "acknowledged" in clean.stdout and ", 0 problems" in clean.stdout, clean.stdout


def test_an_hour_before_the_genesis_is_not_signed(history):
    with pytest.raises(NotReportable, match="is before the first report, the genesis"):
        build_report(STARTED - timedelta(hours=3), history / "audit", history / "reports", POLICIES,
                     history / "keys" / "r.key")
