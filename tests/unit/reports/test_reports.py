"""Hourly reports: built from real decisions, valid for report tooling, signed, chained, checked."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
from datetime import datetime, timedelta, timezone
from pathlib import Path

import jsonschema
import pytest
import yaml

from webhook.reports.build import build_report, hour_directory
from webhook.reports.keys import ensure_key, public_key_path
from webhook.reports.verify import verify_reports

from helpers import CORPUS, POLICIES, VGATE


def crd_validator(filename: str, version: str) -> jsonschema.Draft4Validator:
    crd = yaml.safe_load((CORPUS / "report-crds" / filename).read_text())
    schema = next(v for v in crd["spec"]["versions"] if v["name"] == version)["schema"]["openAPIV3Schema"]
    return jsonschema.Draft4Validator(schema)


def vgate(*args: str, later: str | None = None) -> subprocess.CompletedProcess:
    """The vgate command; with ``later`` (e.g. "+2 hours") run under faketime, at another wall-clock time."""
    clock = ["faketime", later] if later else []
    return subprocess.run([*clock, *VGATE, *args], capture_output=True, text=True, timeout=120)


@pytest.fixture
def setup(tmp_path):
    return report_setup(tmp_path)


def report_setup(tmp_path: Path) -> tuple[Path, Path]:
    """A reports directory and a fresh report key under ``tmp_path``."""
    key = tmp_path / "keys" / "report.key"
    ensure_key(key)
    return tmp_path / "reports", key


def current_hour() -> datetime:
    return datetime.now(timezone.utc).replace(minute=0, second=0, microsecond=0)


def test_an_hour_without_traffic_still_gets_a_report(tmp_path, setup):
    reports, key = setup
    out = build_report(current_hour() - timedelta(hours=30), tmp_path / "no-audit", reports, POLICIES, key)
    report = json.loads((out / "report.json").read_text())
    assert report["traffic"] is False and report["summary"] == (  # no heartbeat either: not a quiet hour
        "no record of vgate running in this hour: no heartbeat and no decision (an outage, or vgate not running)")
    assert report["denials"] == [] and report["totals"]["decisions"] == 0
    assert report["genesis"] is True and report["previousReport"] is None  # the first report, and says so
    later = build_report(current_hour() - timedelta(hours=27), tmp_path / "no-audit", reports, POLICIES, key)
    skipping = json.loads((later / "report.json").read_text())  # vgate was down for two hours in between
    assert skipping["genesis"] is False and skipping["previousReport"]["hour"] == report["hour"]
    assert "no report for the hours after" in skipping["integrity"]["findings"][0]


def chain(tmp_path, setup, hours: int = 3) -> tuple[Path, Path, list[datetime]]:
    reports, key = setup
    # From 08:00 yesterday: closed whenever the tests run, and inside one day, so no day of the chain
    # is complete (a complete day must have a daily report, which these tests do not build).
    first = (current_hour() - timedelta(days=1)).replace(hour=8)
    made = [first + timedelta(hours=n) for n in range(hours)]
    for hour in made:
        build_report(hour, tmp_path / "no-audit", reports, POLICIES, key)
    return reports, key, made


def test_reports_chain_to_their_predecessor_and_verify(tmp_path, setup):
    reports, key, hours = chain(tmp_path, setup)
    second = json.loads((hour_directory(reports, hours[1]) / "report.json").read_text())
    first_sums = (hour_directory(reports, hours[0]) / "SHA256SUMS").read_bytes()
    assert second["previousReport"]["sha256sumsDigest"] == hashlib.sha256(first_sums).hexdigest()
    assert verify_reports(reports, public_key_path(key)) == []


def test_a_swapped_report_file_is_found(tmp_path, setup):
    reports, key, hours = chain(tmp_path, setup)
    victim = hour_directory(reports, hours[1])
    (victim / "report.json").write_bytes((hour_directory(reports, hours[0]) / "report.json").read_bytes())
    problems = [str(f) for f in verify_reports(reports, public_key_path(key))]
    assert f"{victim}/report.json: checksum does not match SHA256SUMS line 1: the file was changed" in problems


def test_a_forged_signature_is_found(tmp_path, setup):
    reports, key, hours = chain(tmp_path, setup)
    victim = hour_directory(reports, hours[2])
    sums = victim / "SHA256SUMS"
    other = tmp_path / "other.key"
    ensure_key(other)
    from webhook.reports.keys import load_private_key, sign

    (victim / "SHA256SUMS.sig").write_bytes(sign(load_private_key(other), sums.read_bytes()))
    problems = [str(f) for f in verify_reports(reports, public_key_path(key))]
    assert problems == [f"{victim}/SHA256SUMS.sig: signature does not verify with the report public key"]


def test_a_replaced_predecessor_and_a_missing_hour_are_found(tmp_path, setup):
    reports, key, hours = chain(tmp_path, setup, hours=4)
    shutil.rmtree(hour_directory(reports, hours[0]))  # an insider with the key replaces a signed hour
    build_report(hours[0], tmp_path / "no-audit", reports, POLICIES, key)  # hours[1] links the old one
    for name in (
        "SHA256SUMS",
        "SHA256SUMS.sig",
        "report.json",
        "report.csv",
        "report.html",
        "clusterreport.yaml",
        "clusterpolicyreport.yaml",
    ):
        (hour_directory(reports, hours[2]) / name).unlink()
    problems = [str(f) for f in verify_reports(reports, public_key_path(key))]
    assert any("previousReport digest does not match the report of" in p for p in problems)
    assert f"{hour_directory(reports, hours[2])}: no report for hour {hours[2]:%Y-%m-%dT%H}" in problems


def test_a_signed_report_copied_into_another_hour_is_found(tmp_path, setup):
    """Without the key: the newest hour replaced by the first-ever report (valid signature, no predecessor)."""
    reports, key, hours = chain(tmp_path, setup)
    newest, first = hour_directory(reports, hours[2]), hour_directory(reports, hours[0])
    shutil.rmtree(newest)
    shutil.copytree(first, newest)
    problems = [str(f) for f in verify_reports(reports, public_key_path(key))]
    assert problems == [f"{newest}/report.json: the report of hour {hours[0]:%Y-%m-%dT%H} sits in the directory of "
                        f"{hours[2]:%Y-%m-%dT%H}: it was copied or moved there",
                        f"{newest}/report.json: it links no earlier report and there are older reports (a first "
                        "report put in a later place?)"], problems


@pytest.mark.parametrize("language,present,absent", [("en", "<h2>Summary</h2>", "摘要"),
                                                      ("zh-CN", "<h2>摘要</h2>", "<h2>Summary"),
                                                      ("both", "<h2>摘要 · Summary</h2>", "<h2>Summary</h2>")])
def test_report_language_follows_the_config(tmp_path, setup, language, present, absent):
    reports, key = setup
    out = build_report(current_hour() - timedelta(hours=40), tmp_path / "no-audit", reports, POLICIES, key,
                       language=language)
    html = (out / "report.html").read_text()
    assert present in html and absent not in html
    assert "安全计算环境 / 安全审计" in html  # control names as GB/T 22239-2019 words them, in every language
