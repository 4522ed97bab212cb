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
    namespaced = [d for d in yaml.safe_load_all((hour_dir / "policyreports.yaml").read_text()) if d]
    cluster = yaml.safe_load((hour_dir / "clusterpolicyreport.yaml").read_text())
    return publish_reports(api, namespaced, cluster, NAME, "this hour")


def publish_reports(api: ApiServer, namespaced: list[dict[str, Any]], cluster: dict[str, Any], name: str,
                    when: str) -> list[str]:
    """Each namespace's report and the cluster's, server-side applied under ``name`` (one object per
    namespace, replaced, never one more); ``name`` removed where a namespace has none ``when``."""
    done = []
    current = set()
    for report in namespaced:
        namespace = report["metadata"]["namespace"]
        current.add(namespace)
        api.apply(f"{GROUP}/namespaces/{namespace}/policyreports/{name}", _named(report, name))
        done.append(f"applied PolicyReport {namespace}/{name}")
    for namespace, found in api.names(f"{GROUP}/policyreports"):
        if found == name and namespace not in current:
            api.delete(f"{GROUP}/namespaces/{namespace}/policyreports/{name}")
            done.append(f"deleted PolicyReport {namespace}/{name} (no result {when})")
    api.apply(f"{GROUP}/clusterpolicyreports/{name}", _named(cluster, name))
    done.append(f"applied ClusterPolicyReport {name}")
    return done


def _named(report: dict[str, Any], name: str) -> dict[str, Any]:
    return {**report, "metadata": {**report["metadata"], "name": name}}
