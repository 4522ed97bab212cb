"""The hour as Kubernetes policy reports, in the shape Policy Reporter reads.

Per namespace a wgpolicyk8s.io/v1alpha2 ``PolicyReport`` (``policyreports.yaml``) and an
openreports.io/v1alpha1 ``Report`` (``reports.yaml``), and for cluster-scoped objects one
``ClusterPolicyReport`` (``clusterpolicyreport.yaml``) and one ``ClusterReport``
(``clusterreport.yaml``): one result per resource and rule, from each resource's latest decision of
the hour (``resource_results``), each result naming its resource, its rule's severity, category and
MLPS control. Validated against the CRDs in the tests (a namespaced report has its cluster twin's
schema).
"""

from __future__ import annotations

from collections import Counter
from datetime import datetime
from typing import Any

import yaml

from .renderer import FinishedHour, Renderer
from .resource_results import ResourceResults, resource_ref, status_of
from .staged import Staged

SEVERITIES = ("critical", "high", "medium", "low", "info")
# One report is one object in etcd (1.5 MiB a request at most): its newest 1,000 results, the rest counted.
MAX_RESULTS = 1000
FLAVOURS = {
    "wgpolicy": ("wgpolicyk8s.io/v1alpha2", "PolicyReport", "ClusterPolicyReport"),
    "openreports": ("openreports.io/v1alpha1", "Report", "ClusterReport"),
}


def namespaced_reports(document: dict[str, Any], resources: ResourceResults, flavour: str) -> list[dict[str, Any]]:
    """One report per namespace that has a resource with a result this hour."""
    return [_report(document, items, flavour, namespace, resources.left_out)
            for namespace, items in resources.by_namespace().items() if namespace]


def cluster_report(document: dict[str, Any], resources: ResourceResults, flavour: str) -> dict[str, Any]:
    """The report of the cluster-scoped resources (written every hour, empty or not)."""
    return _report(document, resources.by_namespace().get("", []), flavour, "", resources.left_out)


def _report(document: dict[str, Any], items: list[tuple[tuple[str, str, str], dict[str, Any]]], flavour: str,
            namespace: str, left_out: int) -> dict[str, Any]:
    api_version, namespaced_kind, cluster_kind = FLAVOURS[flavour]
    rules = {rule["id"]: rule for rule in document["perRule"]}
    end = int(datetime.fromisoformat(document["to"]).timestamp())
    results: list[dict[str, Any]] = []
    summary, left_out_results = Counter[str](), 0
    for key, latest in sorted(items, key=lambda item: str(item[1]["time"]), reverse=True):  # newest first
        if len(results) + len(latest["rules"]) > MAX_RESULTS:
            left_out_results += len(latest["rules"])
            continue
        for result in latest["rules"].values():
            status = status_of(result)
            summary[status] += 1
            rule = rules.get(result["id"], {})
            results.append({
                "policy": result["id"], "rule": result["id"], "result": status, "source": "vgate",
                "severity": rule.get("severity") if rule.get("severity") in SEVERITIES else "info",
                "category": rule.get("category") or "", "scored": True, "message": str(result.get("message", "")),
                "properties": {"hour": document["hour"], "action": str(result.get("action")),
                               "decidedAt": str(latest["time"]), "control": rule.get("control") or "",
                               **({"exception": str(result["exception"])} if result.get("exception") else {})},
                "resources": [resource_ref(key)],
                "timestamp": {"seconds": end, "nanos": 0},
            })
    metadata: dict[str, Any] = {"name": f"vgate-{document['hour'].lower()}",
                                "labels": {"app.kubernetes.io/managed-by": "vgate"},
                                "annotations": {"vgate.io/hour": document["hour"],
                                                "vgate.io/resources-left-out": str(left_out),
                                                "vgate.io/results-left-out": str(left_out_results)}}
    if namespace:
        metadata["namespace"] = namespace
    header = {"apiVersion": api_version, "kind": namespaced_kind if namespace else cluster_kind}
    if flavour == "openreports":
        header["source"] = "vgate"
    return {**header, "metadata": metadata,
            "summary": {k: summary.get(k, 0) for k in ("pass", "fail", "warn", "error", "skip")}, "results": results}


class PolicyReportsRenderer(Renderer):
    """Both flavours, cluster-scoped and per namespace, from each resource's latest decision of the hour."""

    files = ("clusterreport.yaml", "clusterpolicyreport.yaml", "reports.yaml", "policyreports.yaml")
    FILES_OF = {"openreports": ("clusterreport.yaml", "reports.yaml"),
                "wgpolicy": ("clusterpolicyreport.yaml", "policyreports.yaml")}

    def __init__(self, out: Staged) -> None:
        super().__init__(out)
        self.resources = ResourceResults()

    def add(self, record: dict[str, Any]) -> None:
        self.resources.add(record)

    def finish(self, hour: FinishedHour) -> None:
        for flavour, (cluster_file, namespaced_file) in self.FILES_OF.items():
            cluster = cluster_report(hour.document, self.resources, flavour)
            namespaced = namespaced_reports(hour.document, self.resources, flavour)
            self.out.write(cluster_file, yaml.safe_dump(cluster, sort_keys=False).encode())
            self.out.write(namespaced_file, yaml.safe_dump_all(namespaced, sort_keys=False).encode())
