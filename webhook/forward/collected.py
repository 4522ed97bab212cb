"""Checking the audit system's copy alone: ``vgate audit verify --forwarded FILE``.

The collector's file (one message a line, as rsyslog writes it with a ``%rawmsg%`` or RFC 5424
template) is all an auditor there may have. Each message names its record's segment and line
number, and its MSG is the record's line, whose sha256 the next record of the same writer links
(``prev``). So from the copy alone: a line number missing between two present is a gap; a record
that does not link the one before it was changed; a segment's first record that does not link the
writer's previous segment's last record there means that segment lost its tail; and a copy of the
same record sent twice (at-least-once delivery) is a duplicate, ignored once it is byte-identical
and a finding when it is not. What no copy can show is the tail of a writer's newest segment: the
report digests the writer forwards bound that.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from ..audit.log import GENESIS, SEGMENT
from ..audit.regular_files import open_regular
from ..audit.verify import MAX_LINE_BYTES, Finding
from ..core import hours
from .message import parse


@dataclass(frozen=True)
class _Copy:
    line: int  # where in the collector's file
    digest: str  # sha256 of the record's line
    prev: str | None  # the digest it links (None: an oversize placeholder, whose record is not there)
    text: bytes | None = None  # an anchor line's bytes (what the report writer signed)
    key_id: str = ""  # the key an anchor line says signs it


@dataclass
class ForwardedCheck:
    """What the collector's copy holds, and every problem found in it."""

    records: int = 0
    segments: int = 0
    duplicates: int = 0
    oversize: int = 0
    other_lines: int = 0
    anchor_lines: int = 0
    findings: list[Finding] = field(default_factory=list)
    # (anchor, line number) -> (line in the file, the line, the key it names): every writer's anchor lines
    anchor: dict[tuple[str, int], tuple[int, bytes, str]] = field(default_factory=dict)


def verify_forwarded(path: Path) -> ForwardedCheck:
    check = ForwardedCheck()
    copies: dict[str, dict[int, _Copy]] = {}
    anchors: dict[str, dict[int, _Copy]] = {}  # by anchor: one collector may hear several report writers
    name = str(path)
    with os.fdopen(open_regular(path), "rb") as handle:
        for number, raw in enumerate(iter(lambda: handle.readline(MAX_LINE_BYTES + 1), b""), start=1):
            message = parse(raw.rstrip(b"\r\n"))
            place = message.place if message else None
            if message is not None and message.msgid == "anchor" and message.params.get("anchor", "").isdigit():
                anchor_id = message.params.get("anchorId", "")
                _keep(anchors.setdefault(anchor_id, {}), int(message.params["anchor"]),
                      _Copy(number, hashlib.sha256(message.msg).hexdigest(), None, message.msg,
                            message.params.get("keyId", "")), check, name, f"anchor {anchor_id} line")
                continue
            if message is None or place is None:
                check.other_lines += 1
                continue
            copy = _copy_of(number, message.msgid, message.params, message.msg)
            if copy is None:
                check.findings.append(Finding(name, number, f"{place[0]} record {place[1]}: its message is not a "
                                                            "decision record vgate sent (not JSON, or no prev)"))
                continue
            check.oversize += message.msgid == "oversize"
            _keep(copies.setdefault(place[0], {}), place[1], copy, check, name, f"{place[0]} record")
    check.segments = len(copies)
    check.records = sum(len(records) for records in copies.values())
    check.anchor_lines = sum(len(lines) for lines in anchors.values())
    check.anchor = {(anchor_id, number): (copy.line, copy.text or b"", copy.key_id)
                    for anchor_id, lines in anchors.items() for number, copy in lines.items()}
    _check_chains(name, copies, check.findings)
    for anchor_id, lines in sorted(anchors.items()):
        _check_anchor(name, anchor_id, lines, copies, check.findings)
    return check


def _keep(held: dict[int, _Copy], number: int, copy: _Copy, check: ForwardedCheck, name: str, what: str) -> None:
    """Keep the first copy of ``number``; count a byte-identical one again as a duplicate, name a different one."""
    earlier = held.get(number)
    if earlier is None:
        held[number] = copy
    elif earlier.digest == copy.digest:
        check.duplicates += 1
    else:
        check.findings.append(Finding(name, copy.line, f"{what} {number} differs from its copy at line "
                                                       f"{earlier.line}: one of them was changed"))


