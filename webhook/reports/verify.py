"""``vgate audit verify`` for reports: checksums, signature, the place and the log each report
signed, the chain back to the one genesis, every closed hour accounted for, and (with the writer's
anchor) every report the writer signed still there as signed."""

from __future__ import annotations

import hashlib
from collections import Counter
from datetime import date, datetime, timezone
from pathlib import Path
from typing import Any

import orjson

from ..audit.log import segment_writers
from ..audit.regular_files import DOCUMENT, NotRegular, read_regular, sha256_regular
from ..audit.verify import Finding, segments
from ..core import hours
from .anchor import Anchor
from .daily import complete_days, daily_days, daily_directory
from .history import hour_directory, hours_between, logged_hours, report_hours, report_of
from .keys import Ed25519PublicKey, load_public_key, signature_valid
from .log_binding import check_binding
from .publication import DISPLACED_PREFIX, STAGING_PREFIX, SUPERSEDED
from .sums import SIGNATURE, SUMS, digest_of, listed


def verify_reports(reports_dir: str | Path, public_key_path: str | Path, first: datetime | None = None,
                   last: datetime | None = None, *, audit_dir: str | Path | None = None,
                   until: datetime | None = None, anchor: Anchor | None = None) -> list[Finding]:
    """Every report in range, and every hour that should have one.

    Checksums and signature of each version (reissued ones included), the hour it names against
    its directory, the decision log each one signed (with ``audit_dir``), its link to the report
    before it (only the genesis, the oldest, links none), every hour without a report from the
    first one to ``until`` (the last closed hour: deleting the newest hours is found too), every
    closed hour with decisions but no report (deleting all reports is found too), and, with the
    writer's ``anchor``, every report it signed that is missing or different.
    """
    findings: list[Finding] = []
    key = load_public_key(public_key_path)
    in_range = _within(first, last)
    every = report_hours(reports_dir)
    for planted in (h for h in every if until is not None and h > until and in_range(h)):
        findings.append(Finding(str(hour_directory(reports_dir, planted)), None,
                                f"a report of hour {hours.label(planted)}, after the last hour checked: no writer "
                                "signs an hour before it closes (planted)"))
    reported = [h for h in every if in_range(h) and (until is None or h <= until)]
    expected = set(hours_between(reported[0], max(until or reported[-1], reported[-1]))) if reported else set()
    if audit_dir is not None:
        expected |= {h for h in logged_hours(audit_dir) if in_range(h) and (until is None or h <= until)}
    for gap in sorted(expected - set(reported)):
        findings.append(Finding(str(hour_directory(reports_dir, gap)), None, f"no report for hour {hours.label(gap)}"))
    for leftover in sorted(Path(reports_dir).glob(STAGING_PREFIX + "*")):
        findings.append(Finding(str(leftover), None, "an interrupted report build left this behind (never published)"))
    for displaced in sorted(Path(reports_dir).glob(DISPLACED_PREFIX + "*")):
        findings.append(Finding(str(displaced), None, "this sat where the writer published a report it had anchored "
                                "(planted in the way): the writer moved it aside"))
    findings += _verify_daily_reports(reports_dir, key)
    if anchor is not None:
        findings += anchor.check(key) + _against_anchor(reports_dir, anchor, in_range, audit_dir, anchor.pruned())
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
            findings += check_binding(report, audit_dir, hours.label(hour), anchor.pruned() if anchor else {})
        findings += _link_problems(report, "previousReport", "hour", directory,
                                   lambda label: hour_directory(reports_dir, hours.from_label(label)),
                                   oldest=hour == every[0])
    return findings


def _link_problems(report: dict[str, Any], link: str, field: str, directory: Path, directory_of: Any, *,
                   oldest: bool) -> list[Finding]:
    """A report's link to the one before it (``previousReport`` of an hour, ``previousDay`` of a
    day): it names an earlier report that is still there as signed; or it names none, and then
    the report is the genesis and the oldest there is. Deleting the oldest hours (or days), or
    putting the first-ever report in another's place, breaks one of these."""
    where = str(directory / "report.json")
    previous = report.get(link)
    if previous is None:
        if report.get("genesis") is True and oldest:
            return []
        why = "and there are older reports (a first report put in a later place?)" if report.get("genesis") is True \
            else "and it is not the genesis: the chain is broken here"
        return [Finding(where, None, f"it links no earlier report {why}")]
    named = str(previous.get(field))
    if not named < str(report.get(field)):
        return [Finding(where, None, f"its {link} names {named}, which is not earlier")]
    target = directory_of(named)
    if not (target / SUMS).is_file():
        return [Finding(where, None, f"its {link} is the report of {named}, which is gone (deleted)")]
    if previous.get("sha256sumsDigest") not in _digests(target):
        return [Finding(where, None, f"{link} digest does not match the report of {named}: it was replaced")]
    return []


