"""A signed report binds the exact log it summarised; only closed hours are reported, once, atomically.

An insider with write access to the audit volume (and no key) tries each way of changing the
evidence of an hour already reported; every one must be found by `vgate audit verify`.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

import orjson
import pytest

from webhook.audit.log import GENESIS
from webhook.audit.verify import verify_segments
from webhook.core.errors import NotReportable
from webhook.reports.anchor import Anchor
from webhook.reports.build import build_report, hour_directory
from webhook.reports.keys import ensure_key, public_key_path
from webhook.reports.verify import verify_reports

from helpers import POLICIES, ROOT, VGATE, anchor_beside

# Noon yesterday: closed whenever the tests run, and with the hours around it inside one day, so no
# day is complete (a complete day must have a daily report, which only some tests build).
HOUR = (datetime.now(timezone.utc) - timedelta(days=1)).replace(hour=12, minute=0, second=0, microsecond=0)
TAG = HOUR.strftime("%Y%m%dT%H")


def record_lines(count: int, prev: str = GENESIS, writer: str = "replica-a-1", start: int = 0) -> list[bytes]:
    """A writer's chained records in HOUR, as the decision log writes them."""
    lines = []
    for n in range(start, start + count):
        line = orjson.dumps({"time": f"{HOUR:%Y-%m-%dT%H}:{n % 60:02d}:00.000000+00:00", "replica": writer,
                             "endpoint": "validate", "uid": f"{writer}-{n}", "decision": "allowed", "prev": prev})
        prev = hashlib.sha256(line).hexdigest()
        lines.append(line)
    return lines


def write_segment(audit: Path, writer: str, lines: list[bytes]) -> Path:
    path = audit / f"decisions-{writer}-{TAG}.jsonl"
    path.write_bytes(b"".join(line + b"\n" for line in lines))
    return path


@pytest.fixture
def reported(tmp_path):
    """Two writers' segments of HOUR, reported and signed (and anchored); the hours around it too."""
    audit, reports, key = tmp_path / "audit", tmp_path / "reports", tmp_path / "keys" / "r.key"
    audit.mkdir()
    ensure_key(key)
    write_segment(audit, "replica-a-1", record_lines(40))
    write_segment(audit, "replica-b-7", record_lines(12, writer="replica-b-7"))
    for hour in (HOUR - timedelta(hours=1), HOUR, HOUR + timedelta(hours=1)):
        build_report(hour, audit, reports, POLICIES, key, anchor=Anchor(anchor_file(tmp_path)))
    return audit, reports, key


def anchor_file(tmp_path: Path) -> Path:
    return anchor_beside(tmp_path)


def config_file(tmp_path: Path, audit: Path, reports: Path, key: Path) -> Path:
    config = tmp_path / "vgate.yaml"
    config.write_text(f"audit: {{dir: {audit}}}\nreports: {{dir: {reports}, key: {key}, "
                      f"anchorFile: {anchor_file(tmp_path)}}}\n")
    return config


def problems(audit: Path, reports: Path, key: Path, until: datetime | None = HOUR + timedelta(hours=1)) -> list[str]:
    _, chain = verify_segments(audit)
    return [str(f) for f in chain + verify_reports(reports, public_key_path(key), audit_dir=audit, until=until)]


def test_an_untouched_log_verifies_and_the_report_lists_what_it_signed(reported):
    audit, reports, key = reported
    assert problems(audit, reports, key) == []
    signed = json.loads((hour_directory(reports, HOUR) / "report.json").read_text())["segments"]
    assert [(s["file"], s["records"]) for s in signed] == [(f"decisions-replica-a-1-{TAG}.jsonl", 40),
                                                          (f"decisions-replica-b-7-{TAG}.jsonl", 12)]


def test_a_truncated_tail_is_found(reported):
    audit, reports, key = reported
    segment = audit / f"decisions-replica-a-1-{TAG}.jsonl"
    segment.write_bytes(b"".join(line + b"\n" for line in segment.read_bytes().splitlines()[:37]))
    assert any(f"{segment}:38: the segment ends after 37 records where the report of" in p and "truncated" in p
               for p in problems(audit, reports, key))


