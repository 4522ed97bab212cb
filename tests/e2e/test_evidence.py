"""The evidence of decisions made through the real API server: the report writer signs them (as
the chart's CronJob runs it, an hour later), anchors what it signed, and an insider who erases the
signed hour from the volume gets neither a clean verify nor a fresh signature for it.

The hour's segments are copied first: vgate keeps serving the cluster (Volcano's controllers call
it too), and an hour still being written is not what this test signs.
"""

from __future__ import annotations

import csv
import json
import shutil
import subprocess
import uuid
from pathlib import Path

import yaml

from e2e import cluster
from e2e.kube import Kube, decisions_for

from helpers import RESTRICTED_SPEC, anchor_beside

NAMESPACE = "ml-training"


def vgate(*args: str) -> subprocess.CompletedProcess[str]:
    """The vgate CLI two hours from now: the hour of the decisions has closed by then."""
    return subprocess.run(["faketime", "+2 hours", *cluster.VGATE_CLI, *args], capture_output=True, text=True,
                          timeout=120, cwd=cluster.ROOT)


def test_decisions_through_the_api_server_are_signed_anchored_and_cannot_be_erased(kube: Kube,
                                                                                  tmp_path: Path) -> None:
    name = f"evidence-{uuid.uuid4().hex[:6]}"
    created = kube.create({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
                           "spec": RESTRICTED_SPEC}, namespace=NAMESPACE)
    assert created.ok, created.stderr
    records = decisions_for(NAMESPACE, name)
    assert {r["endpoint"] for r in records} == {"mutate", "validate"}, records
    hour = records[-1]["time"][:13]  # 2026-12-03T17
    tag = hour.replace("-", "")
    audit = tmp_path / "audit"
    audit.mkdir()
    for segment in (cluster.VGATE_DIR / "audit").glob(f"decisions-*-{tag}.jsonl"):
        shutil.copy(segment, audit / segment.name)
    config = yaml.safe_load((cluster.VGATE_DIR / "vgate.yaml").read_text())
    config["audit"]["dir"] = str(audit)
    config["reports"] = {**config["reports"], "dir": str(tmp_path / "reports"), "key": str(tmp_path / "keys" / "k"),
                         "anchorFile": str(anchor_beside(tmp_path))}
    (tmp_path / "vgate.yaml").write_text(yaml.safe_dump(config))
    common = ("--config", str(tmp_path / "vgate.yaml"))
    policies = ("--policies", str(cluster.VGATE_DIR / "policies"))
    written = vgate("report", "--hour", hour, *common, *policies, "--new-key")
    assert written.returncode == 0, written.stderr
    out = Path(written.stdout.strip())
    rows = list(csv.DictReader((out / "report.csv").open()))
    assert {r["uid"] for r in records} <= {row["uid"] for row in rows}
    in_log = sum(1 for segment in audit.iterdir() for line in segment.read_bytes().splitlines()
                 if b'"event":"heartbeat"' not in line)  # the workers' heartbeats are not decisions
    assert len(rows) == in_log  # every decision of the hour, the pod's among them
    report = json.loads((out / "report.json").read_text())
    assert report["availability"]["heartbeats"] > 0 and report["availability"]["recorded"]
    if hour.endswith("T23"):  # its day is over by then too: the writer's catch-up signs its daily report
        caught_up = vgate("report", "--catch-up", *common, *policies)
        assert caught_up.returncode == 0, caught_up.stderr
    verify = ("audit", "verify", *common, "--from", hour, "--to", hour)
    clean = vgate(*verify)
    assert clean.returncode == 0 and ", 0 problems" in clean.stdout, clean.stdout
    shutil.rmtree(out)  # the insider erases the signed hour; the anchor is out of reach
    for segment in audit.iterdir():
        segment.unlink()
    again = vgate("report", "--hour", hour, *common, *policies)
    assert again.returncode == 1 and "the report is gone, and is not signed again" in again.stderr, again.stderr
    erased = vgate(*verify)
    assert erased.returncode == 1 and f"the anchor records the report of {hour}" in erased.stdout, erased.stdout
