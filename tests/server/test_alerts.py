"""Every alert in the chart, evaluated by Prometheus's own rule engine (``promtool test rules``)
against the series a real vgate emits: start vgate, cause the failure (a full decision-log disk, a
broken policy reloaded, a certificate about to expire), scrape its metrics port, and feed what was
scraped to promtool, one scrape a minute. A healthy vgate fires none of them.

promtool's clock starts at 0, so a timestamp gauge (the certificate's expiry) is given as its
distance from the scrape; counters go on rising by their last scraped increase once the scrapes
end, as a failure that lasts would make them.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import requests
import yaml
from prometheus_client.parser import text_string_to_metric_families

from helpers import POLICIES, ROOT, VGATE, fill, free_port, pod, review, trusted

sys.path.insert(0, str(ROOT / "deploy"))
from render import render as render_chart


def render(values: dict[str, Any]) -> list[dict[str, Any]]:
    return render_chart(trusted(values))

EXPIRY = "vgate_tls_certificate_expiry_timestamp_seconds"
OLDEST = "vgate_forward_oldest_undelivered_timestamp_seconds"  # 0 while the audit system has every record


def chart_rules() -> list[dict[str, Any]]:
    """The alerting rules of the chart's PrometheusRule, as a release that enables it renders them."""
    rendered = render({"prometheusRule": {"enabled": True}})
    [rule] = [d for d in rendered if d["kind"] == "PrometheusRule"]
    return [r for group in rule["spec"]["groups"] for r in group["rules"] if "alert" in r]


def report_writer() -> str:
    [name] = [d["metadata"]["name"] for d in render({}) if d["kind"] == "CronJob"]
    return str(name)


def scrape(port: int) -> dict[str, float]:
    """Every vgate_* sample on the metrics port: 'name{labels}' -> value."""
    text = requests.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text
    samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name.startswith("vgate_") and not sample.name.endswith("_created"):
                labels = ",".join(f'{k}="{v}"' for k, v in sorted(sample.labels.items()))
                stamp = sample.name == EXPIRY or (sample.name == OLDEST and sample.value)
                value = sample.value - time.time() if stamp else sample.value
                samples[f"{sample.name}{{{labels}}}"] = value
    return samples


def series(scrapes: list[dict[str, float]], minutes: int) -> list[dict[str, str]]:
    """promtool input series: the scrapes one a minute, then ``minutes`` more as the last ones went."""
    out = []
    for name in sorted(set().union(*scrapes)):
        values = [s.get(name) for s in scrapes]
        known = [v for v in values if v is not None]
        counter = name.split("{")[0].endswith(("_total", "_bucket", "_count", "_sum"))
        step = known[-1] - known[-2] if len(known) > 1 and counter else 0.0
        if name.startswith(EXPIRY):
            step = -60.0  # a minute closer to expiry each minute
        written = " ".join("_" if v is None else repr(v) for v in values)
        sign = "-" if step < 0 else "+"
        out.append({"series": name, "values": f"{written} {known[-1] + step!r}{sign}{abs(step)!r}x{minutes}"})
    return out


