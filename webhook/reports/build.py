"""Hourly compliance reports: every decision of an hour, accounted for, signed and chained.

For one closed hour the decision log segments of every writer are streamed once (bounded
memory: counters, plus denials spooled to a temporary file) into ``reports/YYYY/MM/DD/HH/``:
``report.json``, ``report.csv``, ``report.html``, an openreports.io ClusterReport and a
wgpolicyk8s.io ClusterPolicyReport, ``SHA256SUMS`` and ``SHA256SUMS.sig`` (Ed25519). Each
report records the digest of the newest signed report before it (``history.predecessor``), so
the reports form one chain from the genesis, the first report, which says it is one. Missing
segments, broken chains and hours skipped by the link are findings in the report. With an anchor
(``anchor.py``) the writer records each report there before publishing it, and refuses to sign
again an hour it anchored.
"""

from __future__ import annotations

import heapq
import tempfile
from collections import Counter, defaultdict
from collections.abc import Iterator
from contextlib import ExitStack, closing
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, TextIO

import orjson

from ..audit.log import segment_writers
from ..audit.verify import ChainCheck, Finding, segments
from ..core import hours
from ..core.errors import NotReportable
from ..policy.sources import RuleInfo, rule_catalogue
from .anchor import Anchor
from .availability import Availability, is_heartbeat
from .closed_hours import check_reportable
from .history import hour_directory, predecessor, report_of, signed_hours
from .keys import load_private_key
from .log_binding import SegmentDigest
from .mlps import chinese_name
from .publication import SUPERSEDED, sign_and_publish
from .render_csv import CsvRenderer
from .render_html import HtmlRenderer
from .render_json import JsonRenderer
from .render_policy_reports import PolicyReportsRenderer
from .renderer import FinishedHour, Renderer
from .scheduling import SchedulingTally
from .staged import Staged
from .sums import SUMS, digest_of
from .writer_lock import WriterLock

RENDERERS: tuple[type[Renderer], ...] = (JsonRenderer, CsvRenderer, HtmlRenderer, PolicyReportsRenderer)
DENIAL_FIELDS = ("time", "uid", "user", "operation", "kind", "namespace", "name", "decision", "message", "error")
ERROR_FIELDS = ("time", "endpoint", "uid", "user", "operation", "kind", "namespace", "name", "httpStatus", "error",
                "allowed", "message")


@dataclass
class HourTotals:
    """What one pass over an hour's records keeps: counters only, denials spooled to disk."""

    decisions: Counter = field(default_factory=Counter)
    endpoints: Counter = field(default_factory=Counter)
    namespaces: Counter = field(default_factory=Counter)
    users: Counter = field(default_factory=Counter)
    revisions: Counter = field(default_factory=Counter)
    rules: dict[str, Counter] = field(default_factory=lambda: defaultdict(Counter))
    exceptions: dict[str, dict[str, Any]] = field(default_factory=dict)  # name -> rules, details, every use
    per_minute: dict[int, Counter] = field(default_factory=lambda: defaultdict(Counter))
    dry_runs: int = 0
    records: int = 0
    segments: list[SegmentDigest] = field(default_factory=list)
    denials: int = 0
    errors: int = 0
    scheduling: SchedulingTally = field(default_factory=SchedulingTally)
    availability: Availability = field(default_factory=Availability)


def build_report(hour: datetime, audit_dir: str | Path, reports_dir: str | Path, policy_dir: str | Path,
                 key_path: str | Path, *, now: datetime | None = None, reissue_reason: str | None = None,
                 language: str = "both", anchor: Anchor | None = None,
                 snapshot: dict[str, Any] | None = None, lock: WriterLock | None = None) -> Path:
    """Write and publish the report of ``hour``; return its directory.

    Only a closed hour, and only once: NotReportable otherwise (``closed_hours``). The report is
    built in a staging directory on the same volume, fsync'd and renamed into place, so a crash
    never leaves a partial hour visible (``vgate audit verify`` reports the staging left behind).
    With ``reissue_reason`` a signed hour gets a new version; the old one moves, unchanged, to
    ``superseded/<n>/`` and the new one records the reason and the digest it supersedes.
    With ``anchor``, an hour the anchor records as signed is never signed again once it is gone
    from the volume (NotReportable), and each new report is anchored before it is published.
    ``snapshot`` is the state at the hour's close (``background.snapshot``), signed with the rest;
    without one the report says why there is none (``NO_SNAPSHOT``), never an empty state.
    """
    now = now or datetime.now(timezone.utc)  # the one clock read; schedule and the CLI pass theirs
    out = hour_directory(reports_dir, hour)
    check_reportable(hour, now, out, reissue=reissue_reason is not None)
    if anchor is not None:
        anchor.refuse_gone("hour", hours.label(hour), out)
    signing_key = load_private_key(key_path)  # before anything is written: a missing key writes nothing
    reissue = _reissue(out, reissue_reason)

    def write(staged: Staged) -> tuple[dict[str, Any], list[str]]:
        document = _write_files(hour, audit_dir, reports_dir, policy_dir, staged, reissue, language, anchor, now,
                                snapshot or NO_SNAPSHOT)
        return document, [name for renderer in RENDERERS for name in renderer.files]

    sign_and_publish(Path(reports_dir), hours.tag(hour), out, write, signing_key, anchor, _anchor_entry, now,
                     supersedes=reissue["version"] - 1 if reissue else None, lock=lock)
    return out


