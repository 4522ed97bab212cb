"""report.csv: every decision of the hour, one row each, written while the segments stream by."""

from __future__ import annotations

import csv
from typing import Any

from .renderer import FinishedHour, Renderer
from .staged import Staged

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


class CsvRenderer(Renderer):
    files = ("report.csv",)

    def __init__(self, out: Staged) -> None:
        super().__init__(out)
        self._file = out.open("report.csv", text=True)
        self._writer = csv.writer(self._file)
        self._writer.writerow(CSV_FIELDS)

    def add(self, record: dict[str, Any]) -> None:
        self._writer.writerow(csv_row(record))

    def finish(self, hour: FinishedHour) -> None:
        self._file.flush()

    def close(self) -> None:
        self._file.close()
