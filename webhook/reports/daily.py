"""The daily report: a UTC day's 24 signed hourly reports, summed and bound, signed and chained.

Written once the day's last hour has closed, from the hourly ``report.json`` files (the log was
read once already, and each hour's figures are signed): totals, denials, errors and exceptions per
rule and MLPS control over the day, and the SHA256SUMS digest of every hourly report it sums, so
an hour replaced afterwards no longer matches. ``reports/YYYY/MM/DD/daily/`` holds ``report.json``,
``SHA256SUMS`` and ``SHA256SUMS.sig``; like the hours, each day links the newest daily report
before it (``previousDay``), and only the first (``genesis``) links none. The first day starts
at the genesis hour: hours before vgate ran are not missing.
"""

from __future__ import annotations

import hashlib
import os
from collections import Counter, defaultdict
from datetime import date, datetime, time, timedelta, timezone
from pathlib import Path
from typing import Any

import orjson
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from ..audit.regular_files import DOCUMENT, read_regular
from ..core import hours
from ..core.errors import NotReportable, UnverifiedReport
from .anchor import Anchor
from .closed_hours import last_closed_hour
from .history import DAILY, daily_directory, genesis_hour, hour_directory, newest_link, signed_hours
from .keys import load_private_key, signature_valid
from .publication import sign_and_publish
from .staged import Staged
from .sums import SIGNATURE, SUMS, listed
from .writer_lock import WriterLock

_COUNTS = ("deny", "warn", "audit", "excepted")


def day_hours(day: date) -> list[datetime]:
    start = datetime.combine(day, time(), tzinfo=timezone.utc)
    return [start + timedelta(hours=n) for n in range(24)]


def day_closed(day: date, now: datetime) -> bool:
    return day_hours(day)[-1] <= last_closed_hour(now)


def build_daily(day: date, reports_dir: str | Path, key_path: str | Path, now: datetime,
                anchor: Anchor | None = None, lock: WriterLock | None = None) -> Path:
    """Write the signed daily report of ``day``; NotReportable if it is not over, or written already
    (or, by the anchor, written once and gone)."""
    out = daily_directory(reports_dir, day)
    if not day_closed(day, now):
        raise NotReportable(f"day {day} has not closed yet", usage=True)
    if (out / SUMS).exists():
        raise NotReportable(f"the daily report of {day} exists ({out}) and is never rewritten", usage=False)
    if anchor is not None:
        anchor.refuse_gone("day", day.isoformat(), out)
    signing_key = load_private_key(key_path)

    def write(staged: Staged) -> tuple[dict[str, Any], list[str]]:
        document = summarise(day, reports_dir, signing_key.public_key(), anchor)
        staged.write("report.json", orjson.dumps(document, option=orjson.OPT_INDENT_2))
        return document, ["report.json"]

    def anchor_entry(document: dict[str, Any], digest: str) -> dict[str, Any]:
        return {"kind": "day", "day": document["day"], "version": 1, "sha256sumsDigest": digest,
                "hours": len(document["hourlyReports"]), "genesis": document["genesis"]}

    sign_and_publish(Path(reports_dir), f"{day:%Y%m%d}-daily", out, write, signing_key, anchor, anchor_entry, now,
                     lock=lock)
    return out


def reported_hours_of(day: date, genesis: datetime | None) -> list[datetime]:
    """The hours of ``day`` that should have reports: all 24, from the ``genesis`` hour on."""
    return [hour for hour in day_hours(day) if genesis is None or hour >= genesis]


def previous_day(day: date, reports_dir: str | Path, anchor: Anchor | None) -> dict[str, Any] | None:
    """The newest daily report before ``day``, on the volume or in the anchor; None: the first."""
    published = {d.isoformat(): daily_directory(reports_dir, d) for d in daily_days(reports_dir)}
    return newest_link("day", day.isoformat(), published, anchor)


def daily_days(reports_dir: str | Path) -> list[date]:
    """Days with a published daily report, oldest first."""
    return sorted(datetime.strptime("/".join(p.parts[-5:-2]), "%Y/%m/%d").date()
                  for p in Path(reports_dir).glob(f"*/*/*/{DAILY}/{SUMS}"))


