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

from collections import Counter, defaultdict
from datetime import date, datetime, time, timedelta, timezone
from pathlib import Path
from typing import Any

import orjson

from ..core import hours
from ..core.errors import NotReportable
from .anchor import Anchor
from .build import publish, staging_directory
from .closed_hours import last_closed_hour
from .history import genesis_hour, hour_directory, newest_link, signed_hours
from .keys import load_private_key
from .sums import SUMS, digest_of, sign_files

DAILY = "daily"
_COUNTS = ("deny", "warn", "audit", "excepted")


def daily_directory(reports_dir: str | Path, day: date) -> Path:
    return Path(reports_dir) / f"{day:%Y/%m/%d}" / DAILY


def day_hours(day: date) -> list[datetime]:
    start = datetime.combine(day, time(), tzinfo=timezone.utc)
    return [start + timedelta(hours=n) for n in range(24)]


def day_closed(day: date, now: datetime) -> bool:
    return day_hours(day)[-1] <= last_closed_hour(now)


def build_daily(day: date, reports_dir: str | Path, key_path: str | Path, now: datetime,
                anchor: Anchor | None = None) -> Path:
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
    with staging_directory(reports_dir, f"{day:%Y%m%d}-daily") as staging:
        document = summarise(day, reports_dir, anchor)
        (staging / "report.json").write_bytes(orjson.dumps(document, option=orjson.OPT_INDENT_2))
        sign_files(staging, ("report.json",), signing_key)
        if anchor is not None:
            anchor.append({"kind": "day", "day": document["day"], "version": 1, "sha256sumsDigest": digest_of(staging),
                           "hours": len(document["hourlyReports"]), "genesis": document["genesis"]}, signing_key, now)
        publish(staging, out)
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


def summarise(day: date, reports_dir: str | Path, anchor: Anchor | None = None) -> dict[str, Any]:
    """The day's figures from its hourly reports, and each hour's digest (missing hours are findings)."""
    totals: Counter[str] = Counter()
    decisions: Counter[str] = Counter()
    rules: dict[str, dict[str, Any]] = {}
    controls: dict[str, dict[str, Any]] = {}
    exceptions: dict[str, Counter[str]] = defaultdict(Counter)
    hourly, findings = [], []
    availability: dict[str, Any] = {"upMinutes": 0, "hoursWithoutRecord": [], "gaps": []}
    for hour in reported_hours_of(day, genesis_hour(reports_dir, anchor)):
        directory = hour_directory(reports_dir, hour)
        if not (directory / SUMS).is_file():
            findings.append(f"{directory}: no report for hour {hours.label(hour)}")
            continue
        hourly.append({"hour": hours.label(hour), "sha256sumsDigest": digest_of(directory)})
        report = orjson.loads((directory / "report.json").read_bytes())
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
        "integrity": {"ok": not findings, "findings": findings},
    }


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
