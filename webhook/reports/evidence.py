"""`vgate audit verify`'s work: the decision log's chains, then every report against a public key.

The command line gives the directories, the hours and the key; this module decides what to check
(reports are checked whenever any are expected, a key was given, or the anchor records some: the
volume may have been erased), and returns the findings and the notes the auditor should read
(which key was trusted, whether an anchor was used, which torn lines a valid seal acknowledges).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from ..audit.verify import Finding, verify_segments
from ..core import hours
from ..core.errors import InputError
from .anchor import Anchor
from .keys import load_public_key
from .seals import acknowledged
from .verify import fingerprint, reports_expected, verify_reports


@dataclass
class EvidenceCheck:
    """What one verification found: records whose chains hold, problems, and notes for the auditor."""

    records: int = 0
    findings: list[Finding] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def check_evidence(audit_dir: Path, reports_dir: Path, public_key: Path, *, key_given: bool,
                   first: datetime | None, last: datetime | None, until: datetime,
                   anchor: Anchor | None) -> EvidenceCheck:
    """Check the decision log of ``first``..``last`` and the reports up to ``until`` (the last closed hour).

    Raises InputError when reports must be checked and ``public_key`` is missing or not a key.
    """
    check = EvidenceCheck()
    check.records, check.findings = verify_segments(audit_dir, hours.tag(first) if first else None,
                                                    hours.tag(last) if last else None)
    if reports_expected(reports_dir, audit_dir, until) or key_given or (anchor and anchor.entries()):
        check.findings += _check_reports(check, reports_dir, public_key, key_given, first, last, audit_dir,
                                         until, anchor)
    check.findings = _acknowledge_sealed(check, public_key)
    return check


def _check_reports(check: EvidenceCheck, reports_dir: Path, public_key: Path, key_given: bool,
                   first: datetime | None, last: datetime | None, audit_dir: Path, until: datetime,
                   anchor: Anchor | None) -> list[Finding]:
    """The reports against a public key: the one given, or the one beside them, and the note says which."""
    if not public_key.is_file():
        raise InputError(f"{public_key}: the report public key is needed to check reports (--pubkey)")
    try:
        key_id = fingerprint(load_public_key(public_key))
    except ValueError as error:
        raise InputError(f"{public_key}: {error}") from None
    trust = "the key you gave" if key_given else \
        "the key beside the reports, trusted: pass --pubkey with the key you hold"
    check.notes.append(f"report key {public_key} {key_id} ({trust})")
    check.notes.append(f"anchor {anchor.path}" if anchor is not None else
                       "no anchor (reports.anchorFile is null): reports deleted or rolled back together with their "
                       "log cannot be found")
    return verify_reports(reports_dir, public_key, first, last, audit_dir=audit_dir, until=until, anchor=anchor)


def _acknowledge_sealed(check: EvidenceCheck, public_key: Path) -> list[Finding]:
    """A torn last line a valid seal names (its segment, its byte offset: never a finding's text)
    becomes a note, not a problem; every other finding stays one."""
    if not public_key.is_file():
        return check.findings
    key, problems = load_public_key(public_key), []
    for finding in check.findings:
        seal = acknowledged(Path(finding.file), key) if finding.torn_at is not None else None
        if seal is None or seal.torn_at != finding.torn_at:
            problems.append(finding)
        else:
            check.notes.append(f"{finding} -- acknowledged {seal.sealed_at}: {seal.reason}")
    return problems