def _anchor_entry(document: dict[str, Any], digest: str) -> dict[str, Any]:
    """What the anchor keeps of an hour's report: enough to find it deleted, replaced or rolled back,
    and to compare with the log on the volume (its records and writers)."""
    writers = sorted(segment_writers(s["file"] for s in document["segments"]))
    return {"kind": "hour", "hour": document["hour"], "version": (document.get("reissue") or {}).get("version", 1),
            "sha256sumsDigest": digest, "records": document["totals"]["decisions"],
            "lines": sum(s["records"] for s in document["segments"]), "writers": writers,
            "genesis": document["genesis"]}


def _write_files(hour: datetime, audit_dir: str | Path, reports_dir: str | Path, policy_dir: str | Path,
                 out: Staged, reissue: dict[str, Any] | None, language: str, anchor: Anchor | None,
                 now: datetime, snapshot: dict[str, Any]) -> dict[str, Any]:
    """Read the hour's segments once (chain check, digests, counters, every renderer's records), then
    let every renderer write its files; return the report's document."""
    catalogue = rule_catalogue(policy_dir)
    links: list[Finding] = []
    previous = _previous_report(reports_dir, hour, links, anchor)
    with tempfile.TemporaryFile("w+", encoding="utf-8") as denials, \
            tempfile.TemporaryFile("w+", encoding="utf-8") as errors, ExitStack() as renderers_open:
        renderers = [renderers_open.enter_context(closing(kind(out))) for kind in RENDERERS]
        spools: dict[str, TextIO] = {"denials": denials, "errors": errors}
        chain = ChainCheck(ranged=True)
        totals = _stream(audit_dir, hours.tag(hour), chain, renderers, spools)
        document = _document(hour, totals, catalogue, chain.findings + links, previous, now) | (
            {"reissue": reissue} if reissue else {}) | {"snapshot": snapshot}
        finished = FinishedHour(document, spools, language)
        for renderer in renderers:
            renderer.finish(finished)
    return document


def _reissue(out: Path, reason: str | None) -> dict[str, Any] | None:
    """What a new version of a signed hour records: why, which version, and the digest it replaces."""
    if reason is None or not (out / SUMS).is_file():
        return None
    version = len(list((out / SUPERSEDED).glob("*"))) + 2 if (out / SUPERSEDED).is_dir() else 2
    return {"version": version, "reason": reason,
            "supersedes": digest_of(out)}


def _stream(audit_dir: str | Path, tag: str, chain: ChainCheck, renderers: list[Renderer],
            spools: dict[str, TextIO]) -> HourTotals:
    """One pass over the hour's records, every writer's merged in time order: the chain checked, the
    digests taken, counters, every renderer's records, and the denials and errors spooled to disk
    (memory stays flat however busy the hour)."""
    totals = HourTotals()
    readers = []
    for path in segments(audit_dir, tag, tag):
        digest = SegmentDigest(path.name)
        totals.segments.append(digest)
        readers.append(_records(chain.read(path), digest))
    for _, record in heapq.merge(*readers, key=lambda timed: timed[0]):
        totals.availability.add(record)
        if is_heartbeat(record):
            continue  # a sign of life, not a decision: in no count and no renderer
        _count(totals, record)
        for renderer in renderers:
            renderer.add(record)
        rules = record.get("rules") or []
        refused = record.get("decision") == "error" and not record.get("allowed", True)
        if record.get("decision") == "denied" or refused:
            totals.denials += 1
            spools["denials"].write(orjson.dumps({k: record.get(k) for k in DENIAL_FIELDS} | {
                "rules": [r for r in rules if r.get("action") == "deny"]}).decode() + "\n")
        if record.get("decision") == "error":
            totals.errors += 1
            spools["errors"].write(orjson.dumps({k: record.get(k) for k in ERROR_FIELDS}).decode() + "\n")
    return totals


def _records(lines: Iterator[tuple[bytes, Any]], digest: SegmentDigest) -> Iterator[tuple[str, dict[str, Any]]]:
    """A segment's records with their times, in the order written (its writer's time order)."""
    for raw, record in lines:
        digest.add(raw)
        if isinstance(record, dict):  # what is not a record is a finding of the chain check, not counted here
            yield str(record.get("time", "")), record


