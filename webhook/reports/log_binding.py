"""What a signed report commits to of the decision log, and the check that the log still says it.

The per-record hash chain finds a record changed, removed or inserted before the last one, but
not a tail cut off, a whole segment deleted or added, or records appended later: a chain cannot
protect its own end. So each hour's report records, for every writer's segment of that hour, its
file name, record count, byte length and the sha256 of its first and last record (the chain
head), and signs them with the rest. ``check_binding`` recomputes them from the files on disk.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..audit.regular_files import open_regular
from ..audit.verify import MAX_LINE_BYTES, Finding, segments
from ..core import hours


@dataclass
class SegmentDigest:
    """Counts and edge hashes of one segment, fed line by line (only two lines are hashed)."""

    file: str
    mark: int = 0  # also keep the hash of this record (the last one a report signed), when checking
    records: int = 0
    size: int = 0
    first: str | None = None
    at_mark: str | None = None
    torn: bool = False
    torn_at: int | None = None  # the torn line's byte offset
    _last_line: bytes = field(default=b"", repr=False)

    def add(self, raw: bytes) -> None:
        self.size += len(raw)
        if not raw.endswith(b"\n"):
            self.torn, self.torn_at = True, self.size - len(raw)  # counted in bytes; the chain check reports it
            return
        self.records += 1
        if self.records == 1:
            self.first = hashlib.sha256(raw[:-1]).hexdigest()
        if self.records == self.mark:
            self.at_mark = hashlib.sha256(raw[:-1]).hexdigest()
        self._last_line = raw[:-1]

    @property
    def last(self) -> str | None:
        return hashlib.sha256(self._last_line).hexdigest() if self.records else None

    def as_json(self) -> dict[str, Any]:
        return {"file": self.file, "records": self.records, "bytes": self.size, "first": self.first,
                "last": self.last}


def check_binding(report: dict[str, Any], audit_dir: str | Path, hour_label: str,
                  pruned: dict[str, dict[str, Any]] | None = None) -> list[Finding]:
    """Every way the segments of ``hour_label`` differ from what its signed ``report`` lists.

    A listed segment that is gone is a finding unless ``pruned`` (the anchor's record of retention
    prunes) has it, with the records and bytes the report signed."""
    tag = hours.tag(hours.from_label(hour_label))
    listed = {entry["file"]: entry for entry in report.get("segments") or [] if isinstance(entry, dict)}
    findings = []
    on_disk = {path.name: path for path in segments(audit_dir, tag, tag)}
    for name in sorted(set(on_disk) - set(listed)):
        findings.append(Finding(str(on_disk[name]), None, f"a segment of {hour_label} that its signed report "
                                "does not list (added after signing)"))
    for name, entry in sorted(listed.items()):
        path = Path(audit_dir) / name
        present = os.path.lexists(path)
        if not present and name in (pruned or {}):
            findings += _prune_mismatch(path, entry, (pruned or {})[name], hour_label)
            continue
        if not present:
            findings.append(Finding(str(path), None, f"the report of {hour_label} lists this segment with "
                                    f"{entry['records']} records, and it is gone (deleted)"))
            continue
        findings += _compare(path, entry, hour_label)
    return findings


def _prune_mismatch(path: Path, signed: dict[str, Any], prune: dict[str, Any], hour_label: str) -> list[Finding]:
    """A pruned segment is accounted for only if the prune removed what the report signed."""
    if (prune.get("records"), prune.get("bytes")) == (signed["records"], signed["bytes"]):
        return []
    return [Finding(str(path), None, f"the anchor's prune of this segment records {prune.get('records')} records "
                    f"in {prune.get('bytes')} bytes where the report of {hour_label} signed {signed['records']} "
                    f"in {signed['bytes']}: the pruned range does not match")]


def _compare(path: Path, signed: dict[str, Any], hour_label: str) -> list[Finding]:
    """The segment as it is, against what the report signed: truncated, appended, edited."""
    count = signed["records"]
    now = SegmentDigest(path.name, mark=count)
    try:
        segment = os.fdopen(open_regular(path), "rb")
    except OSError as error:
        return [Finding(str(path), None, f"the report of {hour_label} lists this segment, and it is {error}")]
    with segment:
        for raw in iter(lambda: segment.readline(MAX_LINE_BYTES + 1), b""):
            now.add(raw)
    where = f"the report of {hour_label} signed {count} records"
    if now.records < count:
        return [Finding(str(path), now.records + 1, f"the segment ends after {now.records} records where {where}: "
                        "records were removed from its end (truncated)")]
    findings = []
    if count and now.first != signed["first"]:
        findings.append(Finding(str(path), 1, f"the first record is not the one {where} began with "
                                "(edited or replaced)"))
    if count and now.at_mark != signed["last"]:
        findings.append(Finding(str(path), count, f"record {count} is not the last record {where} ended with "
                                "(edited, reordered or replaced)"))
    if now.records > count:
        findings.append(Finding(str(path), count + 1, f"{now.records - count} records appended after {where}"))
    elif now.torn and not findings:
        findings.append(Finding(str(path), count + 1, f"a torn line after the {count} records the report signed",
                                now.torn_at))
    elif not findings and now.size != signed["bytes"]:
        findings.append(Finding(str(path), None, f"{now.size} bytes where {where} in {signed['bytes']} bytes: "
                                "a record was edited"))
    return findings
