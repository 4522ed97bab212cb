"""The report formats' one interface, each segment read once per report, and the clock given."""

from __future__ import annotations

import builtins
import os
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import orjson
import pytest
from test_log_binding import HOUR, record_lines, write_segment

import webhook.audit.verify as audit_verify
import webhook.reports.build as build
from webhook.reports.anchor import Anchor
from webhook.reports.build import build_report
from webhook.reports.keys import ensure_key
from webhook.reports.renderer import FinishedHour, Renderer
from webhook.reports.sums import SUMS

from helpers import POLICIES

NOW = HOUR + timedelta(hours=3, minutes=7)  # a clock the test chose: the report must say this, not the wall's


@pytest.fixture
def hour_of_records(tmp_path: Path) -> tuple[Path, Path, Path]:
    audit, reports, key = tmp_path / "audit", tmp_path / "reports", tmp_path / "key" / "report.key"
    audit.mkdir()
    ensure_key(key)
    write_segment(audit, "replica-a-1", record_lines(5))
    write_segment(audit, "replica-b-1", record_lines(3, writer="replica-b-1"))
    return audit, reports, key


def test_a_new_format_is_one_renderer_seeing_every_record_once(hour_of_records, monkeypatch):
    audit, reports, key = hour_of_records
    seen: list[dict[str, Any]] = []

    class Uids(Renderer):
        files = ("uids.txt",)

        def add(self, record: dict[str, Any]) -> None:
            seen.append(record)

        def finish(self, hour: FinishedHour) -> None:
            self.out.write("uids.txt", "".join(f"{r['uid']}\n" for r in seen).encode())

    monkeypatch.setattr(build, "RENDERERS", (*build.RENDERERS, Uids))
    out = build_report(HOUR, audit, reports, POLICIES, key, now=NOW)
    assert len(seen) == 8 and len({r["uid"] for r in seen}) == 8  # each record once
    assert [r["time"] for r in seen] == sorted(r["time"] for r in seen)  # in time order
    assert (out / "uids.txt").read_text().count("\n") == 8
    assert "uids.txt" in (out / SUMS).read_text()  # signed like every format


def test_each_segment_is_read_once_per_report(hour_of_records, monkeypatch):
    audit, reports, key = hour_of_records
    opened: list[str] = []

    def counting_open(file: Any, *args: Any, **kwargs: Any) -> Any:
        if Path(str(file)).name.startswith("decisions-"):
            opened.append(Path(str(file)).name)
        return builtins.open(file, *args, **kwargs)

    real_os_open = os.open

    def counting_os_open(file: Any, *args: Any, **kwargs: Any) -> Any:  # how verify opens segments (no symlinks)
        if Path(str(file)).name.startswith("decisions-"):
            opened.append(Path(str(file)).name)
        return real_os_open(file, *args, **kwargs)

    for module in (audit_verify, build):
        monkeypatch.setattr(module, "open", counting_open, raising=False)
    monkeypatch.setattr(os, "open", counting_os_open)
    build_report(HOUR, audit, reports, POLICIES, key, now=NOW)
    assert sorted(opened) == sorted(p.name for p in audit.glob("decisions-*.jsonl"))


def test_the_report_and_its_anchor_line_carry_the_clock_given(hour_of_records, tmp_path):
    audit, reports, key = hour_of_records
    anchor = Anchor(tmp_path / "anchor.jsonl")
    out = build_report(HOUR, audit, reports, POLICIES, key, now=NOW, anchor=anchor)
    document = orjson.loads((out / "report.json").read_bytes())
    assert datetime.fromisoformat(document["generatedAt"]) == NOW
    assert [entry["at"] for entry in anchor.entries()] == [NOW.isoformat(timespec="seconds")]
    assert NOW.tzinfo is timezone.utc
