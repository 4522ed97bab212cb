"""Issue 36: the report writer and verify against someone who can write the evidence volume (no key).

Each test plants or swaps what an insider could, against the real signed history of test_insider
(its fixtures), and checks that verify names it, or the writer neither forgets nor stalls."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from datetime import timedelta

import orjson
import yaml
from test_insider import BUSY, LAST, REISSUED, SECOND_TICK, found, hour_dir, settings

from webhook.core.config import Config
from webhook.core.hours import label as hours_label
from webhook.reports.schedule import ReportScheduler

from helpers import POLICIES, ROOT, VGATE, anchor_beside

NEXT_TICK = SECOND_TICK + timedelta(hours=1, minutes=5)  # 2026-12-03T00 is due


def _tick(root, now=NEXT_TICK):
    return ReportScheduler(lambda: Config("test", settings(root)), lambda: POLICIES).tick(now)


def _killed_at(step, history, root, call):
    """A copy of ``history`` at ``root``, and a real writer run on it by ``call`` (Python, with ``config``
    and ``POLICIES`` bound) and SIGKILLed when it reaches ``step`` of steps.SEQUENCE."""
    subprocess.run(["cp", "-a", str(history), str(root)], check=True)
    subprocess.run(["cp", "-a", str(anchor_beside(history).parent), str(anchor_beside(root).parent)], check=True)
    config = orjson.dumps(settings(root)).decode()
    script = (
        "import os, signal, orjson\n"
        "from datetime import datetime\n"
        "from webhook.core.config import Config\n"
        "from webhook.reports import steps\n"
        "from webhook.reports.schedule import ReportScheduler, write_hour\n"
        f"steps.observer = lambda s: s == {step!r} and os.kill(os.getpid(), signal.SIGKILL)\n"
        f"config = Config('t', orjson.loads({config!r}))\n"
        f"POLICIES = {str(POLICIES)!r}\n"
        f"{call}\n"
    )
    died = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": f"{ROOT}:{ROOT / 'tests'}"})
    assert died.returncode == -signal.SIGKILL, (step, died.stderr[-2000:])


def test_a_sigkill_at_every_step_leaves_nothing_or_what_the_next_writer_completes(history, tmp_path):
    """A real writer is killed at each step of steps.SEQUENCE in turn (not at random); the next tick
    then publishes the hour, and verify finds nothing: no hour is lost, none signed twice."""
    for step in ("staged", "signed", "anchored", "renamed", "published"):
        root = tmp_path / step
        _killed_at(step, history, root, "ReportScheduler(lambda: config, lambda: POLICIES)"
                                        f".tick(datetime.fromisoformat({NEXT_TICK.isoformat()!r}))")
        _tick(root)
        nxt = NEXT_TICK.replace(minute=0) - timedelta(hours=1)
        assert (hour_dir(root, nxt) / "SHA256SUMS").is_file(), step
        assert [p for p in found(root) if "2026-12-03" not in p] == [], (step, found(root))
        assert not list((root / "reports").glob(".building-*")), step


def test_a_reissue_killed_at_every_step_is_undone_whole_or_completed(history, tmp_path):
    """A reissue (version 3 of an hour already reissued once) killed at each step, moving the old
    versions aside ("superseded", killed after the first file moved) included: before the anchor line
    the hour stays at version 2; after it, the next tick publishes version 3 with versions 1 and 2
    kept; verify finds nothing either way."""
    reissued = hour_dir(history, REISSUED)
    first_sums = (reissued / "superseded" / "1" / "SHA256SUMS").read_bytes()
    second_sums = (reissued / "SHA256SUMS").read_bytes()
    for step in ("staged", "signed", "anchored", "superseded", "renamed", "published"):
        root = tmp_path / step
        _killed_at(step, history, root, "write_hour(config, POLICIES, "
                                        f"datetime.fromisoformat({REISSUED.isoformat()!r}), "
                                        f"datetime.fromisoformat({SECOND_TICK.isoformat()!r}), 'INC-31: remapped')")
        _tick(root, SECOND_TICK)
        out = hour_dir(root, REISSUED)
        version = orjson.loads((out / "report.json").read_bytes()).get("reissue", {}).get("version")
        assert version == (2 if step in ("staged", "signed") else 3), step
        kept = [(out / "superseded" / "1" / "SHA256SUMS").read_bytes()]
        if version == 3:
            kept.append((out / "superseded" / "2" / "SHA256SUMS").read_bytes())
        assert kept == [first_sums, second_sums][:len(kept)], step
        assert found(root) == [], (step, found(root))
        assert not list((root / "reports").glob(".building-*")), step


def test_a_staged_file_swapped_while_the_writer_works_is_not_what_it_signs(history, monkeypatch):
    """Once the hour's files are written (step "staged") and before they are signed, the insider
    replaces the staged report.json with one saying there was no traffic. What is signed is what
    the writer computed: SHA256SUMS lists the digest of its own bytes, so the swapped file is a
    finding and the daily sum leaves that hour out (before: the writer read its staging back and
    signed the swapped file, and verify found nothing)."""
    import hashlib

    from webhook.reports import steps

    hour = NEXT_TICK.replace(minute=0) - timedelta(hours=1)
    forged = orjson.dumps({"hour": hours_label(hour), "totals": {"decisions": 0}, "note": "no traffic"})
    swapped = []

    def swap(step):
        if step != "staged" or swapped:
            return
        [staging] = (history / "reports").glob(".building-*")
        computed = (staging / "report.json").read_bytes()
        replacement = staging / "replacement"
        replacement.write_bytes(forged)
        os.replace(replacement, staging / "report.json")  # a new file under the name, as the insider can
        swapped.append(computed)

    monkeypatch.setattr(steps, "observer", swap)
    _tick(history)
    assert swapped, "the writer never reached the step where its staged files are complete"
    out = hour_dir(history, hour)
    listed = dict(line.split()[::-1] for line in (out / "SHA256SUMS").read_text().splitlines())
    assert listed["report.json"] == hashlib.sha256(swapped[0]).hexdigest() != hashlib.sha256(forged).hexdigest()
    problems = found(history, until=hour)
    assert any(str(out) in p and "report.json" in p for p in problems), problems


def test_a_directory_planted_where_the_writer_publishes_is_moved_aside_and_nothing_is_forgotten(history):
    hour = NEXT_TICK.replace(minute=0) - timedelta(hours=1)
    planted = hour_dir(history, hour)
    planted.mkdir(parents=True)
    (planted / "junk").write_text("in the way\n")
    _tick(history)
    assert (hour_dir(history, hour) / "SHA256SUMS").is_file()
    displaced = list((history / "reports").glob(".displaced-*"))
    assert len(displaced) == 1 and (displaced[0] / "junk").is_file()
    assert any("moved it aside" in p for p in found(history))


def test_verify_names_a_planted_fifo_and_symlink_and_returns(history):
    """A FIFO where a report's SHA256SUMS is, a link to /dev/zero where a report.json is: findings, no hang."""
    sums = hour_dir(history, BUSY[1]) / "SHA256SUMS"
    sums.unlink()
    os.mkfifo(sums)
    report = hour_dir(history, LAST) / "report.json"
    report.unlink()
    report.symlink_to("/dev/zero")
    problems = found(history)
    assert any(str(hour_dir(history, BUSY[1])) in p and "a FIFO, not read" in p for p in problems), problems
    assert any(str(report) in p and "a symbolic link, not followed" in p for p in problems), problems


