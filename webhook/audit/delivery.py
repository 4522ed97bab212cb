"""What the audit system has of the decision log: the forwarder's durable cursor.

The decision log is the forwarder's outbox: nothing is copied aside, and the cursor says, per
segment, how many bytes and records the collector has acknowledged (RELP) or accepted and kept
for a while (syslog over TLS: ``forward.transport``). It lives in the audit directory
(``.forward/cursor.json``, written new and renamed, then the directory synced), so a restart, a
new pod or another replica carries on where delivery stopped; it names the collector it counts
for, and a different URL starts from the beginning of the log (at least once, never less).

Retention never prunes a segment the cursor does not cover whole (``Cursor.behind``): with
forwarding on, a record leaves the volume only once the audit system has it.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import orjson

from .durable import replace_durably
from .regular_files import read_regular

FORWARD_DIR = ".forward"
CURSOR = "cursor.json"


@dataclass(frozen=True)
class Delivered:
    """How much of one segment the collector has: its first ``offset`` bytes, ``records`` lines."""

    offset: int = 0
    records: int = 0


class Cursor:
    """The per-segment delivery positions for one collector URL."""

    def __init__(self, audit_dir: Path, url: str, segments: dict[str, Delivered] | None = None) -> None:
        self.audit_dir = audit_dir
        self.url = url
        self.segments = segments or {}

    @property
    def path(self) -> Path:
        return self.audit_dir / FORWARD_DIR / CURSOR

    @classmethod
    def load(cls, audit_dir: Path, url: str) -> Cursor:
        """The saved cursor for ``url``; an empty one if there is none, it is unreadable, or it counts
        for another collector (delivery then starts again from the start: duplicates, never a gap)."""
        try:
            saved = orjson.loads(read_regular(audit_dir / FORWARD_DIR / CURSOR))
        except (OSError, orjson.JSONDecodeError):
            return cls(audit_dir, url)
        if not isinstance(saved, dict) or saved.get("url") != url or not isinstance(saved.get("segments"), dict):
            return cls(audit_dir, url)
        segments = {name: Delivered(int(at.get("offset", 0)), int(at.get("records", 0)))
                    for name, at in saved["segments"].items() if isinstance(at, dict)}
        return cls(audit_dir, url, segments)

    def get(self, segment: str) -> Delivered:
        return self.segments.get(segment, Delivered())

    def behind(self, segment: Path) -> bool:
        """Whether ``segment`` holds bytes the collector does not have yet (none if it is gone)."""
        try:
            return self.get(segment.name).offset < os.lstat(segment).st_size
        except FileNotFoundError:
            return False

    def save(self, present: Iterable[str]) -> None:
        """Write the cursor durably, keeping only the segments still ``present`` on the volume."""
        keep = set(present)
        self.segments = {name: at for name, at in self.segments.items() if name in keep}
        self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        replace_durably(self.path, orjson.dumps({"url": self.url, "segments": {
            name: {"offset": at.offset, "records": at.records} for name, at in sorted(self.segments.items())}}))


def fully_delivered(audit_dir: Path, url: str) -> bool:
    """Whether the collector at ``url`` has every segment of the log whole (tests and the bench wait on it)."""
    cursor = Cursor.load(audit_dir, url)
    return not any(cursor.behind(path) for path in audit_dir.glob("decisions-*.jsonl"))
