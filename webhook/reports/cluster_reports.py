"""The newest hour's policy reports, put into the cluster where Policy Reporter reads them.

With ``reports.policyReports.apply`` the report writer server-side-applies, after it signs an
hour, that hour's ``PolicyReport`` of each namespace and its ``ClusterPolicyReport``
(wgpolicyk8s.io/v1alpha2), each named ``vgate``: one object per namespace that each hour
replaces, not one more per hour. A namespace whose resources yielded no result this hour loses its
report. The signed files stay the evidence; these objects are a view of the latest hour. It talks
to the API server as the writer's ServiceAccount (in the pod), or with ``kubeconfig``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from ..cluster.api import ApiServer

GROUP = "/apis/wgpolicyk8s.io/v1alpha2"
NAME = "vgate"


def apply_policy_reports(api: ApiServer, hour_dir: Path) -> list[str]:
    """Apply the hour's reports under the stable name; remove vgate's reports of namespaces that
    have none this hour. Returns what it did, one line each."""
    done = []
    namespaced = [d for d in yaml.safe_load_all((hour_dir / "policyreports.yaml").read_text()) if d]
    current = set()
    for report in namespaced:
        namespace = report["metadata"]["namespace"]
        current.add(namespace)
        api.apply(f"{GROUP}/namespaces/{namespace}/policyreports/{NAME}", _named(report))
        done.append(f"applied PolicyReport {namespace}/{NAME}")
    for namespace, name in api.names(f"{GROUP}/policyreports"):
        if name == NAME and namespace not in current:
            api.delete(f"{GROUP}/namespaces/{namespace}/policyreports/{NAME}")
            done.append(f"deleted PolicyReport {namespace}/{NAME} (no result this hour)")
    cluster = yaml.safe_load((hour_dir / "clusterpolicyreport.yaml").read_text())
    api.apply(f"{GROUP}/clusterpolicyreports/{NAME}", _named(cluster))
    done.append(f"applied ClusterPolicyReport {NAME}")
    return done


def _named(report: dict[str, Any]) -> dict[str, Any]:
    return {**report, "metadata": {**report["metadata"], "name": NAME}}
