"""Hourly compliance reports: every decision of an hour, accounted for, signed and chained.

For one closed hour the decision log segments of every writer are streamed once (bounded
memory: counters, plus denials spooled to a temporary file) into ``reports/YYYY/MM/DD/HH/``:
``report.json``, ``report.csv``, ``report.html``, an openreports.io ClusterReport and a
wgpolicyk8s.io ClusterPolicyReport, ``SHA256SUMS`` and ``SHA256SUMS.sig`` (Ed25519). Each
report records the digest of the previous hour's ``SHA256SUMS``, so the reports form a chain.
Missing segments, broken chains and a missing predecessor are findings in the report.
"""

from __future__ import annotations

import csv
import hashlib
import tempfile
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from importlib import resources
from pathlib import Path
from typing import Any, TextIO

import jinja2
import orjson
import yaml

from ..audit.log import Finding, segments, verify_segments
from ..policy.sources import RuleInfo, rule_catalogue
from .keys import load_private_key, load_public_key, sign, signature_valid

FILES = ("report.json", "report.csv", "report.html", "clusterreport.yaml", "clusterpolicyreport.yaml")
SUMS, SIGNATURE = "SHA256SUMS", "SHA256SUMS.sig"
CSV_FIELDS = ("time", "replica", "endpoint", "uid", "user", "operation", "kind", "namespace", "name", "dryRun",
              "decision", "rules", "exceptions", "policyRevision", "latencyMs")


@dataclass
class HourTotals:
    """What one pass over an hour's records keeps: counters only, denials spooled to disk."""

    decisions: Counter = field(default_factory=Counter)
    endpoints: Counter = field(default_factory=Counter)
    namespaces: Counter = field(default_factory=Counter)
    users: Counter = field(default_factory=Counter)
    revisions: Counter = field(default_factory=Counter)
    rules: dict[str, Counter] = field(default_factory=lambda: defaultdict(Counter))
    rule_resources: dict[str, list[dict[str, str]]] = field(default_factory=lambda: defaultdict(list))
    exceptions: dict[str, Counter] = field(default_factory=lambda: defaultdict(Counter))
    per_minute: dict[int, Counter] = field(default_factory=lambda: defaultdict(Counter))
    dry_runs: int = 0
    records: int = 0
    writers: set[str] = field(default_factory=set)
    denials: int = 0


def hour_directory(reports_dir: str | Path, hour: datetime) -> Path:
    return Path(reports_dir) / hour.strftime("%Y/%m/%d/%H")


def parse_hour(value: str) -> datetime:
    """`2026-12-02T10` -> that hour, UTC."""
    return datetime.strptime(value, "%Y-%m-%dT%H").replace(tzinfo=timezone.utc)


def build_report(hour: datetime, audit_dir: str | Path, reports_dir: str | Path, policy_dir: str | Path,
                 key_path: str | Path) -> Path:
    """Write the report of ``hour`` (a closed UTC hour); return its directory."""
    tag = hour.strftime("%Y%m%dT%H")
    out = hour_directory(reports_dir, hour)
    out.mkdir(parents=True, exist_ok=True)
    catalogue = rule_catalogue(policy_dir)
    _, integrity = verify_segments(audit_dir, tag, tag)
    previous = _previous_report(reports_dir, hour, integrity)
    with tempfile.TemporaryFile("w+", encoding="utf-8") as denials, \
            open(out / "report.csv", "w", newline="", encoding="utf-8") as csv_file:
        writer = csv.writer(csv_file)
        writer.writerow(CSV_FIELDS)
        totals = _stream(audit_dir, tag, writer, denials)
        document = _document(hour, totals, catalogue, integrity, previous)
        _write_json(out / "report.json", document, denials)
        denials.seek(0)
        first_denials = [orjson.loads(line) for _, line in zip(range(200), denials)]
    (out / "report.html").write_text(_html(document, first_denials), encoding="utf-8")
    (out / "clusterreport.yaml").write_text(yaml.safe_dump(_policy_report(document, catalogue, "openreports"), sort_keys=False))
    (out / "clusterpolicyreport.yaml").write_text(yaml.safe_dump(_policy_report(document, catalogue, "wgpolicy"), sort_keys=False))
    sums = "".join(f"{_sha256(out / name)}  {name}\n" for name in FILES)
    (out / SUMS).write_text(sums)
    (out / SIGNATURE).write_bytes(sign(load_private_key(key_path), sums.encode()))
    return out


