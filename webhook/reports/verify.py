"""``vgate audit verify`` for reports: checksums, signature, the log each report signed, the link to
the previous hour, and every closed hour accounted for."""

from __future__ import annotations

import hashlib
import re
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import orjson

from ..audit.log import SEGMENT
from ..audit.verify import Finding
from ..core import hours
from .build import STAGING_PREFIX, SUPERSEDED, hour_directory
from .daily import DAILY, complete_days, daily_directory
from .keys import Ed25519PublicKey, load_public_key, signature_valid
from .log_binding import check_binding
from .sums import SIGNATURE, SUMS, digest_of, sha256_file


def verify_reports(reports_dir: str | Path, public_key_path: str | Path, first: datetime | None = None,
                   last: datetime | None = None, *, audit_dir: str | Path | None = None,
                   until: datetime | None = None) -> list[Finding]:
    """Every report in range, and every hour that should have one.

    Checksums and signature of each version (reissued ones included), the decision log each one
    signed (with ``audit_dir``), the link to the previous hour, every hour without a report from
    the first one to ``until`` (the last closed hour: deleting the newest hours is found too) and
    every closed hour with decisions but no report (deleting all reports is found too).
    """
    findings: list[Finding] = []
    key = load_public_key(public_key_path)
    in_range = _within(first, last)
    reported = [h for h in _report_hours(reports_dir) if in_range(h)]
    expected = set(_hours_between(reported[0], max(until or reported[-1], reported[-1]))) if reported else set()
    if audit_dir is not None:
        expected |= {h for h in _logged_hours(audit_dir) if in_range(h) and (until is None or h <= until)}
    for gap in sorted(expected - set(reported)):
        findings.append(Finding(str(hour_directory(reports_dir, gap)), None, f"no report for hour {hours.label(gap)}"))
    for leftover in sorted(Path(reports_dir).glob(STAGING_PREFIX + "*")):
        findings.append(Finding(str(leftover), None, "an interrupted report build left this behind (never published)"))
    findings += _verify_daily_reports(reports_dir, key)
    over_by = until or (reported[-1] if reported else datetime.min.replace(tzinfo=timezone.utc))
    for day in complete_days(reports_dir, over_by):
        if not (daily_directory(reports_dir, day) / SUMS).is_file():
            findings.append(Finding(str(daily_directory(reports_dir, day)), None, f"no daily report for {day}"))
    for hour in reported:
        directory = hour_directory(reports_dir, hour)
        report = _verify_version(directory, key, findings)
        _in_its_place(report, "hour", hours.label(hour), directory, findings)
        for version in sorted((directory / SUPERSEDED).glob("*")):
            _in_its_place(_verify_version(version, key, findings), "hour", hours.label(hour), version, findings)
        findings += [Finding(str(directory), None, problem) for problem in _reissue_chain(directory)[1]]
        if report is None:
            continue
        if audit_dir is not None:
            findings += check_binding(report, audit_dir, hours.label(hour))
        previous = report.get("previousReport")
        before = hour - timedelta(hours=1)
        accepted = _digests(hour_directory(reports_dir, before))
        if previous and accepted and previous["sha256sumsDigest"] not in accepted:
            findings.append(Finding(str(directory / "report.json"), None,
                                    f"previousReport digest does not match the report of {hours.label(before)}: "
                                    "it was replaced"))
    return findings


def reports_expected(reports_dir: str | Path, audit_dir: str | Path, until: datetime) -> bool:
    """Whether any report exists, or any closed hour has decisions: then there is something to check."""
    return bool(_report_hours(reports_dir)) or any(hour <= until for hour in _logged_hours(audit_dir))


def fingerprint(key: Ed25519PublicKey) -> str:
    """SHA256:<hex> of the raw public key, for an auditor to compare with the one they hold."""
    from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

    return "SHA256:" + hashlib.sha256(key.public_bytes(Encoding.Raw, PublicFormat.Raw)).hexdigest()


def _verify_version(directory: Path, key: Ed25519PublicKey, findings: list[Finding]) -> dict[str, Any] | None:
    """Checksums and signature of one version of an hour's report; its report.json if they hold."""
    sums_path, sig_path = directory / SUMS, directory / SIGNATURE
    if not sums_path.is_file() or not sig_path.is_file():
        findings.append(Finding(str(directory), None, "SHA256SUMS or its signature is missing"))
        return None
    sums = sums_path.read_bytes()
    if not signature_valid(key, sums, sig_path.read_bytes()):
        findings.append(Finding(str(sig_path), None, "signature does not verify with the report public key"))
    for number, line in enumerate(sums.decode().splitlines(), 1):
        digest, _, name = line.partition("  ")
        target = directory / name
        if not target.is_file():
            findings.append(Finding(str(sums_path), number, f"{name} is missing"))
        elif sha256_file(target) != digest:
            findings.append(Finding(str(target), None,
                                    f"checksum does not match SHA256SUMS line {number}: the file was changed"))
    return _report_of(directory)  # None: already reported as a checksum problem


