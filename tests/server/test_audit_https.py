"""Audit: the tests that start vgate over HTTPS (the rest: tests/unit/audit/test_audit.py)."""

from __future__ import annotations

import json
import subprocess
import threading
import time
from pathlib import Path

from audit.test_audit import vgate_verify

from e2e.waiting import eventually
from webhook.audit.verify import verify_segments

from helpers import pod, review, shipped_config


def test_server_log_verifies_and_unwritable_log_denies(tmp_path, server, start_server):
    server.post("/validate", review(pod(), uid="chain-1"))
    assert vgate_verify(server.audit_dir).returncode == 0
    blocked = tmp_path / "not-a-directory"
    blocked.write_text("a file where the decision log directory should be")
    broken = start_server(workers=1, audit_dir=blocked, ready_path="/healthz")  # unready from the start
    broken.post("/validate", review(pod(), uid="forged\n2026-12-03 INFO vgate fake line"))
    response = broken.post("/validate", review(pod(), uid="unrecorded")).json()["response"]
    assert response["allowed"] is False and response["status"]["code"] == 500
    assert "nothing is admitted unrecorded" in response["status"]["message"]
    assert "decision log write failed, validate unrecorded is unrecorded" in broken.output()
    assert "forged\\x0a2026-12-03 INFO vgate fake line" in broken.output()  # one record, one line
    metrics = broken.session.get(broken.url + "/metrics").text
    assert 'vgate_errors_total{endpoint="validate",reason="audit"} 2.0' in metrics
    # /mutate follows audit.failureMode too (the docs once said it was /validate's alone): refused under
    # deny; under allow, answered with its patch and the failure said.
    mutated = broken.post("/mutate", review(pod(namespace="ml-training"), uid="m-1")).json()["response"]
    assert mutated["allowed"] is False and "nothing is admitted unrecorded" in mutated["status"]["message"]
    lenient = start_server(workers=1, audit_dir=blocked, config_text=shipped_config(audit={"failureMode": "allow"}),
                           ready_path="/healthz")
    mutated = lenient.post("/mutate", review(pod(namespace="ml-training"), uid="m-2")).json()["response"]
    assert mutated["allowed"] is True and mutated.get("patch"), mutated


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


def test_readyz_drains_a_replica_whose_log_fails_and_recovers_by_itself(tmp_path, start_server):
    """A decision log it cannot write at start (the volume not there, another uid's, full): /readyz
    answers 503 from the first probe, naming the directory and why (the Service never sends it an
    admission request to refuse); once the volume takes writes again it is ready, with no restart."""
    audit = tmp_path / "audit-volume"
    audit.write_text("the volume is not there: a file where the log directory should be")
    server = start_server(workers=1, audit_dir=audit, config_text=shipped_config(audit={"unreadyAfterFailures": 2}),
                          ready_path="/healthz")
    ready = server.session.get(server.url + "/readyz", timeout=10)
    assert ready.status_code == 503
    assert ready.json() == {"error": f"decision log unavailable in {audit}: File exists "
                                     "(2 more writes failed than succeeded)", "status": 503}
    assert f"cannot write the decision log in {audit} (File exists)" in server.output()
    for n in range(2):
        assert server.post("/validate", review(pod(), uid=f"lost-{n}")).json()["response"]["allowed"] is False
    assert server.session.get(server.url + "/readyz", timeout=10).status_code == 503
    audit.unlink()
    audit.mkdir()  # the volume is back
    assert server.session.get(server.url + "/readyz", timeout=10).status_code == 200
    assert server.post("/validate", review(pod(), uid="after")).json()["response"]["allowed"] is True


def test_every_worker_records_a_heartbeat_at_start_in_its_own_chain(tmp_path, start_server):
    """A worker that receives no request still shows in the log: an idle hour is told from an outage
    (tests/unit/reports/test_availability.py reads the beats into the report)."""
    idle = start_server(workers=2)
    def beating() -> dict[str, list[dict]]:
        found: dict[str, list[dict]] = {}
        for path in Path(idle.audit_dir).glob("decisions-*.jsonl"):
            records = [json.loads(line) for line in path.read_text().splitlines()]
            found[path.name] = [r for r in records if r.get("event") == "heartbeat"]
        return found
    writers = eventually(lambda: (found := beating()) and len(found) == 2 and all(found.values()) and found,
                         timeout=15)
    assert writers, beating()  # both workers' segments, each with its own beat, and nothing else
    assert all(b["intervalSeconds"] == 60 and b["policyRevision"] for beats in writers.values() for b in beats)
    assert verify_segments(idle.audit_dir)[1] == []
