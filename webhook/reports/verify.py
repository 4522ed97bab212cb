"""``vgate audit verify`` for reports: checksums, signature, the link to the previous hour, gaps."""

from __future__ import annotations

import hashlib
import itertools
from datetime import datetime, timedelta, timezone
from pathlib import Path

import orjson

from ..audit.verify import Finding
from ..core import hours
from .build import hour_directory
from .keys import load_public_key, signature_valid
from .sums import SIGNATURE, SUMS, sha256_file


def verify_reports(reports_dir: str | Path, public_key_path: str | Path, first: datetime | None = None,
                   last: datetime | None = None) -> list[Finding]:
    """Checksums, signature and predecessor link of every report in range, and missing hours."""
    findings: list[Finding] = []
    key = load_public_key(public_key_path)
    reported = sorted(_report_hours(reports_dir))
    if first:
        reported = [h for h in reported if h >= first]
    if last:
        reported = [h for h in reported if h <= last]
    for earlier, later in itertools.pairwise(reported):
        gap = earlier + timedelta(hours=1)
        while gap < later:
            findings.append(Finding(str(hour_directory(reports_dir, gap)), None,
                                    f"no report for hour {hours.label(gap)}"))
            gap += timedelta(hours=1)
    for hour in reported:
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
            elif sha256_file(target) != digest:
                findings.append(Finding(str(target), None,
                                        f"checksum does not match SHA256SUMS line {number}: the file was changed"))
        try:
            previous = orjson.loads((directory / "report.json").read_bytes()).get("previousReport")
        except (OSError, orjson.JSONDecodeError):
            continue  # already reported as a checksum problem
        before = hour - timedelta(hours=1)
        before_sums = hour_directory(reports_dir, before) / SUMS
        replaced = before_sums.is_file() and previous and (
            previous["sha256sumsDigest"] != hashlib.sha256(before_sums.read_bytes()).hexdigest())
        if replaced:
            findings.append(Finding(str(directory / "report.json"), None,
                                    f"previousReport digest does not match the report of {hours.label(before)}: "
                                    "it was replaced"))
    return findings


def _report_hours(reports_dir: str | Path) -> list[datetime]:
    """Hours with a report, or with what is left of one (SHA256SUMS or report.json)."""
    found = set()
    for name in (SUMS, "report.json"):
        for marker in Path(reports_dir).glob("*/*/*/*/" + name):
            year, month, day, hour = marker.parent.parts[-4:]
            found.add(datetime(int(year), int(month), int(day), int(hour), tzinfo=timezone.utc))
    return sorted(found)
