"""The report writer's own record of what it signed: the anchor.

Signatures prove a report came from the key; they cannot prove a report is still there. Someone
who can write the reports volume (but holds no key) can delete the newest hours, or roll the whole
volume back, and every signature left still verifies; the writer itself would then sign the erased
hours again as hours without traffic. The anchor is an append-only file, kept where only the
report writer can write (its own volume, never the reports volume): before a report is published
the writer appends the hour or day it signs, its SHA256SUMS digest, its record count and its
writers, and before segments are pruned, what it prunes. Each line is signed with the report key
and links the previous line's hash, so a line cannot be forged or edited without the key.

``vgate report`` reads it so as never to sign again an hour it signed (the hour is gone); ``vgate
audit verify --anchor`` compares it with the reports and the log. What the anchor cannot see is its
own tail being cut: that is why it must live out of the insider's reach.
"""

from __future__ import annotations

import base64
import errno
import fcntl
import hashlib
import os
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import orjson
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from ..audit.durable import fsync_path
from ..audit.log import append_whole
from ..audit.regular_files import DOCUMENT, NotRegular, read_regular
from ..audit.verify import Finding
from ..core import hours
from ..core.config import Config
from ..core.errors import NotReportable
from .anchor_place import anchor_path
from .keys import sign, signature_valid
from .sums import digest_of

START = "0" * 64  # what the first line links


@dataclass(frozen=True)
class Anchored:
    """One report the anchor records: which hour (or day), which version, its digest."""

    place: str  # an hour label, or a day (YYYY-MM-DD)
    version: int
    digest: str
    entry: dict[str, Any]


class Anchor:
    """The anchor file: read whole (it grows by a few hundred bytes an hour), appended line by line."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    def _lines(self) -> list[bytes]:
        """The anchor's lines (NotRegular if something else sits at its path; none if it is missing)."""
        try:
            return read_regular(self.path, DOCUMENT).splitlines()
        except FileNotFoundError:
            return []

    def entries(self) -> list[dict[str, Any]]:
        """Every line that parses as an object, in order (``check`` says what is wrong with the rest)."""
        try:
            lines = self._lines()
        except NotRegular:
            return []
        parsed = []
        for line in lines:
            try:
                entry = orjson.loads(line)
            except orjson.JSONDecodeError:
                continue
            if isinstance(entry, dict):
                parsed.append(entry)
        return parsed

    def append(self, entry: dict[str, Any], key: Ed25519PrivateKey, at: datetime) -> None:
        """Add one signed line, linked to the last one, stamped ``at``, and make it durable before returning.

        The file is locked (``flock``) from the read of its last line to the append, so two writers
        (one whose lock was stolen, say) never give two lines the same number."""
        self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        created = not self.path.exists()
        fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            lines = _read_all(fd).splitlines()
            body = {**entry, "seq": len(lines) + 1, "prev": _hash(lines[-1]) if lines else START,
                    "at": at.isoformat(timespec="seconds")}
            signed = {**body, "sig": base64.b64encode(sign(key, _canonical(body))).decode()}
            append_whole(fd, orjson.dumps(signed, option=orjson.OPT_SORT_KEYS) + b"\n")
        finally:
            os.close(fd)
        if created:
            fsync_path(self.path.parent)

    def check(self, key: Ed25519PublicKey) -> list[Finding]:
        """Every line signed by ``key``, numbered in turn and linked to the one before it."""
        if not os.path.lexists(self.path):
            return [Finding(str(self.path), None, "the anchor file is missing: what the writer signed cannot be "
                            "compared with what the volume holds")]
        try:
            lines = self._lines()
        except NotRegular as error:
            return [Finding(str(self.path), None, f"the anchor is {error}")]
        findings, previous = [], START
        for number, line in enumerate(lines, 1):
            problem = _line_problem(line, number, previous, key)
            if problem:
                findings.append(Finding(str(self.path), number, problem))
            previous = _hash(line)
        return findings

    def reports(self, kind: str) -> dict[str, list[Anchored]]:
        """Each hour's (kind "hour") or day's (kind "day") anchored versions, oldest first (less any
        a writer before this one withdrew: it no longer does, ``publication.complete_anchored`` publishes them)."""
        found: dict[str, list[Anchored]] = {}
        entries = self.entries()
        withdrawn = {entry.get("sha256sumsDigest") for entry in entries if entry.get("kind") == "withdrawn"}
        for entry in entries:
            if entry.get("kind") == kind and entry.get("sha256sumsDigest") not in withdrawn:
                place = str(entry.get(kind))
                found.setdefault(place, []).append(
                    Anchored(place, int(entry.get("version", 1)), str(entry.get("sha256sumsDigest")), entry))
        return found

    def latest_before(self, kind: str, place: str) -> Anchored | None:
        """The newest anchored report of an hour (day) before ``place``: what the next one links."""
        earlier = [versions[-1] for name, versions in self.reports(kind).items() if name < place]
        return max(earlier, key=lambda anchored: anchored.place, default=None)

    def refuse_gone(self, kind: str, place: str, directory: Path) -> None:
        """If this hour (day) was signed and the volume no longer holds the version signed last, it is
        gone, and signing it again would hide that: NotReportable."""
        versions = self.reports(kind).get(place)
        if not versions:
            return
        latest = versions[-1]
        try:
            held: str | None = digest_of(directory)
        except OSError:
            held = None
        if held != latest.digest:
            what = "holds a different one" if held else "no longer holds it"
            raise NotReportable(f"the anchor {self.path} records the report of {place} as signed (version "
                                f"{latest.version}, {latest.digest[:12]}...) and the reports volume {what}: the "
                                "report is gone, and is not signed again (see vgate audit verify --anchor)",
                                usage=False)

    def first_hour(self) -> datetime | None:
        anchored = self.reports("hour")
        return hours.from_label(min(anchored)) if anchored else None

    def pruned(self) -> dict[str, dict[str, Any]]:
        """Every segment a retention prune removed: its name -> what the prune recorded of it."""
        return {segment["file"]: segment for entry in self.entries() if entry.get("kind") == "prune"
                for segment in entry.get("segments", []) if isinstance(segment, dict) and "file" in segment}


