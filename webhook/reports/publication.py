"""Publishing a signed report, and completing one a crash interrupted: never an hour forgotten.

A report is built in a staging directory on the reports volume (``.building-<place>-…``), signed
from the bytes the writer computed (``staged``), recorded in the anchor, then renamed into place.
Nothing here withdraws an anchored report: if publication fails or the writer dies after the anchor
line (a planted directory in the way, a SIGKILL, a full disk), the staging directory stays, and
the next writer, under the lock, finds it by the digest the anchor recorded, checks its signature
and checksums, and publishes it (``complete_anchored``). Whatever sits in a report's place is
moved aside (``.displaced-…``, kept for the auditor, a finding of ``vgate audit verify``), never
deleted and never published. Staging the anchor does not name was never claimed: it is removed.
"""

from __future__ import annotations

import logging
import os
import shutil
import stat
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from ..audit.durable import fsync_path
from ..audit.regular_files import read_regular, sha256_regular
from .anchor import Anchor
from .history import place_directory
from .keys import signature_valid
from .staged import Staged
from .steps import reached
from .sums import SIGNATURE, SUMS, digest_of, listed, sign_files
from .writer_lock import WriterLock

log = logging.getLogger("vgate")
STAGING_PREFIX = ".building-"  # a report being written, or what a crash left of one
DISPLACED_PREFIX = ".displaced-"  # what sat where a report was published, moved aside
SUPERSEDED = "superseded"
REPORT_DIR_MODE = 0o750
Document = dict[str, Any]


def new_staging(reports_dir: Path, label: str) -> Path:
    """A fresh directory on the reports volume to build a report in (mode 0750)."""
    staging = reports_dir / f"{STAGING_PREFIX}{label}-{os.getpid()}-{os.urandom(4).hex()}"
    staging.mkdir(parents=True, mode=REPORT_DIR_MODE)
    os.chmod(staging, REPORT_DIR_MODE, follow_symlinks=False)  # whatever the umask
    return staging


def sign_and_publish(reports_dir: Path, label: str, out: Path, write: Callable[[Staged], tuple[Document, list[str]]],
                     key: Ed25519PrivateKey, anchor: Anchor | None, anchor_entry: Callable[[Document, str], Document],
                     now: datetime, *, supersedes: int | None = None, lock: WriterLock | None = None) -> Document:
    """The whole sequence (``steps``): ``write`` stages the report's files and returns its document and
    the names to sign; they are signed from the bytes written, the anchor records ``anchor_entry``, and
    the report is published. A failure before the anchor line leaves nothing; after it, the staging
    stays for the next writer to complete. Returns the document."""
    staging = new_staging(reports_dir, label)
    try:
        staged = Staged(staging)
        document, names = write(staged)
        reached("staged")
        digest = sign_files(staged, names, key)
        staged.sync()
        reached("signed")
        if lock is not None:
            lock.check()
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)  # nothing was claimed yet: leave nothing behind
        raise
    if anchor is not None:
        anchor.append(anchor_entry(document, digest), key, now)
        reached("anchored")
    publish(staging, out, supersedes=supersedes, lock=lock)
    return document


def publish(staging: Path, out: Path, *, supersedes: int | None = None, lock: WriterLock | None = None) -> None:
    """Make the staged report the place's, in one rename. With ``supersedes`` (the version being
    replaced) the version there first moves, unchanged, to ``superseded/<version>/`` inside the new
    one. Every step may be repeated after a crash: a second run carries on where the first stopped."""
    if lock is not None:
        lock.check()
    out.parent.mkdir(parents=True, exist_ok=True)
    if supersedes is not None and _is_directory(out):
        kept = staging / SUPERSEDED
        if _is_directory(out / SUPERSEDED) and not kept.exists():
            os.rename(out / SUPERSEDED, kept)
        slot = kept / str(supersedes)
        slot.mkdir(parents=True, exist_ok=True)
        for path in sorted(out.iterdir()):
            os.rename(path, slot / path.name)
            reached("superseded")
        fsync_path(slot)
        fsync_path(kept)
    _clear_place(out, staging.parent)
    os.rename(staging, out)
    reached("renamed")
    fsync_path(out.parent)
    reached("published")
    if lock is not None:
        lock.check()


def _is_directory(path: Path) -> bool:
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except FileNotFoundError:
        return False


def _clear_place(out: Path, reports_dir: Path) -> None:
    """An empty directory may stay (the rename replaces it); anything else there is moved aside."""
    try:
        if _is_directory(out) and not any(out.iterdir()):
            return
    except FileNotFoundError:
        return
    if not os.path.lexists(out):
        return
    aside = reports_dir / f"{DISPLACED_PREFIX}{out.relative_to(reports_dir).as_posix().replace('/', '-')}-" \
                          f"{os.urandom(4).hex()}"
    os.rename(out, aside)
    log.warning("%s held something that is not the report the anchor records: moved aside to %s", out, aside)


def complete_anchored(reports_dir: Path, anchor: Anchor, key: Ed25519PublicKey,
                      lock: WriterLock | None = None) -> list[Path]:
    """Publish every staged report the anchor records as the latest version of its hour (day) and the
    volume does not hold; remove staging the anchor does not name. Return what was published."""
    published = []
    latest = {versions[-1].digest: (kind, versions[-1]) for kind in ("hour", "day")
              for versions in anchor.reports(kind).values()}
    for staging in sorted(reports_dir.glob(STAGING_PREFIX + "*")):
        if not _is_directory(staging):
            continue  # planted: vgate audit verify names it
        try:
            digest: str | None = digest_of(staging)
        except OSError:
            digest = None
        if digest not in latest:
            log.warning("removing %s: an interrupted build the anchor does not record (nothing was claimed)", staging)
            shutil.rmtree(staging, ignore_errors=True)
            continue
        kind, anchored = latest[digest]
        out = place_directory(reports_dir, kind, anchored.place)
        problem = _staged_problem(staging, key)
        if problem:
            log.error("not completing %s (the report of %s the anchor records): %s", staging, anchored.place, problem)
            continue
        publish(staging, out, supersedes=anchored.version - 1 if anchored.version > 1 else None, lock=lock)
        log.warning("completed the publication of the report of %s, interrupted after it was anchored", anchored.place)
        published.append(out)
    return published


def _staged_problem(staging: Path, key: Ed25519PublicKey) -> str | None:
    """Why a staged report is not the signed one (a bad signature, a changed file), or None."""
    try:
        sums = read_regular(staging / SUMS)
        if not signature_valid(key, sums, read_regular(staging / SIGNATURE)):
            return "its signature does not verify"
        for digest, name in listed(sums):
            if sha256_regular(staging / name) != digest:
                return f"{name} does not match its checksum"
    except OSError as error:
        return str(error)
    return None
