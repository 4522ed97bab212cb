"""Outages are not quiet hours (issue 35): heartbeats in the writers' chains, and the report's
statement of when vgate was up, from real decision log segments and a real signed report."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

from webhook.audit.log import DecisionLog
from webhook.audit.verify import verify_segments
from webhook.reports.availability import Availability
from webhook.reports.build import build_report
from webhook.reports.keys import ensure_key

from helpers import POLICIES

HOUR = (datetime.now(timezone.utc) - timedelta(hours=30)).replace(minute=0, second=0, microsecond=0)


def beats(minutes: list[int], second: int = 10) -> list[dict]:
    return [{"time": (HOUR + timedelta(minutes=m, seconds=second)).isoformat(), "replica": "r1",
             "event": "heartbeat", "intervalSeconds": 60} for m in minutes]


def section(records: list[dict]) -> dict:
    availability = Availability()
    for record in records:
        availability.add(record)
    return availability.section("2026-12-04T14")


def test_a_minute_with_no_heartbeat_and_no_decision_is_a_gap():
    assert section(beats(list(range(60))))["gaps"] == []
    stopped = section(beats([*range(0, 21), *range(45, 60)]))  # the beat at :20:10 reaches :21:40
    assert stopped["upMinutes"] == 60 - 23 and stopped["gaps"] == [
        {"fromMinute": 22, "toMinute": 44, "minutes": 23, "range": "14:22-14:44"}]
    # a beat late by a few ms leaves no false one-minute gap: each reaches an interval and a half
    assert section(beats(list(range(0, 60, 1)), second=59))["gaps"] == []
    # decisions are signs of life too (a writer from before heartbeats), each its own minute
    assert section([{"time": (HOUR + timedelta(minutes=30)).isoformat(), "decision": "allowed"}])["upMinutes"] == 1


def write_log(directory: Path, minutes: list[int]) -> None:
    """Heartbeats as a worker writes them, hash-chained, at these minutes of the hour."""
    times = iter([HOUR + timedelta(minutes=m, seconds=5) for m in minutes])
    log = DecisionLog(directory, replica="r1", clock=lambda: next(times))
    for _ in minutes:
        log.record({"event": "heartbeat", "intervalSeconds": 60, "policyRevision": "x"})


def report_of(tmp_path: Path, minutes: list[int]) -> dict:
    key = tmp_path / "keys" / "report.key"
    ensure_key(key)
    write_log(tmp_path / "audit", minutes)
    out = build_report(HOUR, tmp_path / "audit", tmp_path / "reports", POLICIES, key)
    return {**json.loads((out / "report.json").read_text()), "html": (out / "report.html").read_text()}


def test_an_idle_hour_with_heartbeats_says_vgate_was_up(tmp_path):
    report = report_of(tmp_path, list(range(60)))
    assert report["traffic"] is False and report["totals"]["decisions"] == 0  # heartbeats are not decisions
    assert report["summary"] == "no admission requests reached vgate in this hour (it was up 60 of 60 minutes)"
    assert report["availability"] == {"upMinutes": 60, "heartbeats": 60, "replicas": 1, "gaps": [], "recorded": True}
    assert report["integrity"]["ok"] and verify_segments(tmp_path / "audit") == (60, [])  # chained records


def test_an_hour_with_an_outage_names_its_gap_in_both_languages(tmp_path):
    report = report_of(tmp_path, [*range(0, 10), *range(40, 60)])
    [gap] = report["availability"]["gaps"]
    assert (gap["fromMinute"], gap["toMinute"]) == (11, 39)
    assert "运行时段 · When vgate was up" in report["html"] and f"{gap['range']} UTC" in report["html"]


def test_an_hour_no_vgate_recorded_is_an_outage_not_a_quiet_hour(tmp_path):
    key = tmp_path / "keys" / "report.key"
    ensure_key(key)
    out = build_report(HOUR, tmp_path / "no-audit", tmp_path / "reports", POLICIES, key)
    report = json.loads((out / "report.json").read_text())
    assert report["summary"] == ("no record of vgate running in this hour: no heartbeat and no decision "
                                 "(an outage, or vgate not running)")
    assert report["availability"]["recorded"] is False and report["availability"]["upMinutes"] == 0
    assert "本小时无 vgate 运行记录" in (out / "report.html").read_text()


def test_the_daily_report_sums_when_vgate_was_up_and_names_every_gap_and_silent_hour(tmp_path):
    from webhook.reports.daily import build_daily

    key = tmp_path / "keys" / "report.key"
    ensure_key(key)
    day = (datetime.now(timezone.utc) - timedelta(days=2)).date()
    start = datetime(day.year, day.month, day.day, tzinfo=timezone.utc)
    times = iter([start + timedelta(hours=3, minutes=m, seconds=5) for m in [*range(0, 10), *range(40, 60)]])
    log = DecisionLog(tmp_path / "audit", replica="r1", clock=lambda: next(times))
    for _ in range(30):
        log.record({"event": "heartbeat", "intervalSeconds": 60, "policyRevision": "x"})
    for hour in (start + timedelta(hours=n) for n in range(24)):
        build_report(hour, tmp_path / "audit", tmp_path / "reports", POLICIES, key)
    daily = json.loads((build_daily(day, tmp_path / "reports", key, now=datetime.now(timezone.utc))
                        / "report.json").read_text())["availability"]
    assert daily["upMinutes"] == 31 and len(daily["hoursWithoutRecord"]) == 23  # 03:00-03:10 and 03:40-03:59
    assert daily["gaps"] == [{"hour": f"{start:%Y-%m-%d}T03", "range": "03:11-03:39", "minutes": 29}]