def _line_problem(line: bytes, number: int, previous: str, key: Ed25519PublicKey) -> str | None:
    problem = signature_problem(line, key)
    if problem:
        return problem
    entry = orjson.loads(line)
    if entry.get("seq") != number or entry.get("prev") != previous:
        return "it does not follow the line before it: lines were removed, reordered or inserted"
    return None


def signature_problem(line: bytes, key: Ed25519PublicKey) -> str | None:
    """Why an anchor line is not one the writer signed with ``key`` (wherever the line was read: the
    anchor itself, or the audit system's copy), or None."""
    try:
        entry = orjson.loads(line)
    except orjson.JSONDecodeError:
        return "not a JSON line: the anchor was edited"
    if not isinstance(entry, dict):
        return "not a JSON object: the anchor was edited"
    signature = entry.pop("sig", "")
    try:
        valid = signature_valid(key, _canonical(entry), base64.b64decode(str(signature), validate=True))
    except ValueError:
        valid = False
    if not valid:
        return "its signature does not verify with the report public key: the line was forged or edited"
    return None


def _read_all(fd: int) -> bytes:
    """The whole file behind ``fd``, from its start (bounded: an anchor is a few MiB a year)."""
    chunks, offset = [], 0
    while chunk := os.pread(fd, 1 << 20, offset):
        chunks.append(chunk)
        offset += len(chunk)
        if offset > DOCUMENT:
            raise NotRegular(errno.EFBIG, f"{offset} bytes or more: not an anchor vgate writes")
    return b"".join(chunks)


def _canonical(entry: dict[str, Any]) -> bytes:
    return orjson.dumps(entry, option=orjson.OPT_SORT_KEYS)


def _hash(line: bytes) -> str:
    return hashlib.sha256(line).hexdigest()


def anchor_of(config: Config) -> Anchor | None:
    """The anchor the config names (``reports.anchorFile``), or None when it names none.

    ConfigError when it is kept where whoever writes the evidence can write it (anchor_place).
    """
    path = anchor_path(config)
    return Anchor(path) if path else None
