"""The background audit through the real control plane: what already runs, judged against today's
policies (issue 35).

A pod is admitted under the shipped policies and runs; a rule added afterwards (as a policy reload
would add it) forbids what it is. Admission never sees the pod again; `vgate audit scan`, listing
the cluster as vgate's ServiceAccount would, judges it as /validate would judge its CREATE and
names it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import xml.etree.ElementTree as ET
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import yaml
from test_effective_egress import DENY_EGRESS
from test_placement import SEV, TRAINING, node, pod_group, sensitive_pod
from test_policy_reports_in_cluster import report_crds

from e2e import charts, cluster
from e2e.kube import Kube, decisions
from e2e.waiting import eventually

from helpers import RESTRICTED_SPEC, anchor_beside, trusted
from render import render
from test_admission import running_on_a_node, unique

NAMESPACE = "e2e-scan"
NO_LEGACY = """# METADATA
# title: Legacy workloads are retired
# custom:
#   severity: high
#   category: lifecycle
package vgate.rules.lifecycle_no_legacy

import rego.v1

deny contains msg if {
\tinput.request.object.metadata.labels.app == "legacy"
\tmsg := sprintf("%s %s is a legacy workload: retire it", [input.request.kind.kind, input.request.name])
}
"""


def audit_scan(policies: Path, output: str = "json") -> subprocess.CompletedProcess[str]:
    return subprocess.run([*cluster.VGATE_CLI, "audit", "scan", "-o", output, "--kubeconfig", str(cluster.KUBECONFIG),
                           "--config", str(cluster.VGATE_DIR / "vgate.yaml"), "--policies", str(policies)],
                          capture_output=True, text=True, cwd=cluster.ROOT, timeout=300)


def finding_of(scan: dict[str, Any], name: str, kind: str = "v1/Pod") -> dict[str, Any]:
    [found] = [f for f in scan["findings"] if (f["kind"], f["namespace"], f["name"]) == (kind, NAMESPACE, name)]
    return found


def test_a_rule_added_after_admission_finds_the_running_pod_it_forbids(control_plane: Kube, tmp_path: Path) -> None:
    control_plane.namespace(NAMESPACE)
    name = unique("legacy")
    legacy = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": {"app": "legacy"}},
              "spec": RESTRICTED_SPEC}
    created = control_plane.create(legacy, namespace=NAMESPACE)
    assert created.ok, created.stderr
    assert running_on_a_node(control_plane, NAMESPACE, name)

    before = audit_scan(cluster.ROOT / "policies")
    assert before.returncode in (0, 1), before.stderr
    scanned = json.loads(before.stdout)
    assert finding_of(scanned, name)["allowed"] is True
    summary = scanned["summary"]
    assert summary["judged"] > 0 and summary["cpuMicrosecondsPerObject"] > 0

    policies = shutil.copytree(cluster.ROOT / "policies", tmp_path / "policies")
    (policies / "lifecycle-no-legacy").mkdir()
    (policies / "lifecycle-no-legacy" / "policy.rego").write_text(NO_LEGACY)
    after = audit_scan(policies)
    assert after.returncode == 1, after.stderr
    found = finding_of(json.loads(after.stdout), name)
    assert found["allowed"] is False and found["kind"] == "v1/Pod"
    assert {"rule": "lifecycle-no-legacy", "action": "deny", "message": f"Pod {name} is a legacy workload: retire it",
            "exception": None} in found["violations"]

    junit = ET.fromstring(audit_scan(policies, "junit").stdout)
    [case] = [c for c in junit.iter("testcase") if c.get("name") == f"Pod {NAMESPACE}/{name}"]
    failure = case.find("failure")
    assert failure is not None and "[lifecycle-no-legacy]" in (failure.text or "")
    text = audit_scan(policies, "text").stdout
    assert f"DENIED  Pod {NAMESPACE}/{name}" in text and f"deny    lifecycle-no-legacy  {NAMESPACE}: 1" in text


def test_the_watching_scanner_publishes_a_policy_report_that_a_reload_updates(control_plane: Kube,
                                                                             tmp_path: Path) -> None:
    """`vgate audit scan --watch --publish`, as the chart's ServiceAccount with the chart's ClusterRole:
    the namespace's PolicyReport vgate-audit (Policy
    Reporter's CRD accepting it) passes the pod; a rule added to the policies it reads (a reload)
    is applied within one poll, and the same report, replaced, fails it."""
    assert control_plane.apply(*report_crds()).ok
    cluster.wait_established(["policyreports.wgpolicyk8s.io", "clusterpolicyreports.wgpolicyk8s.io"])
    control_plane.namespace(NAMESPACE)
    name = unique("legacy")
    legacy = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": {"app": "legacy"}},
              "spec": RESTRICTED_SPEC}
    assert control_plane.create(legacy, namespace=NAMESPACE).ok
    policies = shutil.copytree(cluster.ROOT / "policies", tmp_path / "policies")
    # as the chart's background audit runs: its ServiceAccount, with the chart's ClusterRole
    scanner = [o for o in render(trusted({"backgroundAudit": {"publishPolicyReports": True}}),
                                 namespace=charts.VGATE_NAMESPACE)
               if o["kind"] in ("ServiceAccount", "ClusterRole", "ClusterRoleBinding")
               and o["metadata"]["name"] == "vgate-audit"]
    assert len(scanner) == 3 and control_plane.apply(*scanner).ok
    identity = cluster.identity_kubeconfig("vgate-audit", *cluster.service_account_user(charts.VGATE_NAMESPACE,
                                                                                        "vgate-audit"))
    watcher = subprocess.Popen([*cluster.VGATE_CLI, "audit", "scan", "--watch", "--publish", "--every", "1h",
                                "--kubeconfig", str(identity), "--policies", str(policies),
                                "--config", str(cluster.VGATE_DIR / "vgate.yaml")],
                               cwd=cluster.ROOT, stderr=subprocess.PIPE, text=True)
    try:
        def results_for_pod() -> list[dict[str, Any]] | None:
            report = control_plane.get("policyreport", "vgate-audit", NAMESPACE)
            if report is None:
                return None
            return [r for r in report.get("results") or [] if r["resources"][0]["name"] == name]
        assert eventually(lambda: results_for_pod() == [], timeout=60), "no PolicyReport vgate-audit, or a failure"
        (policies / "lifecycle-no-legacy").mkdir()
        (policies / "lifecycle-no-legacy" / "policy.rego").write_text(NO_LEGACY)
        failed = eventually(lambda: [r for r in results_for_pod() or [] if r["policy"] == "lifecycle-no-legacy"],
                            timeout=60)
        assert failed and failed[0]["result"] == "fail" and failed[0]["severity"] == "high"
        assert failed[0]["source"] == "vgate" and failed[0]["message"] == f"Pod {name} is a legacy workload: retire it"
        reports = control_plane.list("policyreport", NAMESPACE)
        assert [r["metadata"]["name"] for r in reports].count("vgate-audit") == 1  # replaced, not one more
    finally:
        watcher.terminate()
        _, errors = watcher.communicate(timeout=30)
    assert "audit scan (policies or config changed)" in errors, errors


def test_a_node_that_lost_its_memory_encryption_under_a_running_sensitive_pod_is_drift_recorded_and_scanned(
        control_plane: Kube, tmp_path: Path) -> None:
    """A sensitive pod bound to an encrypted node (its binding allowed); an admin then removes the
    node's encryption label (allowed: an admin's fact). The Node UPDATE's record carries the drift
    (the pod, what changed) and vgate_drift_total counts it; and the scan, judging each running
    pod's binding against the node as it is now, names it too."""
    control_plane.namespace(NAMESPACE)
    confine = {**DENY_EGRESS, "metadata": {"name": "deny-egress", "namespace": NAMESPACE}}
    assert control_plane.apply(confine).ok
    name, node_name = unique("vault"), unique("drift-sev")
    assert control_plane.apply(node(node_name, "zone-a")).ok
    try:
        vault = sensitive_pod(name, "zone-a")
        vault["spec"]["nodeSelector"]["kubernetes.io/hostname"] = node_name
        created = control_plane.create(vault, namespace=NAMESPACE)
        assert created.ok, created.stderr
        assert eventually(lambda: ((control_plane.get("pod", name, NAMESPACE) or {}).get("spec") or {}).get(
            "nodeName") == node_name, timeout=60)
        before = json.loads(audit_scan(cluster.ROOT / "policies").stdout)
        assert finding_of(before, name, "v1/Binding")["allowed"] is True
        assert control_plane.run("label", "node", node_name, f"{SEV}-").ok  # an admin's change: allowed
        # at once, in the decision log: the node change recorded as drift under the running pod, counted
        [change] = [r for r in decisions() if r["kind"] == "v1/Node" and r["name"] == node_name and r["allowed"]]
        assert change["drift"] == [{"pod": f"{NAMESPACE}/{name}", "node": node_name, "changes": [
            {"what": "encryption", "change": f"lost its memory-encryption label {SEV}=true"}]}], change
        metrics = cluster.vgate_metrics()
        assert any(line.startswith('vgate_drift_total{what="encryption"}') and float(line.split()[-1]) >= 1
                   for line in metrics.splitlines()), metrics
        after = json.loads(audit_scan(cluster.ROOT / "policies").stdout)
        drift = finding_of(after, name, "v1/Binding")
        assert drift["allowed"] is False and any(
            v["rule"] == "placement-binding" and "none of the memory-encryption labels" in v["message"]
            for v in drift["violations"]), drift
        assert finding_of(after, name)["allowed"] is True  # the pod as created still meets every rule
        # the next report (the hour written as just closed, an hour from now) lists the drift
        config = yaml.safe_load((cluster.VGATE_DIR / "vgate.yaml").read_text())
        config["reports"] = {**config["reports"], "dir": str(tmp_path / "reports"), "snapshot": False,
                             "key": str(tmp_path / "keys" / "k"), "anchorFile": str(anchor_beside(tmp_path))}
        (tmp_path / "vgate.yaml").write_text(yaml.safe_dump(config))
        hour = datetime.fromisoformat(change["time"]).replace(minute=0, second=0, microsecond=0)
        # written at half past the next hour: the change's hour closed, the next one not (a fixed "+62
        # minutes" after a change at 04:59 wrote at 06:01, after hour 05 had closed too)
        at = (hour + timedelta(minutes=90)).strftime("@%Y-%m-%d %H:%M:%S")
        written = subprocess.run(["faketime", "-f", at, *cluster.VGATE_CLI, "report", "--hour",
                                  f"{hour:%Y-%m-%dT%H}", "--config", str(tmp_path / "vgate.yaml"), "--new-key",
                                  "--policies", str(cluster.ROOT / "policies")],
                                 capture_output=True, text=True, timeout=300, cwd=cluster.ROOT,
                                 env={**os.environ, "TZ": "UTC"})
        assert written.returncode == 0, written.stderr
        report = json.loads((Path(written.stdout.strip()) / "report.json").read_text())
        assert [(d["pod"], d["time"]) for d in report["scheduling"]["drift"]
                if d["node"] == node_name] == [(f"{NAMESPACE}/{name}", change["time"])]
        assert report["snapshot"] == {"taken": False, "reason": "snapshots are off (reports.snapshot: false)"}
    finally:
        control_plane.run("delete", "pod", name, "-n", NAMESPACE, "--wait=true", "--grace-period=0", "--force")
        control_plane.run("delete", "node", node_name)


