"""The report's scheduling compliance section (调度合规), from binding records as the gateway writes
them (``placement_record`` over a real cluster state), through the report builder, in JSON and in
Chromium."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

import orjson
from test_report_html import ARTIFACTS, chromium

from webhook.audit.log import DecisionLog
from webhook.cluster.state import ClusterState
from webhook.core.admission import decode_review
from webhook.core.bindings import placement_record
from webhook.core.egress_judge import egress_facts
from webhook.files.config_file import load_config
from webhook.reports.build import build_report
from webhook.reports.keys import ensure_key

from helpers import POLICIES, pod, review

ZONE = "topology.kubernetes.io/zone"
SEV = "node-restriction.kubernetes.io/cpu-security.sev.snp.enabled"
SENSITIVE = {"vgate.io/data-classification": "sensitive", "vgate.io/egress": "deny"}
ADMIN_SET_ZONE = {"manager": "kubectl-label", "operation": "Update", "time": "2026-12-04T09:00:00Z",
                  "fieldsV1": {"f:metadata": {"f:labels": {f"f:{ZONE}": {}}}}}
KUBELET = {"manager": "kubelet", "operation": "Update", "time": "2026-12-04T08:00:00Z",
           "fieldsV1": {"f:metadata": {"f:labels": {f"f:{ZONE}": {}, "f:kubernetes.io/hostname": {}}}}}
DENY_EGRESS = {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
               "metadata": {"name": "deny-egress", "namespace": "ml-training"},
               "spec": {"podSelector": {"matchLabels": {"vgate.io/egress": "deny"}}, "policyTypes": ["Egress"]}}


def node(name: str, zone: str, encrypted: bool = True) -> dict:
    labels = {ZONE: zone, **({SEV: "true"} if encrypted else {})}
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": labels, "managedFields": [KUBELET, ADMIN_SET_ZONE]}}


def worker(name: str, labels: dict | None = None) -> dict:
    made = pod(name, "ml-training", labels=labels, annotations={"scheduling.k8s.io/group-name": "train-pg"})
    made["metadata"]["ownerReferences"] = [{"kind": "Job", "name": "train", "apiVersion": "batch.volcano.sh/v1alpha1"}]
    return made


STATE = ClusterState.of_objects([node("zone-a-sev-1", "zone-a"), node("zone-a-plain-1", "zone-a", False),
                                 worker("train-0", SENSITIVE), worker("train-1", SENSITIVE), worker("web-0"),
                                 pod("leak-0", "ml-training", labels={"vgate.io/data-classification": "sensitive"}),
                                 {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml-training"}},
                                 DENY_EGRESS])


def record(name: str, target: str, allowed: bool, rules: list | None = None) -> dict:
    sent = review({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": name, "namespace": "ml-training"},
                   "target": {"kind": "Node", "name": target}})
    sent["request"].update(subResource="binding", resource={"group": "", "version": "v1", "resource": "pods"})
    request = decode_review(orjson.dumps(sent), 64)
    context = STATE.binding_context("ml-training", name, target, ZONE)
    placement = load_config().placement
    judged = [context["pod"]] if isinstance(context, dict) else []
    return {"endpoint": "validate", "uid": name + target, "user": "system:serviceaccount:volcano-system:scheduler",
            "operation": "CREATE", "kind": "v1/Binding", "subResource": "binding", "namespace": "ml-training",
            "name": name, "dryRun": False, "allowed": allowed, "decision": "allowed" if allowed else "denied",
            "policyRevision": "r1", "rules": rules or [],
            "binding": placement_record(request, context, placement),
            "egress": egress_facts(request, judged, STATE.network(), placement)}


def test_the_scheduling_section_lists_where_each_sensitive_pod_ran_and_what_was_refused(tmp_path):
    log = DecisionLog(tmp_path / "audit", replica="sched")
    refusal = [{"id": "placement-binding", "action": "deny",
                "message": "Binding of pod ml-training/train-0 on node zone-a-plain-1: no memory encryption"}]
    for entry in (record("train-0", "zone-a-plain-1", False, refusal), record("train-0", "zone-a-sev-1", True),
                  record("train-1", "zone-a-sev-1", True), record("web-0", "zone-a-plain-1", True),
                  record("ghost", "zone-a-sev-1", False), record("leak-0", "zone-a-sev-1", True)):
        log.record(entry)
    key = tmp_path / "report.key"
    ensure_key(key)
    hour = datetime.now(timezone.utc).replace(minute=0, second=0, microsecond=0)
    out = build_report(hour, tmp_path / "audit", tmp_path / "reports", POLICIES, key, now=hour + timedelta(hours=2))
    section = json.loads((out / "report.json").read_text())["scheduling"]
    assert section["bindings"] == {"bound": 4, "refused": 2, "unjudged": 1, "sensitiveBound": 3, "sensitiveRefused": 1}
    assert "MLPS 2.0 (GB/T 22239-2019) 8.1.4.8 data confidentiality" in section["controls"]
    job = next(w for w in section["sensitiveWorkloads"] if w["workload"] == "Job/train")
    assert job["zones"] == ["zone-a"] and job["placed"] == 2 and job["refusals"] == 1 and job["compliant"]
    first = job["pods"][0]
    assert (first["pod"], first["node"], first["zone"]) == ("train-0", "zone-a-sev-1", "zone-a")
    assert first["verified"]["memoryEncryption"] == [f"{SEV}=true"]
    assert first["verified"]["zoneSetBy"] == "kubectl-label, Update, 2026-12-04T09:00:00Z"  # the latest writer
    assert first["verified"]["egress"] == {"confined": True, "policies": ["ml-training/deny-egress"], "reasons": []}
    assert "MLPS 2.0 (GB/T 22239-2019) 8.1.3.1 boundary protection" in section["controls"]
    [refused] = first["refused"]
    assert refused["node"] == "zone-a-plain-1" and "no memory encryption" in refused["reasons"][0]
    assert not any(w["workload"] == "Pod/web-0" for w in section["sensitiveWorkloads"])  # ordinary: counted only
    ghost = next(w for w in section["sensitiveWorkloads"] if w["workload"] == "Pod/ghost")
    assert ghost["pods"][0]["node"] is None and ghost["placed"] == 0
    leak = next(w for w in section["sensitiveWorkloads"] if w["workload"] == "Pod/leak-0")  # allowed in audit mode
    assert not leak["compliant"] and leak["pods"][0]["verified"]["egress"]["confined"] is False
    assert "no NetworkPolicy selects pod ml-training/leak-0" in leak["pods"][0]["verified"]["egress"]["reasons"][0]
    page = f"file://{out / 'report.html'}"
    dom = chromium("--dump-dom", page)
    assert "调度合规 · Scheduling compliance" in dom.stdout and "ml-training/Job/train" in dom.stdout
    assert "合规 · compliant" in dom.stdout and "zone-a-sev-1" in dom.stdout
    assert "受限于 · confined by ml-training/deny-egress" in dom.stdout
    assert "设置者 · set by kubectl-label" in dom.stdout
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    shot = chromium(f"--screenshot={ARTIFACTS / 'scheduling.png'}", "--window-size=1280,5600", page)
    assert shot.returncode == 0


def test_drift_in_the_hour_is_listed_with_when_it_was_first_seen_and_who_made_it(tmp_path):
    """A Node UPDATE the gateway recorded with ``drift`` (core/drift.py): the next report lists each
    sensitive pod, its node, what changed, when and by whom; a refused or dry-run change is not drift."""
    from webhook.core.drift import node_drift

    before, after = node("zone-a-sev-1", "zone-a"), node("zone-a-sev-1", "zone-a", encrypted=False)
    placed = [{**worker("train-0", SENSITIVE), "spec": {"nodeName": "zone-a-sev-1"}}]
    drift = node_drift(before, after, placed, load_config().placement, "dedicated")
    log = DecisionLog(tmp_path / "audit", replica="r1")
    for allowed, dry_run in ((True, False), (False, False), (True, True)):
        log.record({"endpoint": "validate", "uid": f"n-{allowed}-{dry_run}", "user": "kubernetes-admin",
                    "operation": "UPDATE", "kind": "v1/Node", "name": "zone-a-sev-1", "dryRun": dry_run,
                    "allowed": allowed, "decision": "allowed" if allowed else "denied", "drift": drift})
    key = tmp_path / "report.key"
    ensure_key(key)
    hour = datetime.now(timezone.utc).replace(minute=0, second=0, microsecond=0)
    out = build_report(hour, tmp_path / "audit", tmp_path / "reports", POLICIES, key, now=hour + timedelta(hours=2))
    section = json.loads((out / "report.json").read_text())["scheduling"]
    [listed] = section["drift"]
    assert section["driftCount"] == 1 and listed["pod"] == "ml-training/train-0" and listed["node"] == "zone-a-sev-1"
    assert listed["user"] == "kubernetes-admin" and listed["time"].startswith(hour.strftime("%Y-%m-%dT%H"))
    assert listed["changes"] == [f"lost its memory-encryption label {SEV}=true"]
    html = (out / "report.html").read_text()
    assert "漂移：运行中敏感工作负载所在节点的属性被更改 · Drift" in html and "ml-training/train-0" in html