def _in_its_place(report: dict[str, Any] | None, field: str, place: str, directory: Path,
                  findings: list[Finding]) -> None:
    """A signed report proves what it says, not where it is: one copied or moved into another hour's
    (or day's) directory keeps a valid signature, so its own hour (day) must be the directory's."""
    if report is not None and report.get(field) != place:
        findings.append(Finding(str(directory / "report.json"), None,
                                f"the report of {field} {report.get(field)} sits in the directory of {place}: "
                                "it was copied or moved there"))


def _digests(directory: Path) -> set[str]:
    """The SHA256SUMS digests a link may name: the hour's report, and each version its reissues name."""
    return _reissue_chain(directory)[0]


def _reissue_chain(directory: Path) -> tuple[set[str], list[str]]:
    """Follow ``reissue.supersedes`` from the current version back through ``superseded/``: the
    digests on that chain, and what is wrong with it (a named version missing: a reissue undone; a
    version no reissue names: planted there to be linked to)."""
    if not (directory / SUMS).is_file():
        return set(), []
    accepted, problems = {digest_of(directory)}, []
    unnamed = {digest_of(v): v for v in sorted((directory / SUPERSEDED).glob("*")) if (v / SUMS).is_file()}
    current: Path | None = directory
    while current is not None:
        named = ((_report_of(current) or {}).get("reissue") or {}).get("supersedes")
        if not named:
            break
        current = unnamed.pop(named, None)
        if current is None:
            problems.append(f"its reissue supersedes {named[:12]}..., which is not under superseded/: "
                            "the older version was removed")
        else:
            accepted.add(named)
    problems += [f"{version.relative_to(directory)} is a version no reissue supersedes: it does not count"
                 for version in unnamed.values()]
    return accepted, problems


def _report_of(version: Path) -> dict[str, Any] | None:
    """A version's report.json, or None when it is missing or not a JSON object."""
    try:
        report = orjson.loads((version / "report.json").read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return None
    return report if isinstance(report, dict) else None


def _verify_daily_reports(reports_dir: str | Path, key: Ed25519PublicKey) -> list[Finding]:
    """Each daily report's checksum and signature, and every hourly digest it signed still the hour's
    (or a version that hour superseded)."""
    findings: list[Finding] = []
    for sums_path in sorted(Path(reports_dir).glob(f"*/*/*/{DAILY}/{SUMS}")):
        report = _verify_version(sums_path.parent, key, findings)
        day = sums_path.parent.parent.relative_to(reports_dir).as_posix().replace("/", "-")
        _in_its_place(report, "day", day, sums_path.parent, findings)
        if report is None:
            continue
        for hourly in report.get("hourlyReports", []):
            hour_dir = hour_directory(reports_dir, hours.from_label(hourly["hour"]))
            if hourly["sha256sumsDigest"] not in _digests(hour_dir):
                findings.append(Finding(str(hour_dir), None, f"the report of {hourly['hour']} is not the one the "
                                        f"daily report of {report['day']} signed (replaced or deleted)"))
    return findings


def _within(first: datetime | None, last: datetime | None) -> Any:
    return lambda hour: (first is None or hour >= first) and (last is None or hour <= last)


def _hours_between(first: datetime, last: datetime) -> list[datetime]:
    return [first + timedelta(hours=n) for n in range(int((last - first).total_seconds() // 3600) + 1)]


def _logged_hours(audit_dir: str | Path) -> set[datetime]:
    """The hours that have decision log segments."""
    named = (SEGMENT.match(path.name) for path in Path(audit_dir).glob("decisions-*.jsonl"))
    return {hours.from_tag(match["hour"]) for match in named if match}


_HOUR_PARTS = re.compile(r"^\d{4}/\d{2}/\d{2}/\d{2}$")


def _report_hours(reports_dir: str | Path) -> list[datetime]:
    """Hours with a report, or with what is left of one (SHA256SUMS or report.json)."""
    found = set()
    for name in (SUMS, "report.json"):
        for marker in Path(reports_dir).glob("*/*/*/*/" + name):
            parts = marker.parent.relative_to(reports_dir).as_posix()
            if _HOUR_PARTS.match(parts):
                year, month, day, hour = parts.split("/")
                found.add(datetime(int(year), int(month), int(day), int(hour), tzinfo=timezone.utc))
    return sorted(found)