def test_three_hourly_reports_each_sign_where_a_running_sensitive_gang_is(control_plane: Kube,
                                                                         tmp_path: Path) -> None:
    """A sensitive gang (a PodGroup of two pods, placed by Volcano) keeps running; the report writer,
    as the chart's ServiceAccount with the chart's role, writes three consecutive hours, each as the
    hour just closed (one, two and three hours from now, by faketime): each report lists the gang's
    pods on their zone-a nodes, with the nodes' encryption labels and the pods' confining policy,
    signed; and an hour written after a later one had closed says its snapshot can no longer be
    taken. (A Volcano Job's pods would do too, but kwok completes every pod a Job owns at once.)"""
    name = unique("gang")
    assert control_plane.create(pod_group(name, "zone-a", 2), namespace=TRAINING).ok
    members = [f"{name}-{i}" for i in range(2)]
    for member in members:
        created = control_plane.create(sensitive_pod(member, "zone-a", group=name), namespace=TRAINING)
        assert created.ok, created.stderr
    assert all(running_on_a_node(control_plane, TRAINING, member) for member in members)
    placed = {m: (control_plane.get("pod", m, TRAINING) or {})["spec"]["nodeName"] for m in members}
    writer = [o for o in render(trusted({}), namespace=charts.VGATE_NAMESPACE)
              if o["kind"] in ("ServiceAccount", "ClusterRole", "ClusterRoleBinding")
              and o["metadata"]["name"] == "vgate-report-writer"]
    assert len(writer) == 3 and control_plane.apply(*writer).ok
    identity = cluster.identity_kubeconfig("report-writer", *cluster.service_account_user(charts.VGATE_NAMESPACE,
                                                                                          "vgate-report-writer"))
    config = yaml.safe_load((cluster.VGATE_DIR / "vgate.yaml").read_text())
    config["reports"] = {**config["reports"], "dir": str(tmp_path / "reports"), "key": str(tmp_path / "keys" / "k"),
                         "anchorFile": str(anchor_beside(tmp_path))}
    config["cluster"] = {**config.get("cluster", {}), "kubeconfig": str(identity)}
    (tmp_path / "vgate.yaml").write_text(yaml.safe_dump(config))

    def report(hours_later: int, written_hours_later: int | None = None) -> dict[str, Any]:
        """The report of the hour that closed ``hours_later`` hours from now, written then (or later):
        the clock faked to half past, so no minute boundary, nor the writer's minute of grace, is near."""
        real = datetime.now(timezone.utc)
        offset = 60 * (written_hours_later or hours_later) + 30 - real.minute
        hour = (real + timedelta(hours=hours_later)).replace(minute=0, second=0, microsecond=0) - timedelta(hours=1)
        written = subprocess.run(["faketime", f"+{offset} minutes", *cluster.VGATE_CLI, "report", "--hour",
                                  f"{hour:%Y-%m-%dT%H}", "--config", str(tmp_path / "vgate.yaml"), "--new-key",
                                  "--policies", str(cluster.ROOT / "policies")],
                                 capture_output=True, text=True, timeout=300, cwd=cluster.ROOT)
        assert written.returncode == 0, written.stderr
        out = Path(written.stdout.strip())
        assert "现存状态" in (out / "report.html").read_text()
        return dict(json.loads((out / "report.json").read_text())["snapshot"])

    for later in (1, 2, 3):  # each hour written as the one just closed
        snapshot = report(later)
        assert snapshot["taken"] is True, snapshot
        [workload] = [w for w in snapshot["sensitiveWorkloads"] if w["workload"] == f"PodGroup/{name}"]
        assert {p["pod"]: p["node"] for p in workload["pods"]} == placed and workload["zones"] == ["zone-a"]
        assert all(p["nodeFacts"]["memoryEncryption"] == [f"{SEV}=true"] and p["egress"]["confined"]
                   and p["egress"]["policies"] for p in workload["pods"])  # and the policies confining it
        assert workload["compliant"] is True
    late = report(4, written_hours_later=5)  # written when a later hour had closed too
    assert late["taken"] is False and "can no longer be seen" in late["reason"]
    for member in members:
        control_plane.run("delete", "pod", member, "-n", TRAINING, "--wait=true", "--grace-period=0", "--force")
