"""A scan's findings as the cluster's policy reports, where Policy Reporter reads them.

Per namespace one wgpolicyk8s.io/v1alpha2 ``PolicyReport`` named ``vgate-audit``, and one
``ClusterPolicyReport`` of that name for cluster-scoped objects, each replaced by the next scan (as
Kyverno's background scan keeps one report per namespace, not one per scan): a result per object and
rule that said something (``fail`` for a denial, ``warn``, ``skip`` under an exception, ``error``
for an object the policies could not evaluate), ``source: vgate``, the objects that passed counted
in the summary. The hourly reports' objects (``vgate``, from the hour's decisions) stay apart: these
say what runs now, those what was decided in the hour.
"""

from __future__ import annotations

from collections import Counter
from datetime import datetime
from typing import Any

from ..policy.sources import RuleInfo
from ..reports.render_policy_reports import MAX_RESULTS, SEVERITIES
from ..reports.resource_results import resource_ref, status_of
from .scan import Finding, Scan

NAME = "vgate-audit"
API_VERSION = "wgpolicyk8s.io/v1alpha2"


def scan_reports(scan: Scan, rules: dict[str, RuleInfo]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Each namespace's PolicyReport (those with any object judged) and the ClusterPolicyReport."""
    by_namespace: dict[str, list[Finding]] = {}
    for finding in scan.findings:
        if not finding.exempt:
            by_namespace.setdefault(finding.namespace, []).append(finding)
    seconds = int(datetime.fromisoformat(scan.started).timestamp()) if scan.started else 0
    namespaced = [_report(namespace, found, rules, seconds) for namespace, found in sorted(by_namespace.items())
                  if namespace]
    return namespaced, _report("", by_namespace.get("", []), rules, seconds)


def _report(namespace: str, findings: list[Finding], rules: dict[str, RuleInfo], seconds: int) -> dict[str, Any]:
    results: list[dict[str, Any]] = []
    summary, left_out = Counter[str](), 0
    for finding in findings:
        if finding.allowed and not finding.violations and not finding.error:
            summary["pass"] += 1
            continue
        for result in _results(finding, rules, seconds):
            summary[result["result"]] += 1
            if len(results) < MAX_RESULTS:
                results.append(result)
            else:
                left_out += 1
    metadata: dict[str, Any] = {"name": NAME, "labels": {"app.kubernetes.io/managed-by": "vgate"},
                                "annotations": {"vgate.io/scanned-at": datetime.fromtimestamp(seconds).isoformat()
                                                if seconds else "", "vgate.io/results-left-out": str(left_out)}}
    if namespace:
        metadata["namespace"] = namespace
    return {"apiVersion": API_VERSION, "kind": "PolicyReport" if namespace else "ClusterPolicyReport",
            "metadata": metadata, "summary": {k: summary.get(k, 0) for k in ("pass", "fail", "warn", "error", "skip")},
            "results": results}


def _results(finding: Finding, rules: dict[str, RuleInfo], seconds: int) -> list[dict[str, Any]]:
    reference = resource_ref((finding.namespace, finding.kind, finding.name))
    stamp = {"seconds": seconds, "nanos": 0}
    if finding.error:
        return [{"policy": "vgate", "rule": "evaluation", "result": "error", "source": "vgate", "scored": True,
                 "message": finding.error, "resources": [reference], "timestamp": stamp}]
    if not finding.violations:  # refused before the rules (too large to judge)
        return [{"policy": "vgate", "rule": "admission", "result": "fail", "source": "vgate", "scored": True,
                 "message": finding.message, "resources": [reference], "timestamp": stamp}]
    found = []
    for violation in finding.violations:
        rule = rules.get(str(violation["rule"]))
        found.append({
            "policy": violation["rule"], "rule": violation["rule"], "result": status_of(violation), "source": "vgate",
            "severity": rule.severity if rule and rule.severity in SEVERITIES else "info",
            "category": rule.category if rule else "", "scored": True, "message": str(violation["message"]),
            "properties": {"action": str(violation["action"]), "control": rule.control if rule else "",
                           **({"exception": str(violation["exception"])} if violation.get("exception") else {})},
            "resources": [reference], "timestamp": stamp})
    return found