def test_a_deleted_segment_of_a_dead_writer_is_found(reported):
    audit, reports, key = reported
    (audit / f"decisions-replica-b-7-{TAG}.jsonl").unlink()
    assert any(
        "lists this segment with 12 records, and it is gone (deleted)" in p for p in problems(audit, reports, key)
    )


def test_a_forged_writers_segment_added_to_a_reported_hour_is_found(reported):
    audit, reports, key = reported
    forged = write_segment(audit, "forged-9", record_lines(5, writer="forged-9"))  # a valid chain of its own
    assert f"{forged}: a segment of {HOUR:%Y-%m-%dT%H} that its signed report does not list (added after signing)" in (
        problems(audit, reports, key)
    )


def test_records_appended_with_a_correct_prev_are_found(reported):
    audit, reports, key = reported
    segment = audit / f"decisions-replica-a-1-{TAG}.jsonl"
    lines = segment.read_bytes().splitlines()
    more = record_lines(3, prev=hashlib.sha256(lines[-1]).hexdigest(), start=40)
    segment.write_bytes(b"".join(line + b"\n" for line in [*lines, *more]))
    found = problems(audit, reports, key)
    assert f"{segment}:41: 3 records appended after the report of {HOUR:%Y-%m-%dT%H} signed 40 records" in found
    assert not any("chain broken" in p for p in found)  # the chain alone could not tell


def test_a_denial_turned_into_an_allow_with_the_chain_recomputed_is_found(reported):
    audit, reports, key = reported
    segment = audit / f"decisions-replica-a-1-{TAG}.jsonl"
    records = [orjson.loads(line) for line in segment.read_bytes().splitlines()]
    records[20]["decision"] = "denied-then-edited"
    prev, lines = GENESIS, []
    for record in records:  # recompute every link, as an insider with a shell would
        line = orjson.dumps({**record, "prev": prev})
        prev = hashlib.sha256(line).hexdigest()
        lines.append(line)
    segment.write_bytes(b"".join(line + b"\n" for line in lines))
    found = problems(audit, reports, key)
    assert not any("chain broken" in p for p in found)
    assert any(f"{segment}:40: record 40 is not the last record the report" in p for p in found)


def test_deleting_the_newest_hours_and_then_all_reports_is_found(reported):
    audit, reports, key = reported
    newest = hour_directory(reports, HOUR + timedelta(hours=1))
    for path in newest.iterdir():
        path.unlink()
    newest.rmdir()
    assert f"{newest}: no report for hour {HOUR + timedelta(hours=1):%Y-%m-%dT%H}" in problems(audit, reports, key)
    for hour in (HOUR - timedelta(hours=1), HOUR):
        directory = hour_directory(reports, hour)
        for path in directory.iterdir():
            path.unlink()
        directory.rmdir()
    assert f"{hour_directory(reports, HOUR)}: no report for hour {HOUR:%Y-%m-%dT%H}" in problems(audit, reports, key)


