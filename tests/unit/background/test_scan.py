"""The background audit's core (webhook/background/scan.py): objects that exist judged as their CREATE,
with the shipped policies and the real engine, against a scripted API server's lists; the cluster
itself is tests/e2e/test_background_audit.py's."""

from __future__ import annotations

import json
import shutil
import threading
import xml.etree.ElementTree as ET
from datetime import datetime, timedelta, timezone
from typing import Any

import requests

from e2e.waiting import eventually
from webhook.background import watch as scan_loop
from webhook.background.render import scan_json, scan_junit, scan_text
from webhook.background.scan import SCANNED, as_created, read_cluster, scan
from webhook.files.config_file import load_config
from webhook.policy.regorus_engine import RegorusEngine
from webhook.policy.sources import load_policy_set

from helpers import POLICIES, RESTRICTED_SPEC, copy_policies, pod

NOW = datetime(2026, 12, 4, 15, tzinfo=timezone.utc)
PRIVILEGED = pod("root", "web", containers=[{"name": "main", "image": "registry.example.com/app:1",
                                              "securityContext": {"privileged": True}}])
FINE = pod("fine", "web", **RESTRICTED_SPEC)
SYSTEM = pod("coredns", "kube-system", containers=[{"name": "c", "image": "registry.example.com/dns:1",
                                                     "securityContext": {"privileged": True}}])


