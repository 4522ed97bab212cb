"""The decision log: durable, hash-chained, and every alteration found by `vgate audit verify`."""

from __future__ import annotations

import json
import subprocess
import threading
import time
from pathlib import Path

from webhook.audit.log import GENESIS, DecisionLog
from webhook.audit.verify import verify_segments

from helpers import VGATE, pod, review, shipped_config


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
        [*VGATE, "audit", "verify", "--dir", str(directory)], capture_output=True, text=True, timeout=60
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


def test_server_log_verifies_and_unwritable_log_denies(tmp_path, server, start_server):
    server.post("/validate", review(pod(), uid="chain-1"))
    assert vgate_verify(server.audit_dir).returncode == 0
    blocked = tmp_path / "not-a-directory"
    blocked.write_text("a file where the decision log directory should be")
    broken = start_server(workers=1, audit_dir=blocked)
    broken.post("/validate", review(pod(), uid="forged\n2026-12-03 INFO vgate fake line"))
    response = broken.post("/validate", review(pod(), uid="unrecorded")).json()["response"]
    assert response["allowed"] is False and response["status"]["code"] == 500
    assert "nothing is admitted unrecorded" in response["status"]["message"]
    assert "decision log write failed, validate unrecorded is unrecorded" in broken.output()
    assert "forged\\x0a2026-12-03 INFO vgate fake line" in broken.output()  # one record, one line
    metrics = broken.session.get(broken.url + "/metrics").text
    assert 'vgate_errors_total{endpoint="validate",reason="audit"} 2.0' in metrics


def test_dry_runs_are_recorded_as_such(server):
    sent = review(pod(namespace="ml-training"), uid="dry-1", dry_run=True)
    server.post("/validate", sent)
    record = next(r for r in server.decisions() if r.get("uid") == "dry-1")
    assert record["dryRun"] is True and record["resource"] == "pods" and len(record["prev"]) == 64


def test_kill_9_loses_no_answered_decision(tmp_path, start_server):
    """Responses are sent only after their record is on disk: a SIGKILL mid-traffic loses none."""
    import os
    import signal

    import requests

    server = start_server(workers=1)
    answered: list[str] = []
    stop = threading.Event()

    def traffic() -> None:
        n = 0
        while not stop.is_set():
            uid = f"kill-{n}"
            try:
                response = server.session.post(
                    server.url + "/validate", data=json.dumps(review(pod(), uid=uid)), timeout=5
                )
            except requests.RequestException:
                return
            if response.status_code == 200:
                answered.append(uid)
            n += 1

    client = threading.Thread(target=traffic)
    client.start()
    deadline = time.monotonic() + 10
    while len(answered) < 50 and time.monotonic() < deadline:
        time.sleep(0.05)
    worker_pids = subprocess.run(
        ["pgrep", "-P", str(server.process.pid)], capture_output=True, text=True
    ).stdout.split()
    os.kill(server.process.pid, signal.SIGKILL)
    for pid in worker_pids:
        os.kill(int(pid), signal.SIGKILL)
    stop.set()
    client.join()
    recorded = {r.get("uid") for r in server.decisions_tolerant()}
    assert len(answered) >= 50
    assert set(answered) <= recorded, "an answered decision is missing from the log"
    good, findings = verify_segments(server.audit_dir)
    assert good >= len(answered)
    assert all("torn last record" in f.problem for f in findings), findings


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
    result = subprocess.run(verify, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout
    assert "torn last record" in result.stdout and "acknowledged" in result.stdout
    assert "node crash INC-77" in result.stdout
    assert "29 records verified, 0 problems" in result.stdout
    segment.write_bytes(segment.read_bytes()[:-3])  # changed after sealing: the seal no longer covers it
    assert subprocess.run(verify, capture_output=True, text=True, timeout=60).returncode == 1
    whole = write_records(tmp_path / "whole")
    refused = subprocess.run(
        [*VGATE, "audit", "seal", str(whole), "--reason", "x", "--config", str(config)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert refused.returncode == 1 and "nothing to acknowledge" in refused.stderr


def test_readyz_drains_a_replica_whose_log_fails_and_recovers_by_itself(tmp_path, start_server):
    """After audit.unreadyAfterFailures failed writes /readyz answers 503 (the Service stops sending
    admission requests there); once the volume takes writes again it is ready, with no restart."""
    audit = tmp_path / "audit-volume"
    audit.write_text("the volume is not there: a file where the log directory should be")
    server = start_server(workers=1, audit_dir=audit, config_text=shipped_config(audit={"unreadyAfterFailures": 2}))
    for n in range(2):
        assert server.post("/validate", review(pod(), uid=f"lost-{n}")).json()["response"]["allowed"] is False
    ready = server.session.get(server.url + "/readyz", timeout=10)
    assert ready.status_code == 503
    assert ready.json() == {"error": "decision log unavailable: 2 writes failed in a row", "status": 503}
    audit.unlink()
    audit.mkdir()  # the volume is back
    assert server.session.get(server.url + "/readyz", timeout=10).status_code == 200
    assert server.post("/validate", review(pod(), uid="after")).json()["response"]["allowed"] is True
