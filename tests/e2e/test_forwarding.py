"""Issue 37 through the real control plane: pods created through the API server while the audit system
(this control plane's rsyslog, RELP over mutual TLS) is killed, kept away for longer than the
forwarder's longest retry wait, or presents a certificate vgate does not trust. Afterwards every
record of vgate's local log is in the collector's file, and ``vgate audit verify --forwarded`` is
clean. vgate answers the API server throughout."""

from __future__ import annotations

import os
import signal
import subprocess
import time

from e2e import build, cluster
from e2e.collectors import Records, collected_records, local_records
from e2e.kube import Kube
from e2e.waiting import eventually
from webhook.audit.delivery import fully_delivered
from webhook.forward.forwarder import RETRY_SECONDS

from test_admission import TRAINING, pod, unique

AUDIT = cluster.VGATE_DIR / "audit"


def create_pods(kube: Kube, count: int, prefix: str) -> None:
    for _ in range(count):
        result = kube.create(pod(unique(prefix)), namespace=TRAINING, dry_run=True)
        assert result.ok, result.stderr  # admitted (dry run: judged and recorded, nothing runs) while the
        # collector is away: nothing waits for it


def kill_collector() -> None:
    pid = int((cluster.RUN / "pids" / "collector.pid").read_text())
    os.killpg(pid, signal.SIGKILL)
    eventually(lambda: not cluster.running("collector"), timeout=20)


def collected() -> Records:
    out = cluster.COLLECTOR_DIR / "collected.log"
    return collected_records(out.read_bytes().splitlines() if out.exists() else [])[0]  # anchor lines aside


def delivered() -> bool:
    return fully_delivered(AUDIT, cluster.forward_url())


def test_the_audit_system_gets_every_decision_through_outages_and_a_wrong_certificate(kube: Kube):
    create_pods(kube, 5, "fwd-before")
    eventually(delivered, timeout=60)
    kill_collector()  # SIGKILL mid-stream
    create_pods(kube, 10, "fwd-killed")
    cluster.collector_component().start()
    create_pods(kube, 5, "fwd-back")
    eventually(delivered, timeout=120)

    kill_collector()  # away for longer than the longest wait between retries
    started = time.monotonic()
    create_pods(kube, 10, "fwd-long")
    time.sleep(max(0.0, RETRY_SECONDS[1] + 5 - (time.monotonic() - started)))
    assert not delivered()
    cluster.collector_component().start()
    eventually(delivered, timeout=120)

    kill_collector()  # a collector vgate must not trust: nothing is delivered to it
    cluster.collector_component(server="wrong-server").start()
    before = len(collected())
    create_pods(kube, 5, "fwd-wrong")
    time.sleep(5)
    assert not delivered() and len(collected()) == before
    kill_collector()
    cluster.collector_component().start()
    eventually(delivered, timeout=120)

    local = local_records(AUDIT)
    held = collected()
    missing = sorted(set(local) - set(held))
    assert not missing and all(held[place] == digest for place, digest in local.items()), missing[:5]
    verify = subprocess.run([*cluster.VGATE_CLI, "audit", "verify", "--forwarded",
                             str(cluster.COLLECTOR_DIR / "collected.log")], capture_output=True, text=True,
                            timeout=120, cwd=build.ROOT)
    assert verify.returncode == 0, verify.stdout[-3000:] + verify.stderr[-2000:]
    print(f"local {len(local)} records; collector {len(held)} distinct; {verify.stdout.strip().splitlines()[-1]}")
