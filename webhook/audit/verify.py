"""Verifying the decision log: every record's hash link, per writer, in order, torn lines included.

A chain cannot protect its own last record alone (an insider can drop the tail); the hourly
report's signed digest anchors what a segment held when its hour was reported.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import orjson

from .log import GENESIS, SEGMENT
from .regular_files import NotRegular, open_regular

MAX_LINE_BYTES = 8 << 20  # far above any record vgate writes (they are bounded), far below a planted /dev/zero


@dataclass(frozen=True)
class Finding:
    """One problem found in the decision log: where, and what."""

    file: str
    line: int | None
    problem: str
    torn_at: int | None = None  # a torn last line: its byte offset (what a seal names; never the text)

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
    check = ChainCheck(ranged=first_hour is not None)
    for path in segments(directory, first_hour, last_hour):
        for _ in check.read(path):
            pass
    return check.good, check.findings


class ChainCheck:
    """The hash-chain check, fed by whoever reads the segments, so a reader that also needs the
    records (the report builder) reads each segment once.

    Segments of one writer must be read in hour order; segments of different writers may be read
    interleaved. ``ranged``: the check starts at a chosen hour, so a writer's first segment there
    may link a record before it.
    """

    def __init__(self, *, ranged: bool) -> None:
        self.ranged = ranged
        self.good = 0
        self.findings: list[Finding] = []
        self._last_hash: dict[str, str] = {}

    def read(self, path: Path) -> Iterator[tuple[bytes, Any]]:
        """Stream ``path``'s lines as (raw line, parsed record or None), checking each link on the way."""
        named = SEGMENT.match(path.name)
        assert named is not None  # segments() yields only names SEGMENT matches
        writer = named["writer"]
        first_of_writer = writer not in self._last_hash
        expected = self._last_hash.get(writer, GENESIS)
        number = offset = 0
        segment = self._open(path)
        if segment is None:
            return
        with segment:  # streamed: a segment can be hundreds of MiB
            for raw in iter(lambda: segment.readline(MAX_LINE_BYTES + 1), b""):
                number += 1
                if len(raw) > MAX_LINE_BYTES:
                    self.findings.append(Finding(str(path), number, f"a line over {MAX_LINE_BYTES} bytes: not a "
                                                 "record vgate writes; the rest of the segment is not read"))
                    break
                if not raw.endswith(b"\n"):
                    self.findings.append(Finding(str(path), number, f"torn last record ({len(raw)} bytes, no "
                                                 "newline): a write was cut off (crash or full disk)", offset))
                    yield raw, None
                    break
                offset += len(raw)
                line = raw[:-1]
                try:
                    record = orjson.loads(line)
                except orjson.JSONDecodeError:
                    self.findings.append(Finding(str(path), number, "not a JSON record"))
                    expected = hashlib.sha256(line).hexdigest()
                    yield raw, None
                    continue
                prev = record.get("prev") if isinstance(record, dict) else None
                chain_start = number == 1 and first_of_writer and (prev == GENESIS or self.ranged)
                if prev != expected and not chain_start:
                    what = "first record does not link the previous segment" if number == 1 else "chain broken"
                    self.findings.append(Finding(str(path), number, f"{what}: prev is {prev}, expected {expected}"
                                                 " (a record was changed, removed or inserted before this line)"))
                else:
                    self.good += 1
                expected = hashlib.sha256(line).hexdigest()
                yield raw, record
        if number == 0:
            self.findings.append(Finding(str(path), None, "empty segment"))
        self._last_hash[writer] = expected

    def _open(self, path: Path) -> BinaryIO | None:
        """The segment, if it is a regular file (``regular_files``): anything else planted under a
        segment's name is a finding, neither followed nor read, and the rest of the log is still checked."""
        try:
            return os.fdopen(open_regular(path), "rb")
        except NotRegular as error:
            self.findings.append(Finding(str(path), None, str(error)))
        except FileNotFoundError:
            self.findings.append(Finding(str(path), None, "gone while the log was read"))
        return None
