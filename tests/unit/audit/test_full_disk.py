"""A decision record is on disk whole or not at all, even when the disk fills mid-write.

A real filesystem, not a stub: a 64 KiB tmpfs (the tests run as root, as CI does) filled to within a
few hundred bytes, so a record's write is cut short by the kernel (a short count, then ENOSPC).
"""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

from webhook.audit.log import DecisionLog
from webhook.audit.verify import verify_segments
from webhook.core.errors import AuditError

from helpers import fill

NOW = datetime(2026, 12, 2, 12, 30, tzinfo=timezone.utc)  # when the test appends to the anchor

def test_a_record_cut_short_by_a_full_disk_is_never_left_half_written(small_disk: Path) -> None:
    log = DecisionLog(small_disk / "audit", replica="disk")
    log.record({"endpoint": "validate", "uid": "before", "decision": "allowed"})
    filler = fill(small_disk, leave=3000)
    refused = 0
    for index in range(60):  # ~600-byte records: a few fit, then one is cut short
        try:
            log.record({"endpoint": "validate", "uid": f"u{index}", "decision": "allowed", "pad": "x" * 500})
        except AuditError:
            refused += 1
    assert refused > 0, "the disk never filled: the test did not exercise a short write"
    [segment] = (small_disk / "audit").glob("decisions-*.jsonl")
    good, findings = verify_segments(small_disk / "audit")
    assert findings == [] and segment.read_bytes().endswith(b"\n"), findings
    lines = segment.read_bytes().splitlines()
    assert good == len(lines) == 1 + 60 - refused
    # Room again: the next record follows the last whole one, and the chain holds.
    filler.unlink()
    log.record({"endpoint": "validate", "uid": "after", "decision": "allowed"})
    good, findings = verify_segments(small_disk / "audit")
    assert findings == [] and good == len(lines) + 1


def test_the_anchor_takes_a_line_whole_or_not_at_all(small_disk: Path) -> None:
    """The report writer's anchor shares the decision log's append: a full disk leaves no torn line."""
    import pytest
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    from webhook.reports.anchor import Anchor

    anchor, key = Anchor(small_disk / "anchor.jsonl"), Ed25519PrivateKey.generate()
    anchor.append({"kind": "hour", "hour": "2026-12-02T10", "sha256sumsDigest": "0" * 64}, key, NOW)
    before = anchor.path.read_bytes()
    fill(small_disk, leave=100)
    with pytest.raises(OSError):
        for n in range(50):
            anchor.append({"kind": "hour", "hour": f"2026-12-02T{n:02d}", "sha256sumsDigest": "1" * 64,
                           "pad": "x" * 300}, key, NOW)
    assert anchor.path.read_bytes().endswith(b"\n") and anchor.path.read_bytes().startswith(before)
    assert anchor.check(key.public_key()) == []


def test_the_decision_log_stamps_records_with_the_clock_it_is_given(tmp_path: Path):
    log = DecisionLog(tmp_path, replica="r", clock=lambda: NOW)
    log.record({"decision": "allowed"})
    [segment] = tmp_path.glob("decisions-*.jsonl")
    assert segment.name.endswith(f"-{NOW:%Y%m%dT%H}.jsonl")
    assert f'"time":"{NOW.isoformat(timespec="microseconds")}"' in segment.read_text()