def _stream(audit_dir: str | Path, tag: str, writer: Any, denials: TextIO) -> HourTotals:
    totals = HourTotals()
    for path in segments(audit_dir, tag, tag):
        totals.writers.add(path.name)
        with open(path, "rb") as segment:
            for line in segment:
                try:
                    record = orjson.loads(line)
                except orjson.JSONDecodeError:
                    continue  # counted by the integrity check, not here
                _count(totals, record)
                rules = record.get("rules") or []
                writer.writerow([record.get("time"), record.get("replica"), record.get("endpoint"), record.get("uid"),
                                 record.get("user"), record.get("operation"), record.get("kind"),
                                 record.get("namespace"), record.get("name"), record.get("dryRun"),
                                 record.get("decision"), ";".join(f"{r['id']}:{r['action']}" for r in rules),
                                 ";".join(r["exception"] for r in rules if r.get("exception")),
                                 record.get("policyRevision"), record.get("latencyMs")])
                if record.get("decision") == "denied" or (record.get("decision") == "error" and not record.get("allowed", True)):
                    totals.denials += 1
                    denials.write(orjson.dumps({k: record.get(k) for k in (
                        "time", "uid", "user", "operation", "kind", "namespace", "name", "decision", "message",
                        "error")} | {"rules": [r for r in rules if r.get("action") == "deny"]}).decode() + "\n")
    return totals


def _count(totals: HourTotals, record: dict[str, Any]) -> None:
    totals.records += 1
    decision = record.get("decision", "unknown")
    totals.decisions[decision] += 1
    totals.endpoints[record.get("endpoint", "")] += 1
    totals.namespaces[record.get("namespace") or "(none)"] += 1
    totals.users[record.get("user") or "(unknown)"] += 1
    totals.revisions[record.get("policyRevision") or "(none)"] += 1
    totals.dry_runs += bool(record.get("dryRun"))
    minute = int(str(record.get("time", "0000-00-00T00:00"))[14:16] or 0)
    totals.per_minute[minute][decision] += 1
    for result in record.get("rules") or []:
        totals.rules[result["id"]][result["action"]] += 1
        if result.get("exception"):
            totals.exceptions[result["exception"]][result["id"]] += 1
        kept = totals.rule_resources[result["id"]]
        if len(kept) < 20:
            kept.append({"kind": str(record.get("kind", "")).rsplit("/", 1)[-1], "namespace": record.get("namespace") or "",
                         "name": record.get("name") or ""})


def _previous_report(reports_dir: str | Path, hour: datetime, integrity: list[Finding]) -> dict[str, Any] | None:
    before = hour - timedelta(hours=1)
    sums = hour_directory(reports_dir, before) / SUMS
    if not sums.is_file():
        integrity.append(Finding(str(sums.parent), None, f"no report for the previous hour {before:%Y-%m-%dT%H}"))
        return None
    return {"hour": before.strftime("%Y-%m-%dT%H"), "sha256sumsDigest": hashlib.sha256(sums.read_bytes()).hexdigest()}


def _document(hour: datetime, totals: HourTotals, catalogue: dict[str, RuleInfo], integrity: list[Finding],
              previous: dict[str, Any] | None) -> dict[str, Any]:
    rules = []
    for rule_id in sorted(set(catalogue) | set(totals.rules)):
        info = catalogue.get(rule_id, RuleInfo(rule_id))
        counts = totals.rules.get(rule_id, Counter())
        rules.append({"id": rule_id, "title": info.title, "severity": info.severity, "category": info.category,
                      "control": info.control, **{a: counts.get(a, 0) for a in ("deny", "warn", "audit", "excepted")}})
    controls: dict[str, dict[str, Any]] = {}
    for rule in rules:
        control = rule["control"] or "(unmapped)"
        entry = controls.setdefault(control, {"control": control, "rules": [], "violations": 0})
        entry["rules"].append(rule["id"])
        entry["violations"] += rule["deny"] + rule["warn"] + rule["audit"]
    controls["MLPS 2.0 (GB/T 22239-2019) 8.1.4.3 security audit"] = {
        "control": "MLPS 2.0 (GB/T 22239-2019) 8.1.4.3 security audit", "rules": ["(this report)"],
        "violations": len(integrity)}
    return {
        "apiVersion": "vgate.io/v1alpha1", "kind": "HourlyComplianceReport",
        "hour": hour.strftime("%Y-%m-%dT%H"), "from": hour.isoformat(), "to": (hour + timedelta(hours=1)).isoformat(),
        "generatedAt": datetime.now(timezone.utc).isoformat(timespec="microseconds"),
        "traffic": totals.records > 0,
        "summary": "no admission requests reached vgate in this hour" if totals.records == 0 else
                   f"{totals.records} decisions, {totals.denials} denied",
        "totals": {"decisions": totals.records, "byDecision": dict(totals.decisions),
                   "byEndpoint": dict(totals.endpoints), "dryRuns": totals.dry_runs},
        "perNamespace": dict(totals.namespaces.most_common()), "perUser": dict(totals.users.most_common()),
        "perRule": rules, "controls": sorted(controls.values(), key=lambda c: c["control"]),
        "exceptionsUsed": {name: dict(counts) for name, counts in sorted(totals.exceptions.items())},
        "policyRevisions": dict(totals.revisions), "segments": sorted(totals.writers),
        "perMinute": [dict(totals.per_minute.get(m, {})) for m in range(60)],
        "integrity": {"ok": not integrity, "findings": [str(f) for f in integrity]},
        "previousReport": previous,
        "ruleResources": {k: v for k, v in totals.rule_resources.items()},
        "denialCount": totals.denials,
    }


