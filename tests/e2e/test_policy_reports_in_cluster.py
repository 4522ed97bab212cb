"""Policy reports in the real API server, as Policy Reporter reads them: the report writer, as the
chart's ServiceAccount with the chart's RBAC, applies the newest hour's PolicyReport per namespace
(named vgate) and the ClusterPolicyReport, and removes a namespace's report when that namespace has
no result in a later hour. The namespaced CRD is the corpus's ClusterPolicyReport CRD made
namespaced (wgpolicyk8s.io defines both kinds with one schema)."""

from __future__ import annotations

import copy
import json
import shutil
import sys
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path

import yaml

from e2e import charts, cluster
from e2e.kube import Kube, decisions_for
from e2e.waiting import eventually
from webhook.cluster.api import ApiServer
from webhook.reports.build import build_report
from webhook.reports.cluster_reports import apply_policy_reports
from webhook.reports.keys import ensure_key

from helpers import CORPUS, POLICIES, ROOT, trusted

sys.path.insert(0, str(ROOT / "deploy"))
from render import render

NAMESPACE = "ml-training"


def report_crds() -> list[dict]:
    cluster_crd = yaml.safe_load((CORPUS / "report-crds" / "wgpolicyk8s.io_clusterpolicyreports.yaml").read_text())
    namespaced = copy.deepcopy(cluster_crd)
    namespaced["metadata"] = {"name": "policyreports.wgpolicyk8s.io"}
    namespaced["spec"]["scope"] = "Namespaced"
    namespaced["spec"]["names"] = {"kind": "PolicyReport", "listKind": "PolicyReportList", "plural": "policyreports",
                                   "singular": "policyreport", "shortNames": ["polr"]}
    return [cluster_crd, namespaced]


def test_the_writer_puts_the_newest_hours_reports_into_the_cluster(kube: Kube, tmp_path: Path) -> None:
    assert kube.apply(*report_crds()).ok
    cluster.wait_established(["policyreports.wgpolicyk8s.io", "clusterpolicyreports.wgpolicyk8s.io"])
    writer_objects = [o for o in render(trusted({"reportWriter": {"applyPolicyReports": True}}),
                                        namespace=charts.VGATE_NAMESPACE)
                      if o["kind"] in ("ServiceAccount", "ClusterRole", "ClusterRoleBinding")
                      and o["metadata"]["name"].endswith("report-writer")]
    assert len(writer_objects) == 3 and kube.apply(*writer_objects).ok
    user, groups = cluster.service_account_user(charts.VGATE_NAMESPACE, "vgate-report-writer")
    writer = ApiServer.from_kubeconfig(cluster.identity_kubeconfig("report-writer", user, groups))

    name = f"reported-{uuid.uuid4().hex[:6]}"  # admitted with warnings: results in its namespace
    created = kube.create({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
                           "spec": {"containers": [{"name": "main", "image": "registry.example.com/app:1"}]}},
                          namespace=NAMESPACE)
    assert created.ok, created.stderr
    # Volcano binds it and updates it (UPDATEs vgate's rules do not re-judge): its results must stay.
    assert eventually(lambda: ((kube.get("pod", name, NAMESPACE) or {}).get("spec") or {}).get("nodeName"))
    hour = datetime.fromisoformat(decisions_for(NAMESPACE, name)[-1]["time"]).replace(minute=0, second=0,
                                                                                       microsecond=0)
    audit = tmp_path / "audit"
    shutil.copytree(cluster.VGATE_DIR / "audit", audit)
    key = tmp_path / "keys" / "k"
    ensure_key(key)
    out = build_report(hour, audit, tmp_path / "reports", POLICIES, key,
                       now=datetime.now(timezone.utc) + timedelta(hours=2))
    done = apply_policy_reports(writer, out)
    assert f"applied PolicyReport {NAMESPACE}/vgate" in done and "applied ClusterPolicyReport vgate" in done
    stored = json.loads(kube.run("get", "policyreport", "vgate", "-n", NAMESPACE, "-o", "json").stdout)
    mine = [r for r in stored["results"] if r["resources"][0]["name"] == name]
    assert mine and {r["result"] for r in mine} == {"warn"}, stored["results"]
    assert stored["metadata"]["annotations"]["vgate.io/hour"] == f"{hour:%Y-%m-%dT%H}"

    later = tmp_path / "later"  # an hour in which that namespace had no result
    shutil.copytree(out, later)
    kept = [d for d in yaml.safe_load_all((later / "policyreports.yaml").read_text())
            if d and d["metadata"]["namespace"] != NAMESPACE]
    (later / "policyreports.yaml").write_text(yaml.safe_dump_all(kept))
    assert f"deleted PolicyReport {NAMESPACE}/vgate (no result this hour)" in apply_policy_reports(writer, later)
    assert not kube.get("policyreport", "vgate", NAMESPACE)
    assert kube.get("clusterpolicyreport", "vgate")