def test_a_hard_linked_lock_never_truncates_what_it_links(history):
    segment = history / "audit" / "decisions-replica-a-1-20261202T11.jsonl"
    before = segment.read_bytes()
    lock = history / "reports" / ".writer.lock"
    lock.unlink(missing_ok=True)
    os.link(segment, lock)
    _tick(history)
    assert segment.read_bytes() == before
    assert os.stat(lock).st_nlink == 1


def test_a_lock_renamed_away_stops_the_writer_before_it_publishes(history):
    from webhook.core.errors import LockLost
    from webhook.reports.writer_lock import writer_lock

    with writer_lock(history / "reports") as lock:
        assert lock is not None
        lock.check()
        os.rename(lock.path, lock.path.with_name("elsewhere"))
        try:
            lock.check()
        except LockLost as lost:
            assert "replaced or renamed" in str(lost) or "unlinked" in str(lost)
        else:
            raise AssertionError("a renamed lock went unnoticed")


def test_a_seal_acknowledges_its_torn_line_only_never_a_finding_that_quotes_torn(history, tmp_path):
    segment = history / "audit" / "decisions-replica-a-1-20261202T11.jsonl"
    lines = segment.read_bytes().splitlines(keepends=True)
    with open(segment, "ab") as handle:
        handle.write(b'{"time": "2026-12-02T11:59:59')
    config = tmp_path / "vgate.yaml"
    config.write_text(yaml.safe_dump(settings(history)))
    sealed = subprocess.run([*VGATE, "audit", "seal", str(segment), "--reason", "INC-12", "--config", str(config)],
                            capture_output=True, text=True, timeout=60)
    assert sealed.returncode == 0, sealed.stderr
    record = orjson.loads(lines[2])
    record["prev"] = "torn" + record["prev"][4:]  # same length: the old seal's sizes still matched
    lines[2] = orjson.dumps(record) + b"\n"
    data = b"".join(lines) + b'{"time": "2026-12-02T11:59:59'
    segment.write_bytes(data)
    verify = subprocess.run([*VGATE, "audit", "verify", "--config", str(config), "--to", "2026-12-02T23"],
                            capture_output=True, text=True, timeout=60)
    assert verify.returncode == 1 and "chain broken" in verify.stdout and "acknowledged" not in verify.stdout, \
        verify.stdout


def test_the_daily_report_sums_only_verified_hours(history):
    """An hour's report.json edited after signing: the day's sum leaves it out and says why (before:
    the edited figure was summed and signed)."""
    from webhook.reports.anchor import Anchor
    from webhook.reports.daily import summarise
    from webhook.reports.keys import load_private_key

    report = hour_dir(history, BUSY[1]) / "report.json"
    document = orjson.loads(report.read_bytes())
    document["totals"]["decisions"] = 1000
    report.write_bytes(orjson.dumps(document))
    key = load_private_key(history / "keys" / "r.key").public_key()
    summed = summarise(BUSY[1].date(), history / "reports", key, Anchor(anchor_beside(history)))
    assert summed["totals"]["decisions"] == 5  # the reissued 10:00 only; 11:00 (6, edited to 1000) not summed
    assert any("not summed: its report.json does not match its signed SHA256SUMS" in f
               for f in summed["integrity"]["findings"]), summed["integrity"]
    assert "verified first" in summed["verification"]
