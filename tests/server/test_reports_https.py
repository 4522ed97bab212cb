"""Reports: the tests that start vgate over HTTPS (the rest: tests/unit/reports/test_reports.py)."""

from __future__ import annotations

import csv
import hashlib
import json
from datetime import datetime, timedelta
from pathlib import Path

import pytest
import yaml
from reports.test_reports import crd_validator, current_hour, report_setup, vgate

from webhook.reports.build import build_report

from helpers import POLICIES, anchor_beside, pod, review


@pytest.fixture
def setup(tmp_path):
    return report_setup(tmp_path)


def test_report_accounts_for_every_decision_of_the_hour(tmp_path, server):
    server.post("/validate", review(pod(namespace="ml-training", nodeName="n1"), uid="report-denied"))
    server.post("/mutate", review(pod(namespace="ml-training"), uid="report-mutated", dry_run=True))
    server.post("/validate", "{broken")
    records = server.decisions()
    hour = datetime.fromisoformat(records[-1]["time"]).replace(minute=0, second=0, microsecond=0)
    tag = hour.strftime("%Y%m%dT%H")
    in_hour = [r for r in records if r["time"].startswith(hour.strftime("%Y-%m-%dT%H"))]
    config = tmp_path / "vgate.yaml"
    document = yaml.safe_load(server.config_path.read_text())
    document["reports"] = {"dir": str(tmp_path / "reports"), "key": str(tmp_path / "keys" / "r.key"),
                           "anchorFile": str(anchor_beside(tmp_path))}
    config.write_text(yaml.safe_dump(document))
    early = vgate("report", "--hour", hour.strftime("%Y-%m-%dT%H"), "--config", str(config), "--new-key")
    assert early.returncode == 2 and "has not closed yet" in early.stderr  # the hour is still open now
    assert not (tmp_path / "reports").exists() or not any((tmp_path / "reports").rglob("SHA256SUMS"))
    result = vgate("report", "--hour", hour.strftime("%Y-%m-%dT%H"), "--config", str(config), "--policies",
                   str(POLICIES), later="+2 hours")
    assert result.returncode == 0, result.stderr
    assert "created report key" in early.stderr
    out = Path(result.stdout.strip())
    assert out == tmp_path / "reports" / hour.strftime("%Y/%m/%d/%H")
    report = json.loads((out / "report.json").read_text())
    assert report["totals"]["decisions"] == len(in_hour)
    assert sum(report["totals"]["byDecision"].values()) == len(in_hour)
    assert report["totals"]["dryRuns"] == sum(1 for r in in_hour if r.get("dryRun"))
    denied = next(d for d in report["denials"] if d["uid"] == "report-denied")
    assert "scheduling-node-name-bypass" in [r["id"] for r in denied["rules"]]
    node_name = next(r for r in report["perRule"] if r["id"] == "scheduling-node-name-bypass")
    assert node_name["deny"] >= 1 and node_name["control"].startswith("MLPS 2.0 (GB/T 22239-2019) 8.1.4.2")
    assert any(c["control"].endswith("8.1.4.3 security audit") for c in report["controls"])
    assert all(segment["file"].endswith(f"{tag}.jsonl") for segment in report["segments"])
    rows = list(csv.DictReader((out / "report.csv").open()))
    assert len(rows) == len(in_hour) and {r["uid"] for r in rows} >= {"report-denied", "report-mutated"}
    crd_validator("openreports.io_clusterreports.yaml", "v1alpha1").validate(
        yaml.safe_load((out / "clusterreport.yaml").read_text())
    )
    crd_validator("wgpolicyk8s.io_clusterpolicyreports.yaml", "v1alpha2").validate(
        yaml.safe_load((out / "clusterpolicyreport.yaml").read_text())
    )
    html = (out / "report.html").read_text()
    assert '<span lang="zh-CN">安全计算环境 / 安全审计</span>' in html  # the control as GB/T 22239-2019 names it
    assert "<svg" in html and "8.1.4.3 security audit" in html and "<code>scheduling-node-name-bypass</code> " in html
    assert "http://" not in html.replace("http://www.w3.org/2000/svg", "") and "https://" not in html
    for line in (out / "SHA256SUMS").read_text().splitlines():
        digest, name = line.split("  ")
        assert hashlib.sha256((out / name).read_bytes()).hexdigest() == digest
    if hour.hour == 23:  # its day is over by then too: the writer's catch-up signs its daily report, as it does
        caught_up = vgate("report", "--catch-up", "--config", str(config), "--policies", str(POLICIES),
                          later="+2 hours")
        assert caught_up.returncode == 0, caught_up.stderr
    verified = vgate("audit", "verify", "--config", str(config), "--from", hour.strftime("%Y-%m-%dT%H"),
                     "--to", hour.strftime("%Y-%m-%dT%H"),
                     later="+2 hours")  # the hour it reported had closed by then
    assert verified.returncode == 0, verified.stdout


def test_two_replicas_sharing_volumes_get_one_merged_report(tmp_path, setup, start_server):
    reports, key = setup
    shared = tmp_path / "shared-audit"
    first, second = start_server(workers=1, audit_dir=shared), start_server(workers=1, audit_dir=shared)
    for n in range(3):
        first.post("/validate", review(pod(), uid=f"a{n}"))
        second.post("/validate", review(pod(), uid=f"b{n}"))
    hour = current_hour()
    out = build_report(hour, shared, reports, POLICIES, key, now=hour + timedelta(hours=2))
    report = json.loads((out / "report.json").read_text())
    assert len(report["segments"]) == 2
    assert report["totals"]["decisions"] >= 6
    uids = {row["uid"] for row in csv.DictReader((out / "report.csv").open())}
    assert {f"a{n}" for n in range(3)} | {f"b{n}" for n in range(3)} <= uids
