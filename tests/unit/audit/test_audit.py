"""The decision log: durable, hash-chained, and every alteration found by `vgate audit verify`."""

from __future__ import annotations

import atexit
import json
import os
import shutil
import subprocess
import tempfile
import threading
from pathlib import Path

import pytest

from webhook.audit.log import GENESIS, DecisionLog
from webhook.audit.verify import verify_segments

from helpers import VGATE

# `audit verify` also checks the reports its config's anchor file lists, by default under $HOME. These
# tests judge the decision log alone, so they run it with an empty home of their own: a server run by
# hand (a bench) across an hour boundary leaves an anchor in the real one.
OWN_HOME = {**os.environ, "HOME": tempfile.mkdtemp(prefix="vgate-test-home-")}
atexit.register(shutil.rmtree, OWN_HOME["HOME"], True)  # it stays empty; removed with the test session


def write_records(directory: Path, count: int = 30, threads: int = 6) -> Path:
    log = DecisionLog(directory, replica="unit")

    def work(offset: int) -> None:
        for i in range(count // threads):
            log.record({"endpoint": "validate", "uid": f"u{offset}-{i}", "decision": "allowed"})

    workers = [threading.Thread(target=work, args=(n,)) for n in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    [segment] = directory.glob("decisions-*.jsonl")
    return segment


def vgate_verify(directory: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*VGATE, "audit", "verify", "--dir", str(directory)], capture_output=True, text=True, timeout=60, env=OWN_HOME
    )


def test_records_from_many_threads_form_one_intact_chain(tmp_path):
    segment = write_records(tmp_path)
    lines = segment.read_text().splitlines()
    assert len(lines) == 30 and segment.stat().st_mode & 0o777 == 0o600
    assert json.loads(lines[0])["prev"] == GENESIS
    assert len({json.loads(line)["uid"] for line in lines}) == 30
    assert verify_segments(tmp_path) == (30, [])
    result = vgate_verify(tmp_path)
    assert result.returncode == 0 and "30 records verified, 0 problems" in result.stdout


def test_a_changed_record_is_found(tmp_path):
    segment = write_records(tmp_path)
    lines = segment.read_text().splitlines()
    lines[9] = lines[9].replace('"decision":"allowed"', '"decision":"denied"')
    segment.write_text("\n".join(lines) + "\n")
    result = vgate_verify(tmp_path)
    assert result.returncode == 1
    assert f"{segment}:11: chain broken" in result.stdout


def test_a_deleted_record_is_found(tmp_path):
    segment = write_records(tmp_path)
    lines = segment.read_text().splitlines()
    del lines[4]
    segment.write_text("\n".join(lines) + "\n")
    _, findings = verify_segments(tmp_path)
    assert [(f.line, f.problem.split(":")[0]) for f in findings] == [(5, "chain broken")]


def test_a_truncated_segment_reports_the_torn_record(tmp_path):
    segment = write_records(tmp_path)
    data = segment.read_bytes()
    segment.write_bytes(data[:-25])  # what a crash in the middle of a write leaves
    result = vgate_verify(tmp_path)
    assert result.returncode == 1
    assert f"{segment}:30: torn last record" in result.stdout
    assert "29 records verified, 1 problems" in result.stdout


def test_bad_hours_are_a_usage_error(tmp_path):
    result = subprocess.run(
        [*VGATE, "audit", "verify", "--dir", str(tmp_path), "--from", "yesterday"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2 and "is not an hour like 2026-12-02T10" in result.stderr


def test_a_sealed_torn_line_is_acknowledged_until_the_segment_changes(tmp_path):
    """`vgate audit seal` signs what a crash left; verify then reports it as acknowledged, not as a problem."""
    import yaml

    from webhook.reports.keys import ensure_key

    audit = tmp_path / "audit"
    segment = write_records(audit)
    segment.write_bytes(segment.read_bytes()[:-25])
    key = tmp_path / "keys" / "r.key"
    config = tmp_path / "vgate.yaml"
    config.write_text(yaml.safe_dump({"audit": {"dir": str(audit)}, "reports": {"dir": str(tmp_path / "r"),
                                                                                "key": str(key)}}))
    run = [*VGATE, "audit", "seal", str(segment), "--reason", "node crash INC-77", "--config", str(config)]
    unkeyed = subprocess.run(run, capture_output=True, text=True, timeout=60)
    assert unkeyed.returncode == 1 and "no report key" in unkeyed.stderr
    ensure_key(key)
    sealed = subprocess.run(run, capture_output=True, text=True, timeout=60)
    assert sealed.returncode == 0, sealed.stderr
    verify = [*VGATE, "audit", "verify", "--config", str(config)]
    result = subprocess.run(verify, capture_output=True, text=True, timeout=60, env=OWN_HOME)
    assert result.returncode == 0, result.stdout
    assert "torn last record" in result.stdout and "acknowledged" in result.stdout
    assert "node crash INC-77" in result.stdout
    assert "29 records verified, 0 problems" in result.stdout
    segment.write_bytes(segment.read_bytes()[:-3])  # changed after sealing: the seal no longer covers it
    assert subprocess.run(verify, capture_output=True, text=True, timeout=60, env=OWN_HOME).returncode == 1
    whole = write_records(tmp_path / "whole")
    refused = subprocess.run(
        [*VGATE, "audit", "seal", str(whole), "--reason", "x", "--config", str(config)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert refused.returncode == 1 and "nothing to acknowledge" in refused.stderr


def test_an_append_is_made_durable_by_fdatasync_and_undone_when_that_fails(tmp_path, monkeypatch):
    """The sync is what makes a record durable: when it fails, the line is taken back whole."""
    import errno
    import os

    from webhook.audit.log import append_whole

    path = tmp_path / "segment.jsonl"
    path.write_bytes(b'{"first": 1}\n')
    fd = os.open(path, os.O_WRONLY | os.O_APPEND)
    synced: list[int] = []
    monkeypatch.setattr(os, "fdatasync", lambda descriptor: synced.append(descriptor))
    append_whole(fd, b'{"second": 2}\n')
    assert synced == [fd] and path.read_bytes().count(b"\n") == 2

    def failing(descriptor: int) -> None:
        raise OSError(errno.EIO, "the disk did not take it")

    monkeypatch.setattr(os, "fdatasync", failing)
    with pytest.raises(OSError):
        append_whole(fd, b'{"third": 3}\n')
    os.close(fd)
    assert path.read_bytes() == b'{"first": 1}\n{"second": 2}\n'


def test_files_planted_under_segment_names_are_findings_never_followed_read_or_waited_on(tmp_path):
    """An insider who can write the log volume plants a FIFO, a directory, a symbolic link to
    /dev/zero and a file of one endless line, each named like a segment: verify returns within
    seconds, names each, and still checks the real segment (issue 36, hostile files)."""
    import os

    write_records(tmp_path)
    planted = {"fifo": "decisions-x-1-20261204T10.jsonl", "directory": "decisions-y-1-20261204T10.jsonl",
               "symlink": "decisions-z-1-20261204T10.jsonl", "endless": "decisions-w-1-20261204T10.jsonl"}
    os.mkfifo(tmp_path / planted["fifo"])
    (tmp_path / planted["directory"]).mkdir()
    (tmp_path / planted["symlink"]).symlink_to("/dev/zero")
    with open(tmp_path / planted["endless"], "wb") as endless:
        endless.write(b"x" * (9 << 20))
    good, findings = verify_segments(tmp_path)
    assert good > 0  # the real segment's records still verified
    problems = {Path(f.file).name: f.problem for f in findings}
    assert problems[planted["fifo"]] == "not a regular file: a FIFO, not read"
    assert problems[planted["directory"]] == "not a regular file: a directory, not read"
    assert problems[planted["symlink"]] == "not a regular file: a symbolic link, not followed"
    assert problems[planted["endless"]].startswith("a line over 8388608 bytes")


def test_a_restarted_writer_with_the_same_replica_and_pid_starts_a_segment_of_its_own(tmp_path):
    """A restarted container's workers run under the same pod name and, in a fresh PID namespace,
    the same pids: the second process must not append a new chain (from the genesis hash) to the first
    one's file. Two logs of one replica in one process stand for the two processes."""
    first = DecisionLog(tmp_path, replica="pod-0")
    first.record({"event": "before the restart"})
    second = DecisionLog(tmp_path, replica="pod-0")  # the same replica, the same pid
    second.record({"event": "after the restart"})
    assert first.writer != second.writer and first.writer.endswith(f"-{os.getpid()}")
    assert len(list(tmp_path.glob("decisions-pod-0-*.jsonl"))) == 2
    assert verify_segments(tmp_path) == (2, [])
