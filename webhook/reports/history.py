"""Where a report sits in the chain: the hours reported so far, and what a new one links.

Every report but the first links the newest signed report before it (the previous hour's, or,
across an outage, the last one there is), so the chain has exactly one start: the genesis, the
oldest report, which says it is one. When the writer keeps an anchor, the newest report it
anchored counts even if the volume no longer holds it: a report written after an insider deleted
hours links what was really signed, not what was left.
"""

from __future__ import annotations

import re
from datetime import date, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import orjson

from ..audit.log import SEGMENT
from ..audit.regular_files import DOCUMENT, is_regular, read_regular
from ..core import hours
from .anchor import Anchor
from .sums import SUMS, digest_of

_HOUR_PARTS = re.compile(r"^\d{4}/\d{2}/\d{2}/\d{2}$")
DAILY = "daily"


def hour_directory(reports_dir: str | Path, hour: datetime) -> Path:
    return Path(reports_dir) / hours.path(hour)


def daily_directory(reports_dir: str | Path, day: date) -> Path:
    return Path(reports_dir) / f"{day:%Y/%m/%d}" / DAILY


def place_directory(reports_dir: str | Path, kind: str, place: str) -> Path:
    """Where the report of an anchored place is published: an hour's label, or a day (kind "day")."""
    if kind == "hour":
        return hour_directory(reports_dir, hours.from_label(place))
    return daily_directory(reports_dir, date.fromisoformat(place))


def report_hours(reports_dir: str | Path) -> list[datetime]:
    """Hours with a report, or with what is left of one (SHA256SUMS or report.json), oldest first."""
    found = set()
    for name in (SUMS, "report.json"):
        for marker in Path(reports_dir).glob("*/*/*/*/" + name):
            parts = marker.parent.relative_to(reports_dir).as_posix()
            if _HOUR_PARTS.match(parts):
                year, month, day, hour = parts.split("/")
                found.add(datetime(int(year), int(month), int(day), int(hour), tzinfo=timezone.utc))
    return sorted(found)


def signed_hours(reports_dir: str | Path) -> list[datetime]:
    """Hours whose report is published (has SHA256SUMS), oldest first."""
    return [hour for hour in report_hours(reports_dir) if is_regular(hour_directory(reports_dir, hour) / SUMS)]


def predecessor(reports_dir: str | Path, hour: datetime, anchor: Anchor | None) -> dict[str, Any] | None:
    """What the report of ``hour`` links: the newest signed report before it; None: genesis."""
    published = {hours.label(h): hour_directory(reports_dir, h) for h in signed_hours(reports_dir)}
    return newest_link("hour", hours.label(hour), published, anchor)


def newest_link(kind: str, place: str, published: dict[str, Path], anchor: Anchor | None) -> dict[str, Any] | None:
    """The link a new report of ``place`` (an hour label, or a day) carries: the newest report of
    ``kind`` before it, on the volume (``published``: place -> directory) or in the anchor, the
    later of the two (the anchor's when they name the same place); None when there is none."""
    on_disk = max((name for name in published if name < place), default=None)
    anchored = anchor.latest_before(kind, place) if anchor else None
    if anchored and (on_disk is None or anchored.place >= on_disk):
        return {kind: anchored.place, "sha256sumsDigest": anchored.digest}
    if on_disk is not None:
        return {kind: on_disk, "sha256sumsDigest": digest_of(published[on_disk])}
    return None


def report_of(version: Path) -> dict[str, Any] | None:
    """A version's report.json, or None when it is missing or not a JSON object."""
    try:
        report = orjson.loads(read_regular(version / "report.json", DOCUMENT))
    except (OSError, orjson.JSONDecodeError):
        return None
    return report if isinstance(report, dict) else None


def genesis_hour(reports_dir: str | Path, anchor: Anchor | None) -> datetime | None:
    """The first hour reported: the oldest on the volume or in the anchor."""
    candidates = [h for h in (*signed_hours(reports_dir)[:1], anchor.first_hour() if anchor else None) if h]
    return min(candidates, default=None)


def logged_hours(audit_dir: str | Path) -> set[datetime]:
    """The hours that have decision log segments."""
    directory = Path(audit_dir)
    named = (SEGMENT.match(path.name) for path in directory.glob("decisions-*.jsonl")) if directory.is_dir() else ()
    return {hours.from_tag(match["hour"]) for match in named if match}


def hours_between(first: datetime, last: datetime) -> list[datetime]:
    """Every hour from ``first`` to ``last``, both included."""
    return [first + timedelta(hours=n) for n in range(int((last - first).total_seconds() // 3600) + 1)]