def _anchored_counts(entry: dict[str, Any], directory: Path, place: str, audit_dir: str | Path | None,
                     pruned: dict[str, dict[str, Any]]) -> list[Finding]:
    """The records and writers the anchor line of an hour recorded, against its signed report, and
    its writers against the segments on the volume (a writer's segments may only go by a prune)."""
    findings, report = [], report_of(directory) or {}
    signed = (report.get("totals") or {}).get("decisions")
    if "records" in entry and entry["records"] != signed:
        findings.append(Finding(str(directory), None, f"the anchor records {entry['records']} decisions in the report "
                                f"of {place} and the report signs {signed}: what was signed is not what was computed"))
    writers = sorted(segment_writers(str(s.get("file")) for s in report.get("segments") or [] if isinstance(s, dict)))
    if "writers" in entry and entry["writers"] != writers:
        findings.append(Finding(str(directory), None, f"the anchor records the writers {entry['writers']} in the "
                                f"report of {place} and the report signs {writers}"))
    if audit_dir is not None:
        tag = hours.tag(hours.from_label(place))
        on_disk = segment_writers(p.name for p in segments(audit_dir, tag, tag))
        pruned_here = segment_writers(name for name in pruned if name.endswith(f"-{tag}.jsonl"))
        gone = [w for w in entry.get("writers") or [] if w not in on_disk | pruned_here]
        findings += [Finding(str(Path(audit_dir)), None, f"the anchor records records of writer {w} in {place}, and "
                             "the volume holds no segment of it (deleted, not pruned)") for w in gone]
    return findings


def _version_with(directory: Path, digest: str) -> Path:
    """The version of an hour's report (current, or under superseded/) whose SHA256SUMS has ``digest``."""
    return next((v for v in [directory, *sorted((directory / SUPERSEDED).glob("*"))] if _held_digest(v) == digest),
                directory)


def _against_anchor(reports_dir: str | Path, anchor: Anchor, in_range: Any, audit_dir: str | Path | None = None,
                    pruned: dict[str, dict[str, Any]] | None = None) -> list[Finding]:
    """Every hour and day the anchor records as signed, still on the volume as signed; and every
    report on the volume since the anchor began, recorded in it."""
    findings = []
    for kind, directory_of in (("hour", lambda p: hour_directory(reports_dir, hours.from_label(p))),
                               ("day", lambda p: daily_directory(reports_dir, date.fromisoformat(p)))):
        anchored = anchor.reports(kind)
        for place, versions in sorted(anchored.items()):
            if kind == "hour" and not in_range(hours.from_label(place)):
                continue
            directory = directory_of(place)
            latest = versions[-1]
            current = _held_digest(directory)
            if current is None:
                findings.append(Finding(str(directory), None, f"the anchor records the report of {place} (version "
                                        f"{latest.version}, {latest.digest[:12]}...) and it is gone (deleted, or "
                                        "the volume rolled back)"))
                continue
            held = _digests(directory)
            if current == latest.digest and kind == "hour":
                findings += _anchored_counts(latest.entry, directory, place, audit_dir, pruned or {})
            if current != latest.digest:
                findings.append(Finding(str(directory), None, f"the report of {place} is not the one the anchor "
                                        f"records (version {latest.version}, {latest.digest[:12]}...): replaced, "
                                        "or a reissue undone"))
            findings += [Finding(str(directory), None, f"version {v.version} of {place} that the anchor records "
                                 "is no longer in its reissue chain") for v in versions[:-1] if v.digest not in held]
        first = min(anchored, default=None)
        on_disk = [hours.label(h) for h in report_hours(reports_dir) if in_range(h)] if kind == "hour" \
            else [d.isoformat() for d in daily_days(reports_dir)]
        findings += [Finding(str(directory_of(place)), None, f"the report of {place} is not in the anchor: the "
                             "writer did not sign it") for place in on_disk
                     if first is not None and place > first and place not in anchored]
    return findings


def reports_expected(reports_dir: str | Path, audit_dir: str | Path, until: datetime) -> bool:
    """Whether any report exists, or any closed hour has decisions: then there is something to check."""
    return bool(report_hours(reports_dir)) or any(hour <= until for hour in logged_hours(audit_dir))