def _write_json(path: Path, document: dict[str, Any], denials: TextIO) -> None:
    """report.json with every denial, streamed from the spool instead of held in memory."""
    head = orjson.dumps(document, option=orjson.OPT_INDENT_2)
    with open(path, "wb") as out:
        out.write(head[:-2])  # reopen the top-level object: drop "\n}"
        out.write(b',\n  "denials": [')
        denials.seek(0)
        for index, line in enumerate(denials):
            out.write((b"," if index else b"") + b"\n    " + line.strip().encode())
        out.write(b"\n  ]\n}\n")


def _html(document: dict[str, Any], denials: list[dict[str, Any]]) -> str:
    environment = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined)
    template = environment.from_string((resources.files("webhook.reports") / "templates" / "report.html.j2").read_text())
    peak = max([sum(m.values()) for m in document["perMinute"]] + [1])
    return template.render(report=document, denials=denials, peak=peak)


def _policy_report(document: dict[str, Any], catalogue: dict[str, RuleInfo], flavour: str) -> dict[str, Any]:
    """A ClusterReport (openreports.io) or ClusterPolicyReport (wgpolicyk8s.io) of the hour, one result per rule."""
    end = datetime.fromisoformat(document["to"])
    results, summary = [], Counter()
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


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def verify_reports(reports_dir: str | Path, public_key_path: str | Path, first: datetime | None = None,
                   last: datetime | None = None) -> list[Finding]:
    """Checksums, signature and predecessor link of every report in range, and missing hours."""
    findings: list[Finding] = []
    key = load_public_key(public_key_path)
    hours = sorted(_report_hours(reports_dir))
    if first:
        hours = [h for h in hours if h >= first]
    if last:
        hours = [h for h in hours if h <= last]
    for earlier, later in zip(hours, hours[1:]):
        gap = earlier + timedelta(hours=1)
        while gap < later:
            findings.append(Finding(str(hour_directory(reports_dir, gap)), None, f"no report for hour {gap:%Y-%m-%dT%H}"))
            gap += timedelta(hours=1)
    for hour in hours:
        directory = hour_directory(reports_dir, hour)
        sums_path, sig_path = directory / SUMS, directory / SIGNATURE
        if not sums_path.is_file() or not sig_path.is_file():
            findings.append(Finding(str(directory), None, "SHA256SUMS or its signature is missing"))
            continue
        sums = sums_path.read_bytes()
        if not signature_valid(key, sums, sig_path.read_bytes()):
            findings.append(Finding(str(sig_path), None, "signature does not verify with the report public key"))
        for number, line in enumerate(sums.decode().splitlines(), 1):
            digest, _, name = line.partition("  ")
            target = directory / name
            if not target.is_file():
                findings.append(Finding(str(sums_path), number, f"{name} is missing"))
            elif _sha256(target) != digest:
                findings.append(Finding(str(target), None, f"checksum does not match SHA256SUMS line {number}: the file was changed"))
        try:
            previous = orjson.loads((directory / "report.json").read_bytes()).get("previousReport")
        except (OSError, orjson.JSONDecodeError):
            continue  # already reported as a checksum problem
        before = hour - timedelta(hours=1)
        before_sums = hour_directory(reports_dir, before) / SUMS
        if previous and before_sums.is_file() and previous["sha256sumsDigest"] != hashlib.sha256(before_sums.read_bytes()).hexdigest():
            findings.append(Finding(str(directory / "report.json"), None,
                                    f"previousReport digest does not match the report of {before:%Y-%m-%dT%H}: it was replaced"))
    return findings


def _report_hours(reports_dir: str | Path) -> list[datetime]:
    """Hours with a report, or with what is left of one (SHA256SUMS or report.json)."""
    hours = set()
    for name in (SUMS, "report.json"):
        for marker in Path(reports_dir).glob("*/*/*/*/" + name):
            year, month, day, hour = marker.parent.parts[-4:]
            hours.add(datetime(int(year), int(month), int(day), int(hour), tzinfo=timezone.utc))
    return sorted(hours)
