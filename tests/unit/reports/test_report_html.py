"""The HTML report in a real browser: headless Chromium renders it with no console message and no
request leaving the page (its CSP is default-src 'none', so any attempt would be logged)."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from datetime import datetime, timedelta, timezone

from webhook.audit.log import DecisionLog
from webhook.reports.build import build_report
from webhook.reports.keys import ensure_key

from helpers import POLICIES, ROOT

CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--enable-logging=stderr", "--v=0", "--window-size=1280,2400"]
ARTIFACTS = ROOT / ".ci" / "artifacts"


def chromium(*args: str) -> subprocess.CompletedProcess:
    browser = shutil.which("chromium")
    assert browser, "chromium is required (Debian package chromium); .ci/run installs it"
    with tempfile.TemporaryDirectory() as profile:
        return subprocess.run([browser, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *args],
                              capture_output=True, text=True, timeout=120)


def test_html_report_renders_without_console_messages_or_requests(tmp_path):
    log = DecisionLog(tmp_path / "audit", replica="html")
    for n in range(40):
        denied = n % 4 == 0
        log.record({"endpoint": "validate", "uid": f"u{n}", "user": "alice", "operation": "CREATE", "kind": "v1/Pod",
                    "namespace": "ml-training", "name": f"pod-{n}", "dryRun": False, "allowed": not denied,
                    "decision": "denied" if denied else "allowed", "policyRevision": "r1",
                    "rules": [{"id": "security-host-ports", "action": "deny", "message": "opens host ports [80]"}]
                    if denied else []})
    key = tmp_path / "report.key"
    ensure_key(key)
    hour = datetime.now(timezone.utc).replace(minute=0, second=0, microsecond=0)
    out = build_report(hour, tmp_path / "audit", tmp_path / "reports", POLICIES, key, now=hour + timedelta(hours=2))
    page = f"file://{out / 'report.html'}"
    dom = chromium("--dump-dom", page)
    assert dom.returncode == 0, dom.stderr
    assert "vgate compliance report" in dom.stdout and "<svg" in dom.stdout
    assert "opens host ports [80]" in dom.stdout
    assert "等保2.0 控制点覆盖 · MLPS 2.0 (等保2.0) control coverage" in dom.stdout  # both languages by default
    assert "安全计算环境 / 访问控制" in dom.stdout and '<html lang="zh-CN">' in dom.stdout
    fonts = subprocess.run(["fc-list", ":lang=zh"], capture_output=True, text=True).stdout
    assert "CJK" in fonts, "a CJK font (Debian fonts-noto-cjk; .ci/run installs it) renders the Chinese"
    console = [line for line in dom.stderr.splitlines() if "CONSOLE" in line]
    assert console == [], console
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    screenshot = ARTIFACTS / "report.png"
    shot = chromium(f"--screenshot={screenshot}", page)
    assert shot.returncode == 0 and screenshot.stat().st_size > 10_000
    assert [line for line in shot.stderr.splitlines() if "CONSOLE" in line] == []
