"""Verifying the decision log: every record's hash link, per writer, in order, torn lines included.

A chain cannot protect its own last record alone (an insider can drop the tail); the hourly
report's signed digest anchors what a segment held when its hour was reported.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import orjson

from .log import GENESIS, SEGMENT


@dataclass(frozen=True)
class Finding:
    """One problem found in the decision log: where, and what."""

    file: str
    line: int | None
    problem: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.problem}" if self.line else f"{self.file}: {self.problem}"


def segments(directory: str | Path, first_hour: str | None = None, last_hour: str | None = None) -> Iterator[Path]:
    """Segment files in ``directory``, ordered by writer then hour, within the hours given."""
    found = []
    for path in Path(directory).glob("decisions-*.jsonl"):
        match = SEGMENT.match(path.name)
        in_range = match and (first_hour is None or match["hour"] >= first_hour) and (
            last_hour is None or match["hour"] <= last_hour)
        if match and in_range:
            found.append((match["writer"], match["hour"], path))
    yield from (path for _, _, path in sorted(found))


def verify_segments(directory: str | Path, first_hour: str | None = None,
                    last_hour: str | None = None) -> tuple[int, list[Finding]]:
    """Check every record's chain link; return how many records were good and every finding."""
    findings: list[Finding] = []
    good = 0
    last_hash: dict[str, str] = {}
    for path in segments(directory, first_hour, last_hour):
        named = SEGMENT.match(path.name)
        assert named is not None  # segments() yields only names SEGMENT matches
        writer = named["writer"]
        expected = last_hash.get(writer, GENESIS)
        number = 0
        with open(path, "rb") as segment:  # streamed: a segment can be hundreds of MiB
            for raw in segment:
                number += 1
                if not raw.endswith(b"\n"):
                    findings.append(Finding(str(path), number, f"torn last record ({len(raw)} bytes, no newline): "
                                            "a write was cut off (crash or full disk)"))
                    break
                line = raw[:-1]
                try:
                    record = orjson.loads(line)
                except orjson.JSONDecodeError:
                    findings.append(Finding(str(path), number, "not a JSON record"))
                    expected = hashlib.sha256(line).hexdigest()
                    continue
                prev = record.get("prev") if isinstance(record, dict) else None
                chain_start = number == 1 and writer not in last_hash and (prev == GENESIS or first_hour is not None)
                if prev != expected and not chain_start:
                    what = "first record does not link the previous segment" if number == 1 else "chain broken"
                    findings.append(Finding(str(path), number, f"{what}: prev is {prev}, expected {expected}"
                                            " (a record was changed, removed or inserted before this line)"))
                else:
                    good += 1
                expected = hashlib.sha256(line).hexdigest()
        if number == 0:
            findings.append(Finding(str(path), None, "empty segment"))
        last_hash[writer] = expected
    return good, findings