def test_open_and_future_hours_are_refused_and_a_signed_hour_is_never_rewritten(reported, tmp_path):
    audit, reports, key = reported
    now = datetime.now(timezone.utc)
    for hour in (now.replace(minute=0, second=0, microsecond=0), datetime(2030, 1, 1, tzinfo=timezone.utc)):
        with pytest.raises(NotReportable) as refused:
            build_report(hour, audit, reports, POLICIES, key, now=now)
        assert refused.value.usage
    with pytest.raises(NotReportable, match="exists .* never rewritten: write a new version with --reissue"):
        build_report(HOUR, audit, reports, POLICIES, key)
    config = config_file(tmp_path, audit, reports, key)
    future = subprocess.run(
        [*VGATE, "report", "--hour", "2030-01-01T00", "--config", str(config)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert future.returncode == 2 and "is in the future" in future.stderr and "Traceback" not in future.stderr
    again = subprocess.run(
        [*VGATE, "report", "--hour", f"{HOUR:%Y-%m-%dT%H}", "--config", str(config), "--policies", str(POLICIES)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert again.returncode == 1 and "never rewritten" in again.stderr


def test_a_reissued_hour_keeps_the_old_version_and_the_chain_verifies(reported):
    audit, reports, key = reported
    directory = hour_directory(reports, HOUR)
    old_sums = (directory / "SHA256SUMS").read_bytes()
    build_report(
        HOUR, audit, reports, POLICIES, key, reissue_reason="INC-7: a policy's METADATA mapped the wrong control"
    )
    reissue = json.loads((directory / "report.json").read_text())["reissue"]
    assert reissue == {
        "version": 2,
        "reason": "INC-7: a policy's METADATA mapped the wrong control",
        "supersedes": hashlib.sha256(old_sums).hexdigest(),
    }
    assert (directory / "superseded" / "1" / "SHA256SUMS").read_bytes() == old_sums
    assert problems(audit, reports, key) == []  # the next hour links the superseded version: accepted


def test_a_reissue_cannot_be_undone_nor_a_version_planted_under_superseded(reported):
    """Without the key: delete superseded/ (undo a reissue), or plant another hour's signed report there."""
    audit, reports, key = reported
    directory = hour_directory(reports, HOUR)
    build_report(HOUR, audit, reports, POLICIES, key, reissue_reason="INC-7: remapped control")
    shutil.rmtree(directory / "superseded")
    found = problems(audit, reports, key)
    assert any("which is not under superseded/: the older version was removed" in p for p in found), found
    build_report(HOUR, audit, reports, POLICIES, key, reissue_reason="INC-8: again")  # (the removal stays found)
    before = hour_directory(reports, HOUR - timedelta(hours=1))
    shutil.copytree(before, directory / "superseded" / "9")  # a signed version, linkable if it counted
    found = problems(audit, reports, key)
    assert any("superseded/9 is a version no reissue supersedes: it does not count" in p for p in found), found
    assert any("sits in the directory of" in p for p in found), found


def test_a_writer_killed_in_the_middle_of_publication_leaves_no_partial_hour(reported, tmp_path):
    audit, reports, key = reported
    hour = HOUR + timedelta(hours=2)
    script = (
        "import os, signal, sys\n"
        "from datetime import datetime\n"
        "import webhook.reports.build as build\n"
        "def killed(*args, **kwargs):\n"
        "    os.kill(os.getpid(), signal.SIGKILL)\n"
        "import webhook.reports.render_html as html\n"
        "html.render_html = killed  # after report.json and report.csv, before the rest\n"
        f"build.build_report(datetime.fromisoformat({hour.isoformat()!r}), {str(audit)!r}, {str(reports)!r},"
        f" {str(POLICIES)!r}, {str(key)!r})\n"
    )
    died = subprocess.run(
        [sys.executable, "-c", script],
        cwd=ROOT,
        capture_output=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert died.returncode == -signal.SIGKILL
    assert not hour_directory(reports, hour).exists()  # nothing half-written is visible
    leftovers = list(reports.glob(".building-*"))
    assert len(leftovers) == 1 and (leftovers[0] / "report.json").is_file()
    assert f"{leftovers[0]}: an interrupted report build left this behind (never published)" in problems(
        audit, reports, key, until=hour
    )


def test_verify_names_the_key_it_trusted(reported, tmp_path):
    audit, reports, key = reported
    config = config_file(tmp_path, audit, reports, key)
    beside = subprocess.run(
        [*VGATE, "audit", "verify", "--config", str(config), "--to", f"{HOUR + timedelta(hours=1):%Y-%m-%dT%H}"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert beside.returncode == 0, beside.stdout
    assert "the key beside the reports, trusted: pass --pubkey with the key you hold" in beside.stdout
    other = tmp_path / "auditor.key"
    ensure_key(other)
    held = subprocess.run(
        [
            *VGATE,
            "audit",
            "verify",
            "--config",
            str(config),
            "--pubkey",
            str(public_key_path(other)),
            "--to",
            f"{HOUR + timedelta(hours=1):%Y-%m-%dT%H}",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert held.returncode == 1 and "(the key you gave)" in held.stdout and "SHA256:" in held.stdout
    assert "signature does not verify with the report public key" in held.stdout


AUDITOR_CHECK = """set -e
cd "$HOUR_DIR"
sha256sum -c SHA256SUMS
openssl pkeyutl -verify -pubin -inkey "$PUBKEY" -rawin -in SHA256SUMS -sigfile SHA256SUMS.sig
grep -o '"sha256sumsDigest": *"[0-9a-f]*"' report.json | grep -o '[0-9a-f]\\{64\\}'
sha256sum "$PREVIOUS_DIR/SHA256SUMS" | cut -d' ' -f1
"""


def test_an_auditor_verifies_a_report_with_sha256sum_and_openssl_alone(reported):
    """The README's check, run as written with the real tools: checksums, signature, the previous-hour link."""
    audit, reports, key = reported
    env = {**os.environ, "HOUR_DIR": str(hour_directory(reports, HOUR)), "PUBKEY": str(public_key_path(key)),
           "PREVIOUS_DIR": str(hour_directory(reports, HOUR - timedelta(hours=1)))}
    checked = subprocess.run(["bash", "-c", AUDITOR_CHECK], capture_output=True, text=True, env=env, timeout=60)
    assert checked.returncode == 0, checked.stderr
    lines = checked.stdout.splitlines()
    assert "report.json: OK" in lines and "Signature Verified Successfully" in lines
    assert lines[-1] == lines[-2]  # the link this report signed is the previous hour's SHA256SUMS digest
    sums = hour_directory(reports, HOUR) / "SHA256SUMS"
    sums.write_text("".join(reversed(sums.read_text().splitlines(keepends=True))))  # checksums still hold...
    tampered = subprocess.run(["bash", "-c", AUDITOR_CHECK], capture_output=True, text=True, env=env, timeout=60)
    assert tampered.returncode != 0 and "report.json: OK" in tampered.stdout  # ...the signature does not
    assert "Signature Verification Failure" in tampered.stdout + tampered.stderr


def chained(records: list[dict]) -> list[bytes]:
    prev, lines = GENESIS, []
    for record in records:
        line = orjson.dumps({**record, "prev": prev})
        prev = hashlib.sha256(line).hexdigest()
        lines.append(line)
    return lines


def test_a_report_says_what_auditors_ask_for(tmp_path):
    """Rows and denials in time order across writers, errors with their reasons, each exception with
    its justification, approver, ticket, expiry and every use; one integrity finding, singular."""
    audit, reports, key = tmp_path / "audit", tmp_path / "reports", tmp_path / "keys" / "r.key"
    audit.mkdir()
    ensure_key(key)
    at = f"{HOUR:%Y-%m-%dT%H}"
    excepted = {"id": "network-no-external", "action": "excepted", "message": "hostNetwork",
                "exception": "hostnet-debug"}
    details = {
        "name": "hostnet-debug",
        "justification": "packet capture for INC-42",
        "approver": "secops-lead",
        "ticket": "SEC-1234",
        "expiresAt": "2027-01-31T00:00:00+00:00",
    }
    write_segment(
        audit,
        "replica-a-1",
        chained(
            [
                {
                    "time": f"{at}:05:00.000000+00:00",
                    "uid": "a-denied",
                    "decision": "denied",
                    "endpoint": "validate",
                    "rules": [{"id": "security-privileged-container", "action": "deny", "message": "privileged"}],
                },
                {
                    "time": f"{at}:40:00.000000+00:00",
                    "uid": "a-excepted",
                    "decision": "allowed",
                    "endpoint": "validate",
                    "namespace": "ml-training",
                    "name": "feature-store",
                    "rules": [excepted],
                    "exceptions": [details],
                },
            ]
        ),
    )
    write_segment(
        audit,
        "replica-b-7",
        chained(
            [
                {
                    "time": f"{at}:01:00.000000+00:00",
                    "uid": "b-error",
                    "decision": "error",
                    "endpoint": "validate",
                    "allowed": False,
                    "error": "OPA at http://opa:8181 did not answer within 2.0s",
                },
                {
                    "time": f"{at}:20:00.000000+00:00",
                    "uid": "b-denied",
                    "decision": "denied",
                    "endpoint": "validate",
                    "rules": [{"id": "scheduling-node-name-bypass", "action": "deny", "message": "nodeName"}],
                },
            ]
        ),
    )
    build_report(HOUR - timedelta(hours=2), tmp_path / "no-log", reports, POLICIES, key)
    out = build_report(HOUR, audit, reports, POLICIES, key)
    report = json.loads((out / "report.json").read_text())
    rows = [line.split(",")[3] for line in (out / "report.csv").read_text().splitlines()[1:]]
    assert rows == ["b-error", "a-denied", "b-denied", "a-excepted"]  # time order, not writer order
    assert [d["uid"] for d in report["denials"]] == ["b-error", "a-denied", "b-denied"]
    assert report["errors"] == [
        {
            "time": f"{at}:01:00.000000+00:00",
            "endpoint": "validate",
            "uid": "b-error",
            "user": None,
            "operation": None,
            "kind": None,
            "namespace": None,
            "name": None,
            "httpStatus": None,
            "error": "OPA at http://opa:8181 did not answer within 2.0s",
            "allowed": False,
            "message": None,
        }
    ]
    used = report["exceptionsUsed"]["hostnet-debug"]
    assert {k: used[k] for k in ("justification", "approver", "ticket", "expiresAt")} == {
        k: v for k, v in details.items() if k != "name"
    }
    assert used["rules"] == {"network-no-external": 1} and [u["uid"] for u in used["uses"]] == ["a-excepted"]
    html = (out / "report.html").read_text()
    assert "OPA at http://opa:8181 did not answer within 2.0s" in html and "packet capture for INC-42" in html
    assert "1 integrity finding:" in html and "1 finding<" in html and "1 findings" not in html  # an hour skipped


def test_a_daily_report_sums_and_binds_its_24_hours(tmp_path):
    """Once a day is over: its totals from the 24 signed hours, their digests, signed; verify checks it."""
    from webhook.reports.daily import build_daily, daily_directory

    audit, reports, key = tmp_path / "audit", tmp_path / "reports", tmp_path / "keys" / "r.key"
    audit.mkdir()
    ensure_key(key)
    day = (datetime.now(timezone.utc) - timedelta(days=2)).date()
    start = datetime(day.year, day.month, day.day, tzinfo=timezone.utc)
    for hour in (start + timedelta(hours=n) for n in range(24)):
        build_report(hour, audit, reports, POLICIES, key)
    until = start + timedelta(hours=23)
    assert f"{daily_directory(reports, day)}: no daily report for {day}" in problems(audit, reports, key, until)
    with pytest.raises(NotReportable, match="has not closed yet"):
        build_daily(day, reports, key, now=until)
    out = build_daily(day, reports, key, now=datetime.now(timezone.utc))
    daily = json.loads((out / "report.json").read_text())
    assert daily["kind"] == "DailyComplianceReport" and len(daily["hourlyReports"]) == 24
    assert daily["totals"]["decisions"] == 0 and {r["id"] for r in daily["perRule"]} >= {"placement-single-zone"}
    # no heartbeat and no decision in any hour: 24 hours no vgate recorded, not a quiet day
    assert daily["availability"] == {"upMinutes": 0, "hoursWithoutRecord": [
        f"{start + timedelta(hours=n):%Y-%m-%dT%H}" for n in range(24)], "gaps": []}
    assert problems(audit, reports, key, until) == []
    replaced = hour_directory(reports, start + timedelta(hours=5))
    for path in replaced.iterdir():
        path.unlink()
    replaced.rmdir()
    build_report(start + timedelta(hours=5), audit, reports, POLICIES, key)  # an insider with the key
    assert any(f"{replaced}: the report of {start + timedelta(hours=5):%Y-%m-%dT%H} is not the one the daily report"
               in p for p in problems(audit, reports, key, until))


def test_bad_report_requests_get_one_line_and_write_nothing(tmp_path):
    """An unparseable hour, a reports directory that cannot be written, a missing key."""
    key = tmp_path / "keys" / "r.key"
    ensure_key(key)
    blocked = tmp_path / "blocked"
    blocked.write_text("a file where the reports directory should be")
    config = config_file(tmp_path, tmp_path / "audit", blocked / "reports", key)
    base = [*VGATE, "report", "--config", str(config), "--policies", str(POLICIES)]
    garbled = subprocess.run([*base, "--hour", "yesterday"], capture_output=True, text=True, timeout=60)
    assert garbled.returncode == 2 and "is not an hour like 2026-12-02T10" in garbled.stderr
    unwritable = subprocess.run([*base, "--hour", f"{HOUR:%Y-%m-%dT%H}"], capture_output=True, text=True, timeout=60)
    assert unwritable.returncode == 1 and f"{blocked}" in unwritable.stderr
    assert "cannot write the report" in unwritable.stderr
    for result in (garbled, unwritable):
        assert "Traceback" not in result.stderr and result.stderr.strip().splitlines()[-1].startswith("Error: ")
    assert blocked.read_text().startswith("a file")  # nothing half-written