def firing(tmp_path: Path, scrapes: list[dict[str, float]], at_minutes: int, expected: set[str]) -> None:
    """Assert promtool finds exactly ``expected`` firing at ``at_minutes``, given these scrapes (and
    kube-state-metrics saying the chart's report writer succeeds every hour)."""
    rules = chart_rules()
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump({"groups": [{"name": "vgate", "rules": rules}]}))
    succeeding = f'kube_cronjob_status_last_successful_time{{cronjob="{report_writer()}",namespace="vgate-system"}}'
    writer = {"series": succeeding, "values": f"0+60x{at_minutes + 5}"}
    scraped = {"series": 'up{job="vgate",namespace="vgate-system"}', "values": f"1x{at_minutes + 5}"}  # Prometheus's
    tests = [{"interval": "1m", "input_series": [writer, scraped, *series(scrapes, at_minutes + 5)],
              "alert_rule_test": [{"eval_time": f"{at_minutes}m", "alertname": rule["alert"], "exp_alerts": [
                  {"exp_labels": rule["labels"], "exp_annotations": rule["annotations"]}]
                  if rule["alert"] in expected else []} for rule in rules]}]
    (tmp_path / "test.yaml").write_text(yaml.safe_dump({"rule_files": ["rules.yaml"], "tests": tests}))
    done = subprocess.run(["promtool", "test", "rules", "test.yaml"], cwd=tmp_path, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr


def traffic(server: Any, port: int, rounds: int = 4, per_round: int = 10,
            labels: dict[str, str] | None = None) -> list[dict[str, float]]:
    """Scrape, then ``rounds`` times: send requests, scrape."""
    scrapes = [scrape(port)]
    for _ in range(rounds):
        for n in range(per_round):
            server.post("/validate", review(pod(namespace="web", name=f"p{n}", labels=labels)))
        scrapes.append(scrape(port))
    return scrapes


def test_a_healthy_vgate_fires_no_alert(start_server, tmp_path):
    port = free_port()
    server = start_server(workers=2, extra_args=("--metrics-bind", f"127.0.0.1:{port}"))
    firing(tmp_path, traffic(server, port), 90, set())


def test_a_full_decision_log_disk_fires_the_unrecorded_and_error_alerts_and_counts_refusals(start_server, tmp_path,
                                                                                           small_disk):
    port = free_port()
    server = start_server(workers=1, audit_dir=small_disk / "audit",
                          extra_args=("--metrics-bind", f"127.0.0.1:{port}"))
    server.post("/validate", review(pod(namespace="web")))
    fill(small_disk)
    scrapes = traffic(server, port)
    answered = server.post("/validate", review(pod(namespace="web"))).json()["response"]
    assert answered["allowed"] is False and "nothing is admitted unrecorded" in answered["status"]["message"]
    last = scrapes[-1]
    refused = 'vgate_admission_requests_total{decision="error",dry_run="false",endpoint="validate",kind="Pod",' \
              'operation="CREATE"}'
    audit_errors = last['vgate_errors_total{endpoint="validate",reason="audit"}']
    recorded = [line for segment in (small_disk / "audit").glob("*.jsonl") for line in segment.read_text().splitlines()
                if '"event":"heartbeat"' not in line]  # decisions: the workers' heartbeats are not verdicts
    assert last[refused] == audit_errors >= 30, last  # every unrecorded decision counted as the refusal it was
    answered = sum(v for k, v in last.items() if k.startswith("vgate_admission_requests_total{")
                   and 'decision="error"' not in k)
    assert answered == len(recorded), last  # and a verdict only for what the log holds
    firing(tmp_path, scrapes, 20, {"VgateWebhookErrors", "VgateDeniedUnrecorded"})
    (tmp_path / "early").mkdir()
    firing(tmp_path / "early", scrapes, 3, set())  # not before the rules' "for" has passed


def test_a_collector_down_fires_forwarding_behind_and_a_live_one_none(start_server, tmp_path):
    """audit.forward to a port nobody listens on: the backlog grows, the oldest undelivered record
    ages, and VgateForwardingBehind fires once it is older than 900 s for 5 minutes; the admissions
    meanwhile are answered as usual. To a live rsyslog: the backlog empties and nothing fires."""
    from e2e.collectors import Rsyslog

    down = free_port()
    port = free_port()
    server = start_server(workers=2, config_text=f"audit:\n  forward:\n    url: relp://127.0.0.1:{down}\n",
                          extra_args=("--metrics-bind", f"127.0.0.1:{port}"))
    scrapes = traffic(server, port)
    deadline = time.monotonic() + 10  # the backlog is measured each second while the collector is away
    while scrape(port).get("vgate_forward_backlog_records{}", 0) < 40 and time.monotonic() < deadline:
        time.sleep(0.3)
    scrapes.append(scrape(port))
    last = scrapes[-1]
    assert last["vgate_forward_backlog_records{}"] >= 40 and last[f"{OLDEST}{{}}"] < 0, last  # 40 decisions waiting
    assert last["vgate_forward_failures_total{}"] >= 1, last
    deadline = time.monotonic() + 10  # each worker's /readyz body is refreshed every 2 s
    while "url" not in requests.get(f"http://127.0.0.1:{port}/readyz", timeout=5).json().get("forwarding", {}):
        assert time.monotonic() < deadline
        time.sleep(0.3)
    readiness = requests.get(f"http://127.0.0.1:{port}/readyz", timeout=5)
    assert readiness.status_code == 200, readiness.text  # the admission path does not wait for the audit system
    forwarding = readiness.json()["forwarding"]
    assert forwarding["url"] == f"relp://127.0.0.1:{down}" and "Connection refused" in forwarding["lastError"]
    firing(tmp_path, scrapes, 25, {"VgateForwardingBehind"})
    (tmp_path / "early").mkdir()
    firing(tmp_path / "early", scrapes, 10, set())
    collector = Rsyslog(tmp_path / "collector", "relp").start()
    try:
        live = free_port()
        server = start_server(workers=2, config_text=f"audit:\n  forward:\n    url: {collector.url}\n",
                              extra_args=("--metrics-bind", f"127.0.0.1:{live}"))
        scrapes = traffic(server, live)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and (scrape(live).get("vgate_forward_backlog_records{}") != 0.0 or scrape(
                live).get('vgate_forward_records_total{result="delivered"}', 0) < 40):
            time.sleep(0.3)
        scrapes.append(scrape(live))
    finally:
        collector.kill()
    assert scrapes[-1][f"{OLDEST}{{}}"] == 0 and scrapes[-1]['vgate_forward_records_total{result="delivered"}'] >= 40
    (tmp_path / "live").mkdir()
    firing(tmp_path / "live", scrapes, 90, set())


def settled(port: int, value: float) -> None:
    """Wait until every live worker's last reload reads ``value``."""
    deadline = time.monotonic() + 30
    while scrape(port).get("vgate_config_last_reload_successful{}") != value:
        assert time.monotonic() < deadline, scrape(port)
        time.sleep(0.3)


def test_a_failed_reload_fires_reload_failing(start_server, tmp_path):
    port = free_port()
    policies = tmp_path / "policies"
    shutil.copytree(POLICIES, policies)
    server = start_server(workers=2, policies=policies, extra_args=("--metrics-bind", f"127.0.0.1:{port}"))
    settled(port, 1.0)  # a worker still starting can show 0 for a moment
    (policies / "broken.rego").write_text("package vgate.rules.broken\n\ndeny contains msg if {\n")
    settled(port, 0.0)
    scrapes = traffic(server, port)
    assert scrapes[-1]["vgate_config_last_reload_successful{}"] == 0.0, scrapes[-1]
    firing(tmp_path, scrapes, 20, {"VgateReloadFailing"})


def test_a_certificate_about_to_expire_fires_certificate_expiring(start_server, tmp_path):
    port = free_port()
    workdir = tmp_path / "s0"  # start_server's first server
    subprocess.run([*VGATE, "certs", "--out", str(workdir / "certs"), "--days", "3"], check=True, capture_output=True)
    server = start_server(workers=1, make_certs=False, extra_args=("--metrics-bind", f"127.0.0.1:{port}"))
    scrapes = traffic(server, port, rounds=2)
    firing(tmp_path, scrapes, 90, {"VgateCertificateExpiring"})


def test_a_slow_policy_fires_slow_answers(start_server, tmp_path):
    """Evaluations cut at a 3 s deadline: the 99th percentile passes half the webhooks' 5 s timeout."""
    port = free_port()
    policies = tmp_path / "policies"
    shutil.copytree(POLICIES, policies)
    slow = policies / "zz-slow"
    slow.mkdir()
    (slow / "policy.rego").write_text(
        (POLICIES / "security-privileged-container" / "policy.rego").read_text().split("package ")[0]
        .replace("id: security-privileged-container", "id: zz-slow")
        + "package vgate.rules.zz_slow\n\nimport rego.v1\n\n"
          "deny contains \"never\" if {\n\tinput.request.object.metadata.labels.speed == \"slow\"\n"
          "\tcount([x | some x in numbers.range(1, 2000000000)]) < 0\n}\n")
    config = yaml.safe_load((ROOT / "webhook" / "files" / "defaults" / "vgate.yaml").read_text()) or {}
    config.setdefault("server", {})["evaluationTimeoutSeconds"] = 3
    server = start_server(workers=1, policies=policies, config_text=yaml.safe_dump(config),
                          extra_args=("--metrics-bind", f"127.0.0.1:{port}"))
    scrapes = traffic(server, port, rounds=3, per_round=2, labels={"speed": "slow"})
    assert scrapes[-1]['vgate_admission_duration_seconds_bucket{endpoint="validate",le="2.5"}'] < \
        scrapes[-1]['vgate_admission_duration_seconds_bucket{endpoint="validate",le="5.0"}'], scrapes[-1]
    firing(tmp_path, scrapes, 20, {"VgateSlowAnswers"})  # 2 errors a minute: under the error alert's 0.1/s


def test_vgate_absent_fires_when_no_replica_is_up_or_scraped(tmp_path):
    """VgateAbsent reads Prometheus's own up series for the chart's Service: every replica down (0), or
    no series at all (nothing scraped), fires after 5 minutes; a replica up does not."""
    rules = chart_rules()
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump({"groups": [{"name": "vgate", "rules": rules}]}))
    [rule] = [r for r in rules if r["alert"] == "VgateAbsent"]
    assert rule["annotations"]["runbook_url"].endswith("docs/operators.md#break-glass-when-vgate-blocks-the-cluster")
    fires = [{"exp_labels": rule["labels"], "exp_annotations": rule["annotations"]}]
    up = 'up{job="vgate",namespace="vgate-system",instance="10.0.0.%d:9090"}'
    cases = [([{"series": up % 1, "values": "0x20"}, {"series": up % 2, "values": "0x20"}], fires),
             ([{"series": up.replace("vgate-system", "other") % 1, "values": "1x20"}], fires),
             ([{"series": up % 1, "values": "0x20"}, {"series": up % 2, "values": "1x20"}], [])]
    tests = [{"interval": "1m", "input_series": given,
              "alert_rule_test": [{"eval_time": "10m", "alertname": "VgateAbsent", "exp_alerts": expected}]}
             for given, expected in cases]
    (tmp_path / "test.yaml").write_text(yaml.safe_dump({"rule_files": ["rules.yaml"], "tests": tests}))
    done = subprocess.run(["promtool", "test", "rules", "test.yaml"], cwd=tmp_path, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_report_writer_alert_watches_the_charts_cronjob(tmp_path):
    """VgateReportMissing reads kube-state-metrics, not vgate: given the series it exports for the
    chart's own CronJob, silent for three hours, it fires; without any series for it (no
    kube-state-metrics, or another CronJob only) it fires too, saying so; succeeding, it does not."""
    cronjob = report_writer()
    rules = chart_rules()
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump({"groups": [{"name": "vgate", "rules": rules}]}))
    [rule] = [r for r in rules if r["alert"] == "VgateReportMissing"]
    fires = [{"exp_labels": rule["labels"], "exp_annotations": rule["annotations"]}]
    ours = f'kube_cronjob_status_last_successful_time{{cronjob="{cronjob}",namespace="vgate-system"}}'
    cases = [([{"series": ours, "values": "0x300"}], fires),  # the last success at t=0, never again
             ([{"series": ours.replace(cronjob, "other"), "values": "0x300"}], fires),
             ([{"series": ours, "values": "0+60x300"}], [])]
    tests = [{"interval": "1m", "input_series": series_given, "alert_rule_test": [
        {"eval_time": "200m", "alertname": "VgateReportMissing", "exp_alerts": expected}]}
        for series_given, expected in cases]
    (tmp_path / "test.yaml").write_text(yaml.safe_dump({"rule_files": ["rules.yaml"], "tests": tests}))
    done = subprocess.run(["promtool", "test", "rules", "test.yaml"], cwd=tmp_path, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr


def test_drift_fires_at_once_and_stops_when_it_stops(start_server, tmp_path):
    """VgateSensitiveWorkloadDrift on the server's own series: every vgate_drift_total label at 0
    from the start (so increase() sees the first drift), then one drift: it fires within the minute;
    quiet again a quarter of an hour later."""
    port = free_port()
    server = start_server(workers=1, extra_args=("--metrics-bind", f"127.0.0.1:{port}"))
    scrapes = traffic(server, port, rounds=2)
    assert {k: v for k, v in scrapes[-1].items() if k.startswith("vgate_drift_total")} == {
        f'vgate_drift_total{{what="{what}"}}': 0.0 for what in ("encryption", "taint", "zone")}
    drifted = {**scrapes[-1], 'vgate_drift_total{what="encryption"}': 1.0}
    (tmp_path / "at-once").mkdir()
    (tmp_path / "later").mkdir()
    firing(tmp_path / "at-once", [*scrapes, drifted], len(scrapes), {"VgateSensitiveWorkloadDrift"})
    firing(tmp_path / "later", [*scrapes, drifted, drifted], len(scrapes) + 20, set())  # no more drift