def summarise(day: date, reports_dir: str | Path, key: Ed25519PublicKey,
              anchor: Anchor | None = None) -> dict[str, Any]:
    """The day's figures from its hourly reports, each verified first (``verified_hour``) and summed from
    the very bytes verified; an hour missing or not verifying is a finding and is not summed."""
    totals: Counter[str] = Counter()
    decisions: Counter[str] = Counter()
    rules: dict[str, dict[str, Any]] = {}
    controls: dict[str, dict[str, Any]] = {}
    exceptions: dict[str, Counter[str]] = defaultdict(Counter)
    hourly, findings = [], []
    availability: dict[str, Any] = {"upMinutes": 0, "hoursWithoutRecord": [], "gaps": []}
    anchored_hours = anchor.reports("hour") if anchor is not None else {}  # the anchor read once, not per hour
    for hour in reported_hours_of(day, genesis_hour(reports_dir, anchor)):
        directory = hour_directory(reports_dir, hour)
        if not os.path.lexists(directory / SUMS):
            findings.append(f"{directory}: no report for hour {hours.label(hour)}")
            continue
        anchored = anchored_hours.get(hours.label(hour))
        try:
            report, digest = verified_hour(directory, hours.label(hour), key, anchored[-1].digest if anchored else None)
        except UnverifiedReport as problem:
            findings.append(f"{directory}: not summed: {problem}")
            continue
        hourly.append({"hour": hours.label(hour), "sha256sumsDigest": digest})
        totals.update({"decisions": report["totals"]["decisions"], "denials": report.get("denialCount", 0),
                       "errors": report.get("errorCount", 0), "dryRuns": report["totals"].get("dryRuns", 0)})
        decisions.update(report["totals"]["byDecision"])
        for rule in report["perRule"]:
            entry = rules.setdefault(rule["id"], {k: rule[k] for k in ("id", "title", "severity", "control")}
                                     | dict.fromkeys(_COUNTS, 0))
            for count in _COUNTS:
                entry[count] += rule[count]
        for control in report["controls"]:
            entry = controls.setdefault(control["control"], {**control, "violations": 0})
            entry["violations"] += control["violations"]
        for name, used in report["exceptionsUsed"].items():
            exceptions[name].update(used.get("rules", used))
        findings += [f"{hours.label(hour)}: {finding}" for finding in report["integrity"]["findings"]]
        _add_availability(availability, hours.label(hour), report.get("availability"))
    previous = previous_day(day, reports_dir, anchor)
    return {
        "apiVersion": "vgate.io/v1alpha1", "kind": "DailyComplianceReport", "day": day.isoformat(),
        "totals": {**dict(totals), "byDecision": dict(decisions)},
        "perRule": sorted(rules.values(), key=lambda r: r["id"]),
        "controls": sorted(controls.values(), key=lambda c: c["control"]),
        "exceptionsUsed": {name: dict(counts) for name, counts in sorted(exceptions.items())},
        "hourlyReports": hourly,
        "availability": availability,
        "previousDay": previous,
        "genesis": previous is None,
        "verification": VERIFIED,
        "integrity": {"ok": not findings, "findings": findings},
    }


def verified_hour(directory: Path, label: str, key: Ed25519PublicKey,
                  anchored: str | None) -> tuple[dict[str, Any], str]:
    """An hour's report.json and SHA256SUMS digest, if its SHA256SUMS is signed by ``key``, its
    report.json is the one SHA256SUMS lists, it is the report of ``label``, and (with the anchor's
    ``anchored`` digest) it is the version the writer anchored; UnverifiedReport otherwise. The figures are
    parsed from the bytes hashed, so nothing can be swapped between the check and the sum."""
    try:
        sums = read_regular(directory / SUMS)
        signed = signature_valid(key, sums, read_regular(directory / SIGNATURE))
        data = read_regular(directory / "report.json", DOCUMENT)
    except OSError as error:
        raise UnverifiedReport(str(error)) from None
    digest = hashlib.sha256(sums).hexdigest()
    if not signed:
        raise UnverifiedReport("its SHA256SUMS signature does not verify with the report key")
    if dict((name, digest) for digest, name in listed(sums)).get("report.json") != hashlib.sha256(data).hexdigest():
        raise UnverifiedReport("its report.json does not match its signed SHA256SUMS (changed after signing)")
    if anchored is not None and digest != anchored:
        raise UnverifiedReport(f"it is not the version the anchor records ({anchored[:12]}...)")
    report = orjson.loads(data)
    if not isinstance(report, dict) or report.get("hour") != label:
        raise UnverifiedReport(f"its report.json is not the report of {label} (copied or moved here)")
    return report, digest


VERIFIED = ("every hourly report summed here was verified first: its SHA256SUMS signature by the report key, its "
            "report.json against SHA256SUMS, its hour against its place, and its digest against the writer's "
            "anchor (when one is kept); an hour that fails is a finding and is not summed")


def _add_availability(day: dict[str, Any], hour: str, section: Any) -> None:
    """An hour's availability into the day's: minutes up, the hours no vgate recorded anything in,
    every gap with its hour (reports from before heartbeats have none: they add nothing)."""
    if not isinstance(section, dict):
        return
    day["upMinutes"] += int(section.get("upMinutes", 0))
    if not section.get("recorded"):
        day["hoursWithoutRecord"].append(hour)
        return
    day["gaps"] += [{"hour": hour, "range": gap.get("range"), "minutes": gap.get("minutes")}
                    for gap in section.get("gaps") or [] if isinstance(gap, dict)]


def complete_days(reports_dir: str | Path, until: datetime) -> list[date]:
    """Days over by ``until`` whose hourly reports (from the genesis hour on) all exist: each must
    have a daily report."""
    signed = signed_hours(reports_dir)
    published = set(signed)
    genesis = signed[0] if signed else None
    return sorted(day for day in {hour.date() for hour in signed} if day_hours(day)[-1] <= until
                  and all(hour in published for hour in reported_hours_of(day, genesis)))
