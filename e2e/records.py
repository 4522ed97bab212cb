"""vgate's decision records as an auditor's script reads them, for the tests (HTTPS and end to end)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def decisions(audit_dir: Path) -> list[dict[str, Any]]:
    """Every decision under ``audit_dir``, in the order decided (each worker appends a segment of its
    own); the workers' heartbeats, records of the same chains, are not decisions."""
    merged = [record for segment in sorted(audit_dir.glob("*.jsonl")) for record in decisions_in(segment)
              if record.get("event") != "heartbeat"]
    return sorted(merged, key=lambda record: record["time"])


def decisions_in(segment: Path) -> list[dict[str, Any]]:
    """One worker's records, in the order it wrote them."""
    return [json.loads(line) for line in segment.read_text().splitlines()]
