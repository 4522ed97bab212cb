"""report.csv: every decision of the hour, one row each, written while the segments stream by."""

from __future__ import annotations

from typing import Any

CSV_FIELDS = ("time", "replica", "endpoint", "uid", "user", "operation", "kind", "namespace", "name", "dryRun",
              "decision", "rules", "exceptions", "policyRevision", "latencyMs")


def csv_row(record: dict[str, Any]) -> list[Any]:
    """One decision record as a row of ``CSV_FIELDS``: rule results as ``id:action;...``."""
    rules = record.get("rules") or []
    return [record.get("time"), record.get("replica"), record.get("endpoint"), record.get("uid"), record.get("user"),
            record.get("operation"), record.get("kind"), record.get("namespace"), record.get("name"),
            record.get("dryRun"), record.get("decision"), ";".join(f"{r['id']}:{r['action']}" for r in rules),
            ";".join(r["exception"] for r in rules if r.get("exception")), record.get("policyRevision"),
            record.get("latencyMs")]