def _copy_of(number: int, msgid: str, params: dict[str, str], msg: bytes) -> _Copy | None:
    if msgid == "oversize":
        digest = params.get("sha256", "")
        return _Copy(number, digest, None) if len(digest) == 64 else None
    try:
        record = orjson.loads(msg)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(record, dict) or not isinstance(record.get("prev"), str):
        return None
    return _Copy(number, hashlib.sha256(msg).hexdigest(), record["prev"])


def _check_chains(name: str, copies: dict[str, dict[int, _Copy]], findings: list[Finding]) -> None:
    """Gaps and broken links within each segment, and each segment's link to its writer's previous one."""
    by_writer: dict[str, list[tuple[str, str]]] = {}
    for segment in copies:
        match = SEGMENT.match(segment)
        if match:
            by_writer.setdefault(match["writer"], []).append((match["hour"], segment))
    for writer_segments in by_writer.values():
        previous_last: _Copy | None = None
        previous_name: str | None = None
        for _, segment in sorted(writer_segments):
            records = copies[segment]
            numbers = sorted(records)
            for gap in _gaps(numbers):
                findings.append(Finding(name, None, f"{segment}: {gap} missing from the collector's copy"))
            for before, after in zip(numbers, numbers[1:], strict=False):
                if after == before + 1 and records[after].prev not in (None, records[before].digest):
                    findings.append(Finding(name, records[after].line, f"{segment} record {after} does not link "
                                                                       f"record {before}: one of them was changed"))
            first = records.get(1)
            if first is not None and first.prev is not None:
                linked = previous_last.digest if previous_last is not None else GENESIS
                if previous_last is not None and first.prev != linked:
                    findings.append(Finding(name, first.line, f"{segment} record 1 does not link the last record the "
                                                              f"copy holds of {previous_name}: its tail is missing"))
                elif previous_last is None and first.prev != GENESIS:
                    findings.append(Finding(name, first.line, f"{segment} record 1 links a record the copy does not "
                                                              "hold: the writer's earlier segments are missing"))
            previous_last, previous_name = records[numbers[-1]], segment


def _gaps(numbers: list[int]) -> list[str]:
    """The missing line numbers between 1 and the last present, as ranges ("record 3 is", "records 5-9 are")."""
    gaps, expected = [], 1
    for number in numbers:
        if number > expected:
            gaps.append(f"record {expected} is" if number == expected + 1 else f"records {expected}-{number - 1} are")
        expected = number + 1
    return gaps


def _check_anchor(name: str, anchor_id: str, anchor: dict[int, _Copy], copies: dict[str, dict[int, _Copy]],
                  findings: list[Finding]) -> None:
    """The forwarded anchor: its lines in turn and linked, and each hour's report against the copy:
    the log lines a report signed that the collector does not hold are named (a lost tail included)."""
    if not anchor:
        return
    numbers = sorted(anchor)
    for gap in _gaps(numbers):
        findings.append(Finding(name, None, f"the report writer's anchor {anchor_id}: {gap.replace('record', 'line')} "
                                            "missing from the collector's copy"))
    previous = GENESIS  # the anchor's first line links 64 zeros, as a new writer's first record does
    signed: dict[str, dict[str, Any]] = {}
    for number in numbers:
        copy = anchor[number]
        entry = orjson.loads(copy.text or b"null")
        if not isinstance(entry, dict):
            findings.append(Finding(name, copy.line, f"anchor {anchor_id} line {number} is not a JSON object"))
            continue
        if number - 1 in anchor or number == 1:
            if entry.get("prev") != previous:
                findings.append(Finding(name, copy.line, f"anchor {anchor_id} line {number} does not link line "
                                                         f"{number - 1}: "
                                                         "one of them was changed"))
        previous = copy.digest
        if entry.get("kind") == "hour" and isinstance(entry.get("hour"), str):
            signed[entry["hour"]] = entry  # the latest version of each hour
    for label, entry in sorted(signed.items()):
        try:
            tag = hours.tag(hours.from_label(label))
        except ValueError:
            findings.append(Finding(name, anchor_line(entry, anchor), f"anchor line names no hour: {label[:40]}"))
            continue
        held = sum(len(copies.get(f"decisions-{writer}-{tag}.jsonl", {})) for writer in entry.get("writers", []))
        lines = int(entry.get("lines", 0) or 0)
        if held < lines:
            findings.append(Finding(name, anchor_line(entry, anchor), f"the report of {label} (version "
                                    f"{entry.get('version', 1)}) signed {lines} lines of the decision log; the "
                                    f"collector's copy holds {held} of them"))


def anchor_line(entry: dict[str, Any], anchor: dict[int, _Copy]) -> int | None:
    copy = anchor.get(int(entry.get("seq", 0) or 0))
    return copy.line if copy else None