def _count(totals: HourTotals, record: dict[str, Any]) -> None:
    totals.records += 1
    totals.scheduling.add(record)
    decision = record.get("decision", "unknown")
    totals.decisions[decision] += 1
    totals.endpoints[record.get("endpoint", "")] += 1
    totals.namespaces[record.get("namespace") or "(none)"] += 1
    totals.users[record.get("user") or "(unknown)"] += 1
    totals.revisions[record.get("policyRevision") or "(none)"] += 1
    totals.dry_runs += bool(record.get("dryRun"))
    minute = hours.minute_of_timestamp(str(record.get("time", "")))
    totals.per_minute[minute][decision] += 1
    details = {e.get("name"): e for e in record.get("exceptions") or [] if isinstance(e, dict)}
    for result in record.get("rules") or []:
        totals.rules[result["id"]][result["action"]] += 1
        if result.get("exception"):
            name = result["exception"]
            used = totals.exceptions.setdefault(name, {"rules": Counter(), "uses": [], **{
                k: None for k in ("justification", "approver", "ticket", "expiresAt")}})
            used["rules"][result["id"]] += 1
            used.update({k: v for k, v in details.get(name, {}).items() if k != "name"})
            used["uses"].append({"time": record.get("time"), "uid": record.get("uid"), "rule": result["id"],
                                 "namespace": record.get("namespace"), "name": record.get("name")})


def _previous_report(reports_dir: str | Path, hour: datetime, integrity: list[Finding],
                     anchor: Anchor | None) -> dict[str, Any] | None:
    """The link to the newest report before this hour; a finding for every hour it skips."""
    previous = predecessor(reports_dir, hour, anchor)
    first = next(iter(signed_hours(reports_dir)), None) if previous is None else None  # no link: a later genesis?
    oldest = report_of(hour_directory(reports_dir, first)) if first is not None and first > hour else None
    if first is not None and oldest is not None and oldest.get("genesis") is True:
        raise NotReportable(f"hour {hours.label(hour)} is before the first report, the genesis "
                            f"({hours.label(first)}): the chain begins there and does not begin again", usage=False)
    before = hour - timedelta(hours=1)
    if previous is not None and previous["hour"] != hours.label(before):
        integrity.append(Finding(str(hour_directory(reports_dir, before)), None,
                                 f"no report for the hours after {previous['hour']} up to {hours.label(before)}: "
                                 f"this report links the report of {previous['hour']}"))
    return previous


NO_SNAPSHOT = {"taken": False, "reason": "this writer reads no cluster (the chart's report writer does: "
                                        "reportWriter.snapshot)"}


def _summary(totals: HourTotals) -> str:
    if totals.records:
        return f"{totals.records} decisions, {totals.denials} denied"
    up = totals.availability.section("")["upMinutes"]
    if up:
        return f"no admission requests reached vgate in this hour (it was up {up} of 60 minutes)"
    return "no record of vgate running in this hour: no heartbeat and no decision (an outage, or vgate not running)"


def _document(hour: datetime, totals: HourTotals, catalogue: dict[str, RuleInfo], integrity: list[Finding],
              previous: dict[str, Any] | None, now: datetime) -> dict[str, Any]:
    rules: list[dict[str, Any]] = []
    for rule_id in sorted(set(catalogue) | set(totals.rules)):
        info = catalogue.get(rule_id, RuleInfo(rule_id))
        counts = totals.rules.get(rule_id, Counter())
        rules.append({"id": rule_id, "title": info.title, "severity": info.severity, "category": info.category,
                      "control": info.control, **{a: counts.get(a, 0) for a in ("deny", "warn", "audit", "excepted")}})
    controls: dict[str, dict[str, Any]] = {}
    for rule in rules:
        control = rule["control"] or "(unmapped)"
        entry = controls.setdefault(control, {"control": control, "zh": chinese_name(control), "rules": [],
                                              "violations": 0})
        entry["rules"].append(rule["id"])
        entry["violations"] += rule["deny"] + rule["warn"] + rule["audit"]
    audit = "MLPS 2.0 (GB/T 22239-2019) 8.1.4.3 security audit"
    controls[audit] = {"control": audit, "zh": chinese_name(audit), "rules": ["(this report)"],
                       "violations": len(integrity)}
    return {
        "apiVersion": "vgate.io/v1alpha1", "kind": "HourlyComplianceReport",
        "hour": hours.label(hour), "from": hour.isoformat(), "to": (hour + timedelta(hours=1)).isoformat(),
        "generatedAt": now.isoformat(timespec="microseconds"),
        "traffic": totals.records > 0,
        "summary": _summary(totals),
        "totals": {"decisions": totals.records, "byDecision": dict(totals.decisions),
                   "byEndpoint": dict(totals.endpoints), "dryRuns": totals.dry_runs},
        "perNamespace": dict(totals.namespaces.most_common()), "perUser": dict(totals.users.most_common()),
        "perRule": rules, "controls": sorted(controls.values(), key=lambda c: c["control"]),
        "exceptionsUsed": {name: {**used, "rules": dict(used["rules"])}
                           for name, used in sorted(totals.exceptions.items())},
        "policyRevisions": dict(totals.revisions), "segments": [digest.as_json() for digest in totals.segments],
        "perMinute": [dict(totals.per_minute.get(m, {})) for m in range(60)],
        "integrity": {"ok": not integrity, "findings": [str(f) for f in integrity]},
        "previousReport": previous,
        "genesis": previous is None,
        "scheduling": totals.scheduling.section(),
        "availability": totals.availability.section(hours.label(hour)),
        "denialCount": totals.denials,
        "errorCount": totals.errors,
    }
