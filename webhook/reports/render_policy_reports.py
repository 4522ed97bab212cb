"""clusterreport.yaml and clusterpolicyreport.yaml: the hour as Kubernetes policy reports.

An openreports.io/v1alpha1 ClusterReport and a wgpolicyk8s.io/v1alpha2 ClusterPolicyReport, one
result per rule, for Policy Reporter and similar tools (validated against their CRDs in the tests).
"""

from __future__ import annotations

from collections import Counter
from datetime import datetime
from typing import Any


def policy_report(document: dict[str, Any], flavour: str) -> dict[str, Any]:
    """A ClusterReport (openreports.io) or ClusterPolicyReport (wgpolicyk8s.io) of the hour, one result per rule."""
    end = datetime.fromisoformat(document["to"])
    results: list[dict[str, Any]] = []
    summary: Counter[str] = Counter()
    for rule in document["perRule"]:
        status = "fail" if rule["deny"] else "warn" if rule["warn"] or rule["audit"] else "pass"
        summary[status] += 1
        results.append({
            "policy": rule["id"], "rule": rule["id"], "result": status, "source": "vgate",
            "severity": rule["severity"] if rule["severity"] in ("critical", "high", "medium", "low") else "info",
            "category": rule["category"], "scored": True,
            "message": f"{rule['deny']} denied, {rule['warn']} warned, {rule['audit']} audited, "
                       f"{rule['excepted']} excepted in {document['hour']}",
            "properties": {"control": rule["control"], "hour": document["hour"],
                           **{k: str(rule[k]) for k in ("deny", "warn", "audit", "excepted")}},
            "resources": [{"apiVersion": "v1", **r} for r in document["ruleResources"].get(rule["id"], [])],
            "timestamp": {"seconds": int(end.timestamp()), "nanos": 0},
        })
    name = f"vgate-{document['hour'].lower().replace(':', '')}"
    if flavour == "openreports":
        header = {"apiVersion": "openreports.io/v1alpha1", "kind": "ClusterReport", "source": "vgate"}
    else:
        header = {"apiVersion": "wgpolicyk8s.io/v1alpha2", "kind": "ClusterPolicyReport"}
    return {**header, "metadata": {"name": name, "labels": {"app.kubernetes.io/managed-by": "vgate"}},
            "summary": {k: summary.get(k, 0) for k in ("pass", "fail", "warn", "error", "skip")}, "results": results}