class ListingApi:
    """Serves each collection path's items (a list's items carry no apiVersion and kind), in pages of
    one; a path it does not hold is 404, as an API server without that CRD answers."""

    def __init__(self, collections: dict[str, list[dict[str, Any]]]) -> None:
        self.collections = collections
        self.asked: list[str] = []

    def __enter__(self) -> ListingApi:
        return self

    def __exit__(self, *_: object) -> None:
        pass

    def get(self, path: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        self.asked.append(path)
        if path not in self.collections:
            response = requests.Response()
            response.status_code = 404
            raise requests.HTTPError("404 Not Found", response=response)
        items = [{k: v for k, v in item.items() if k not in ("apiVersion", "kind")} for item in self.collections[path]]
        start = int((params or {}).get("continue") or 0)
        more = {"continue": str(start + 1)} if start + 1 < len(items) else {}
        return {"items": items[start:start + 1], "metadata": {"resourceVersion": "5", **more}}


def scanned(*pods: dict[str, Any]):
    config = load_config()
    engine = RegorusEngine(load_policy_set(POLICIES), config.document)
    api = ListingApi({"/api/v1/pods": list(pods), "/api/v1/namespaces": [
        {"metadata": {"name": name, "labels": {"kubernetes.io/metadata.name": name}}}
        for name in ("web", "kube-system")]})
    judged, state, skipped = read_cluster(api)  # type: ignore[arg-type]
    return scan(judged, state, config, engine, (), NOW), skipped, api


def test_every_existing_pod_is_judged_as_its_create_and_what_no_one_serves_is_said():
    result, skipped, api = scanned(PRIVILEGED, FINE, SYSTEM)
    by_name = {f.name: f for f in result.findings}
    assert set(by_name) == {"root", "fine", "coredns"}
    assert not by_name["root"].allowed and "security-privileged-container" in {
        v["rule"] for v in by_name["root"].violations if v["action"] == "deny"}
    assert "vgate denied Pod web/root" in by_name["root"].message
    assert by_name["fine"].allowed and by_name["coredns"].exempt  # kube-system is exempt, as at admission
    # Volcano's and the Spark operator's CRDs are not served by this API server: said, not an error
    assert "batch.volcano.sh/Job" in skipped and "sparkoperator.k8s.io/SparkApplication" in skipped
    assert api.asked.count("/api/v1/pods") == 3  # listed once (three pages), for judging and for the state


def test_the_three_outputs_agree():
    result, _, _ = scanned(PRIVILEGED, FINE)
    text = scan_text(result)
    assert "DENIED  Pod web/root" in text and "[security-privileged-container]" in text
    assert "DENIED  Pod web/fine" not in text and "scanned 2 objects (2 judged, 0 exempt)" in text
    assert "deny    security-privileged-container  web: 1" in text
    document = json.loads(scan_json(result))
    assert document["summary"]["denied"] == 1 and document["summary"]["cpuMicrosecondsPerObject"] > 0
    assert {f["name"]: f["allowed"] for f in document["findings"]} == {"root": False, "fine": True}
    suite = ET.fromstring(scan_junit(result)).find("testsuite")
    assert suite is not None and suite.get("tests") == "2" and suite.get("failures") == "1"


def test_an_object_too_large_to_judge_is_a_finding_with_its_reason():
    huge = pod("huge", "web", containers=[{"name": f"c{i}", "image": "registry.example.com/app:1"}
                                          for i in range(300)])
    result, _, _ = scanned(huge)
    [finding] = result.findings
    assert not finding.allowed and "containers" in finding.message


def test_only_kinds_judged_on_create_are_scanned():
    kinds = {kind.kind for kind in SCANNED}
    assert {"Pod", "Deployment", "Job", "PodGroup", "SparkApplication", "NetworkPolicy", "Service"} <= kinds
    assert not kinds & {"Binding", "Node", "Namespace"}  # writes and UPDATEs, not objects to judge


def test_a_node_name_set_by_the_binding_is_not_the_creators_but_one_it_wrote_is():
    """Judged as its CREATE: the scheduler's binding set spec.nodeName (no writer of the pod owns it
    in managedFields); a creator that wrote nodeName itself (the scheduler bypass) owns it."""
    created = {"manager": "kubectl-create", "operation": "Update",
               "fieldsV1": {"f:spec": {"f:containers": {}, "f:schedulerName": {}}}}
    status = {"manager": "kubelet", "operation": "Update", "subresource": "status",
              "fieldsV1": {"f:status": {"f:phase": {}}}}
    bound = pod("bound", "web", nodeName="zone-a-1", **RESTRICTED_SPEC)
    bound["metadata"]["managedFields"] = [created, status]
    bypass = pod("bypass", "web", nodeName="zone-a-1", **RESTRICTED_SPEC)
    bypass["metadata"]["managedFields"] = [{**created, "fieldsV1": {"f:spec": {"f:nodeName": {}}}}, status]
    unknown = pod("unknown", "web", nodeName="zone-a-1", **RESTRICTED_SPEC)  # no managedFields: as written
    assert "nodeName" not in as_created(bound)["spec"]
    assert as_created(bypass) is bypass and as_created(unknown) is unknown
    result, _, _ = scanned(bound, bypass, unknown)
    refused = {f.name for f in result.findings if "scheduling-node-name-bypass" in {v["rule"] for v in f.violations}}
    assert refused == {"bypass", "unknown"}


def test_the_watching_scanner_scans_at_start_and_again_when_the_policies_change(tmp_path, monkeypatch):
    monkeypatch.setattr(scan_loop, "POLL_SECONDS", 0.05)
    policies = copy_policies(tmp_path / "policies")
    api = ListingApi({"/api/v1/pods": [PRIVILEGED, FINE], "/api/v1/namespaces": [{"metadata": {"name": "web"}}]})
    metrics, stop = scan_loop.ScanMetrics(), threading.Event()
    watcher = threading.Thread(target=scan_loop.watch_scans, args=(None, None, str(policies), "1h", False, metrics,
                                                                  stop, lambda: api))
    watcher.start()
    try:
        def violations() -> dict[tuple[str, str, str], float]:
            return {(s.labels["rule"], s.labels["action"], s.labels["namespace"]): s.value
                    for family in metrics.registry.collect() if family.name == "vgate_audit_violations"
                    for s in family.samples}
        assert eventually(lambda: violations().get(("security-privileged-container", "deny", "web")) == 1)
        scans = api.asked.count("/api/v1/pods")
        threading.Event().wait(0.3)
        assert api.asked.count("/api/v1/pods") == scans  # the hour not over, nothing changed: no scan
        shutil.rmtree(policies / "security-privileged-container")  # a reload that drops the rule
        assert eventually(lambda: ("security-privileged-container", "deny", "web") not in violations())
    finally:
        stop.set()
        watcher.join(5)
    assert not watcher.is_alive()


def test_each_running_pod_is_judged_again_where_it_runs():
    """A pod's binding judged against its node as it is now: a node without memory encryption under
    a sensitive pod (drift) is a finding; the pod itself, as created, still passes; a finished pod
    is not judged again."""
    sev = "node-restriction.kubernetes.io/cpu-security.sev.snp.enabled"
    selector = {"topology.kubernetes.io/zone": "zone-a", sev: "true"}
    vault = pod("vault", "web", labels={"vgate.io/data-classification": "sensitive", "vgate.io/egress": "deny"},
                nodeName="zone-a-1", nodeSelector=selector, schedulerName="volcano", **RESTRICTED_SPEC)
    vault["spec"]["containers"][0]["image"] = "registry.example.com/app@sha256:" + "0" * 64
    vault["metadata"]["managedFields"] = [{"manager": "kubectl", "operation": "Update",
                                           "fieldsV1": {"f:spec": {"f:containers": {}}}}]
    done = {**vault, "metadata": {**vault["metadata"], "name": "done"}, "status": {"phase": "Succeeded"}}

    def findings(node_labels: dict[str, str]) -> dict[tuple[str, str], Any]:
        config = load_config()
        engine = RegorusEngine(load_policy_set(POLICIES), config.document)
        nodes = [{"metadata": {"name": "zone-a-1", "labels": {"topology.kubernetes.io/zone": "zone-a", **node_labels}}}]
        confine = {"metadata": {"name": "deny-egress", "namespace": "web"},
                   "spec": {"podSelector": {}, "policyTypes": ["Egress"]}}
        api = ListingApi({"/api/v1/pods": [vault, done], "/api/v1/nodes": nodes,
                          "/api/v1/namespaces": [{"metadata": {"name": "web"}}],
                          "/apis/networking.k8s.io/v1/networkpolicies": [confine]})
        judged, state, _ = read_cluster(api)  # type: ignore[arg-type]
        return {(f.kind, f.name): f for f in scan(judged, state, config, engine, (), NOW).findings}
    encrypted = findings({sev: "true"})
    assert encrypted[("v1/Binding", "vault")].allowed and ("v1/Binding", "done") not in encrypted
    drifted = findings({})
    assert drifted[("v1/Pod", "vault")].allowed and not drifted[("v1/Binding", "vault")].allowed
    assert any("none of the memory-encryption labels" in v["message"]
               for v in drifted[("v1/Binding", "vault")].violations)


def test_the_snapshot_lists_where_each_sensitive_workload_runs_and_on_what(tmp_path):
    """take_snapshot from the cluster's lists: the sensitive pods running, grouped by owner, each with
    its node's facts now and its effective egress; a finished one not; an ordinary one not; the
    objects the policies refuse. Signed in the hourly report, in both languages; a report written
    without one says why."""
    from webhook.background.snapshot import take_snapshot
    from webhook.reports.build import build_report
    from webhook.reports.keys import ensure_key

    sev = "node-restriction.kubernetes.io/cpu-security.sev.snp.enabled"
    sensitive = {"vgate.io/data-classification": "sensitive", "vgate.io/egress": "deny"}
    owner = [{"kind": "Job", "name": "train", "apiVersion": "batch.volcano.sh/v1alpha1"}]
    objects = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "web"}},
        {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "a-1", "labels": {
            "topology.kubernetes.io/zone": "zone-a", sev: "true"}}, "spec": {"taints": [
                {"key": "dedicated", "value": "research", "effect": "NoSchedule"}]}},
        {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "b-1", "labels": {
            "topology.kubernetes.io/zone": "zone-b"}}},
        {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy", "metadata": {
            "name": "deny-egress", "namespace": "web"}, "spec": {"podSelector": {}, "policyTypes": ["Egress"]}},
        *[{**pod(f"train-{i}", "web", labels=sensitive, nodeName=node), "status": {"phase": "Running"}}
          for i, node in enumerate(("a-1", "b-1"))],
        {**pod("old", "web", labels=sensitive, nodeName="a-1"), "status": {"phase": "Succeeded"}},
        pod("site", "web", nodeName="a-1"),
    ]
    for made in objects[4:6]:
        made["metadata"]["ownerReferences"] = owner
    config = load_config()
    snapshot = take_snapshot(objects, None, config, NOW)
    [workload] = snapshot["sensitiveWorkloads"]
    assert (workload["workload"], workload["zones"]) == ("Job/train", ["zone-a", "zone-b"])
    assert workload["compliant"] is False  # two zones, one pod on a node without memory encryption
    first, second = workload["pods"]
    assert first["node"] == "a-1" and first["nodeFacts"]["memoryEncryption"] == [f"{sev}=true"]
    assert first["nodeFacts"]["taints"] == ["dedicated=research:NoSchedule"]
    assert first["egress"]["confined"] is True and first["egress"]["policies"] == ["web/deny-egress"]
    assert second["nodeFacts"]["memoryEncryption"] == [] and second["nodeFacts"]["zone"] == "zone-b"

    key = tmp_path / "report.key"
    ensure_key(key)
    hour = NOW.replace(minute=0) - timedelta(days=1)
    out = build_report(hour, tmp_path / "audit", tmp_path / "reports", POLICIES, key, snapshot=snapshot)
    signed = json.loads((out / "report.json").read_text())["snapshot"]
    assert signed == json.loads(json.dumps(snapshot))
    html = (out / "report.html").read_text()
    assert "现存状态（本小时结束时） · State at the hour&#39;s close" in html and "web/Job/train" in html
    without = build_report(hour + timedelta(hours=1), tmp_path / "audit", tmp_path / "reports", POLICIES, key)
    assert json.loads((without / "report.json").read_text())["snapshot"]["taken"] is False