def fingerprint(key: Ed25519PublicKey) -> str:
    """SHA256:<hex> of the raw public key, for an auditor to compare with the one they hold."""
    from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

    return "SHA256:" + hashlib.sha256(key.public_bytes(Encoding.Raw, PublicFormat.Raw)).hexdigest()


def _verify_version(directory: Path, key: Ed25519PublicKey, findings: list[Finding]) -> dict[str, Any] | None:
    """Checksums and signature of one version of a report; its report.json, parsed from the very bytes
    whose checksum was checked. Anything planted under a listed name is a finding, never followed."""
    sums_path, sig_path = directory / SUMS, directory / SIGNATURE
    try:
        sums, signature = read_regular(sums_path), read_regular(sig_path)
    except FileNotFoundError:
        findings.append(Finding(str(directory), None, "SHA256SUMS or its signature is missing"))
        return None
    except NotRegular as error:
        findings.append(Finding(str(directory), None, f"SHA256SUMS or its signature is {error}"))
        return None
    if not signature_valid(key, sums, signature):
        findings.append(Finding(str(sig_path), None, "signature does not verify with the report public key"))
    report = None
    for number, (digest, name) in enumerate(listed(sums), 1):
        target = directory / name
        try:
            data = read_regular(target, DOCUMENT) if name == "report.json" else None
            held = hashlib.sha256(data).hexdigest() if data is not None else sha256_regular(target)
        except FileNotFoundError:
            findings.append(Finding(str(sums_path), number, f"{name} is missing"))
            continue
        except NotRegular as error:
            findings.append(Finding(str(target), None, str(error)))
            continue
        if held != digest:
            findings.append(Finding(str(target), None,
                                    f"checksum does not match SHA256SUMS line {number}: the file was changed"))
        if data is not None:
            report = _parsed(data)
    return report


def _parsed(data: bytes) -> dict[str, Any] | None:
    try:
        parsed = orjson.loads(data)
    except orjson.JSONDecodeError:
        return None
    return parsed if isinstance(parsed, dict) else None


def _held_digest(directory: Path) -> str | None:
    """The digest of the SHA256SUMS a directory holds, or None (none there, or not a regular file)."""
    try:
        return digest_of(directory)
    except OSError:
        return None


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
    current_digest = _held_digest(directory)
    if current_digest is None:
        return set(), []
    accepted, problems = {current_digest}, []
    versions = ((_held_digest(v), v) for v in sorted((directory / SUPERSEDED).glob("*")))
    unnamed = {digest: v for digest, v in versions if digest is not None}
    current: Path | None = directory
    while current is not None:
        named = ((report_of(current) or {}).get("reissue") or {}).get("supersedes")
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


def _verify_daily_reports(reports_dir: str | Path, key: Ed25519PublicKey) -> list[Finding]:
    """Each daily report's checksum and signature, its day against its directory, its link to the
    daily report before it, and every hourly digest it signed still the hour's (or a version that
    hour superseded)."""
    findings: list[Finding] = []
    days = daily_days(reports_dir)
    for day in days:
        directory = daily_directory(reports_dir, day)
        report = _verify_version(directory, key, findings)
        _in_its_place(report, "day", day.isoformat(), directory, findings)
        if report is None:
            continue
        findings += _link_problems(report, "previousDay", "day", directory,
                                   lambda text: daily_directory(reports_dir, date.fromisoformat(text)),
                                   oldest=day == days[0])
        summed: Counter[str] = Counter()
        for hourly in report.get("hourlyReports", []):
            hour_dir = hour_directory(reports_dir, hours.from_label(hourly["hour"]))
            if hourly["sha256sumsDigest"] not in _digests(hour_dir):
                findings.append(Finding(str(hour_dir), None, f"the report of {hourly['hour']} is not the one the "
                                        f"daily report of {report['day']} signed (replaced or deleted)"))
                summed = Counter({"unknown": 1})
            elif "unknown" not in summed:
                hour_report = report_of(_version_with(hour_dir, hourly["sha256sumsDigest"])) or {}
                summed.update({"decisions": (hour_report.get("totals") or {}).get("decisions", 0),
                               "denials": hour_report.get("denialCount", 0)})
        totals = report.get("totals") or {}
        for what in () if "unknown" in summed else ("decisions", "denials"):
            if totals.get(what, 0) != summed[what]:
                findings.append(Finding(str(directory / "report.json"), None, f"the daily report of {report['day']} "
                                        f"sums {totals.get(what, 0)} {what} and the hourly reports it signed hold "
                                        f"{summed[what]}: the day was not summed from its signed hours"))
    return findings


def _within(first: datetime | None, last: datetime | None) -> Any:
    return lambda hour: (first is None or hour >= first) and (last is None or hour <= last)
