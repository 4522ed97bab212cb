"""A scan's findings as `vgate audit scan` prints them: text for people, JSON, and JUnit XML for CI
(one case per object judged, a denial or an error its failure, as `vgate eval` counts them)."""

from __future__ import annotations

import json

from ..offline.results import Case, junit
from .scan import Finding, Scan


def scan_text(scan: Scan) -> str:
    """Every object a rule had something to say about (allowed ones with only a warning too), then
    the totals and the count per rule."""
    lines: list[str] = []
    for finding in scan.findings:
        if finding.exempt or (finding.allowed and not finding.violations and not finding.error):
            continue
        lines.append(f"{'ALLOWED' if finding.allowed else 'DENIED'}  {finding.title}")
        lines += [f"  {v['action']:8s}[{v['rule']}] {v['message']}" + (
            f" (exception {v['exception']})" if v.get("exception") else "") for v in finding.violations]
        if finding.error:
            lines.append(f"  error    {finding.error}")
        elif not finding.allowed and not finding.violations:
            lines.append(f"  refused  {finding.message}")
    summary = scan.summary()
    cost = summary["cpuMicrosecondsPerObject"]
    lines.append(f"scanned {summary['objects']} objects ({summary['judged']} judged, {summary['exempt']} exempt) at "
                 f"{summary['started']}: {summary['denied']} denied, {summary['errors']} errors"
                 + (f"; CPU per object judged: {cost:,.0f} µs" if cost is not None else ""))
    if scan.skipped:
        lines.append(f"not served here (skipped): {', '.join(scan.skipped)}")
    workloads = (scan.snapshot or {}).get("sensitiveWorkloads") or []
    if scan.snapshot is not None:
        lines.append(f"sensitive workloads running: {len(workloads)}, "
                     f"{sum(w['compliant'] for w in workloads)} compliant (one zone, encrypted memory, confined)")
    for workload in workloads:
        where = ", ".join(f"{p['pod']} on {p['node']} ({p['nodeFacts']['zone']})" for p in workload["pods"])
        lines.append(f"  {'ok  ' if workload['compliant'] else 'NOT '} {workload['namespace']}/{workload['workload']}: "
                     f"{where}")
    for (rule, action, namespace), count in sorted(scan.per_rule().items()):
        lines.append(f"  {action:8s}{rule}  {namespace or '(cluster)'}: {count}")
    return "\n".join(lines)


def scan_json(scan: Scan) -> str:
    return json.dumps({"summary": scan.summary(), "findings": [f.as_json() for f in scan.findings],
                       "snapshot": scan.snapshot}, indent=2)


def scan_junit(scan: Scan) -> str:
    return junit(_case(finding) for finding in scan.findings if not finding.exempt)


def _case(finding: Finding) -> Case:
    denials = [f"[{v['rule']}] {v['message']}" for v in finding.violations if v["action"] == "deny"]
    failure = None if finding.allowed else "\n".join(denials) or finding.message or finding.error or "denied"
    warnings = [f"[{v['rule']}] {v['message']}" for v in finding.violations if v["action"] != "deny"]
    return Case("vgate audit scan", finding.kind, finding.title, "", None, failure,
                "error" if finding.error and not denials else "denied", warnings)
